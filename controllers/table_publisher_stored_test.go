package controllers

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// storedRebuilt is stored as it was before it updated inTable in place: a
// new map of every name per write. The reference of the spec and the
// baseline of the benchmark below.
func (p *TablePublisher) storedRebuilt(tools []*spec.TableTool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	next := ownersOf(tools)
	told := false
	for ts := range p.unwritten {
		c := p.claims[ts]
		if c == nil {
			delete(p.unwritten, ts)
			continue
		}
		for _, t := range c.tools {
			if o, ok := next[t.Name]; ok && o.toolSet == ts && p.inTable[t.Name] != o {
				p.pending[ts] = struct{}{}
				delete(p.unwritten, ts)
				told = true
				break
			}
		}
	}
	p.inTable = next
	if told {
		p.notifyLocked()
	}
}

// TestStoredInPlace checks stored against storedRebuilt over random
// sequences of written tables: the same names under the same ToolSets, the
// same ToolSets told and still waiting, the same notification.
func TestStoredInPlace(t *testing.T) {
	const toolSets, names = 6, 12
	keys := make([]types.NamespacedName, toolSets)
	for i := range keys {
		keys[i] = types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("ts-%d", i)}
	}
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 27))
		a, b := &TablePublisher{}, &TablePublisher{}
		a.init()
		b.init()
		for step := range 12 {
			// Claims: each ToolSet claims a random subset of the names,
			// sorted, or has no claim; some wait for a write.
			claims := map[types.NamespacedName]*claim{}
			unwritten := map[types.NamespacedName]struct{}{}
			for _, k := range keys {
				if rng.IntN(4) > 0 {
					c := &claim{uid: types.UID(k.Name)}
					for n := range names {
						if rng.IntN(3) == 0 {
							c.tools = append(c.tools, spec.TableTool{Name: fmt.Sprintf("tool-%02d", n)})
						}
					}
					claims[k] = c
				}
				if rng.IntN(3) == 0 {
					unwritten[k] = struct{}{}
				}
			}
			// The table written: each name once, under a random ToolSet
			// and UID, or absent.
			var tools []*spec.TableTool
			for n := range names {
				if rng.IntN(4) == 0 {
					continue
				}
				k := keys[rng.IntN(toolSets)]
				uid := k.Name
				if rng.IntN(5) == 0 {
					uid = "other"
				}
				tools = append(tools, &spec.TableTool{Name: fmt.Sprintf("tool-%02d", n),
					ToolSet: spec.ObjectReference{Namespace: k.Namespace, Name: k.Name}, ToolSetUID: uid})
			}
			for _, p := range []*TablePublisher{a, b} {
				p.claims = claims
				p.unwritten = maps.Clone(unwritten)
				p.pending = map[types.NamespacedName]struct{}{}
			}
			a.storedRebuilt(tools)
			b.stored(tools)
			if !maps.Equal(a.inTable, b.inTable) {
				t.Fatalf("seed %d step %d: inTable %v, want %v", seed, step, b.inTable, a.inTable)
			}
			if !maps.Equal(a.pending, b.pending) || !maps.Equal(a.unwritten, b.unwritten) {
				t.Fatalf("seed %d step %d: told %v, waiting %v; want told %v, waiting %v", seed, step, b.pending, b.unwritten, a.pending, a.unwritten)
			}
			if len(a.notify) != len(b.notify) {
				t.Fatalf("seed %d step %d: %d notifications, want %d", seed, step, len(b.notify), len(a.notify))
			}
			for _, p := range []*TablePublisher{a, b} {
				select {
				case <-p.notify:
				default:
				}
			}
		}
	}
}

// BenchmarkStored records a write of the table of make bench-scale at
// 5,000 ToolSets (50,000 names), one tool changed since the last: "rebuilt"
// makes a new map of every name, as each write did before (the baseline, in
// the same run), "in-place" is stored. held-MiB is what the record of the
// table takes between writes.
//
//	go test ./controllers -run '^$' -bench BenchmarkStored -benchmem -count 6
func BenchmarkStored(b *testing.B) {
	const toolSets, tools = 5000, 10
	table := make([]*spec.TableTool, 0, toolSets*tools)
	for i := range toolSets {
		for j := range tools {
			table = append(table, &spec.TableTool{Name: fmt.Sprintf("ts%04d_%02d", i, j),
				ToolSet:    spec.ObjectReference{Namespace: fmt.Sprintf("ns-%03d", i/50), Name: fmt.Sprintf("ts-%04d", i)},
				ToolSetUID: fmt.Sprintf("8c5d2a4e-0000-4000-8000-%012d", i)})
		}
	}
	for _, mode := range []string{"rebuilt", "in-place"} {
		b.Run(mode, func(b *testing.B) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			p := &TablePublisher{}
			p.init()
			store := p.stored
			if mode == "rebuilt" {
				store = p.storedRebuilt
			}
			store(table)
			runtime.GC()
			runtime.ReadMemStats(&after)
			held := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / (1 << 20)
			b.ReportAllocs()
			for b.Loop() {
				store(table)
			}
			b.ReportMetric(held, "held-MiB")
			runtime.KeepAlive(p)
		})
	}
}
