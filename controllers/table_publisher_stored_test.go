package controllers

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/toolplane/toolplane/controllers/ownership"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// storedRebuilt is stored as it was before it updated inTable in place: a
// new map of every name per write. The reference of the spec and the
// baseline of the benchmark below.
func (p *TablePublisher) storedRebuilt(tools []*spec.TableTool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	next := make(map[string]*spec.TableTool, len(tools))
	for _, e := range tools {
		next[e.Name] = e
	}
	told := false
	for ts := range p.unwritten {
		c := p.claims[ts]
		if c == nil {
			delete(p.unwritten, ts)
			continue
		}
		for _, t := range c.tools {
			if e, ok := next[t.Name]; ok && storedOwnerOf(e).toolSet == ts && (p.inTable[t.Name] == nil || storedOwnerOf(p.inTable[t.Name]) != storedOwnerOf(e)) {
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

// toolSetKeys returns n ToolSets of one namespace, ts-0 to ts-<n-1>.
func toolSetKeys(n int) []types.NamespacedName {
	keys := make([]types.NamespacedName, n)
	for i := range keys {
		keys[i] = types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("ts-%d", i)}
	}
	return keys
}

// TestStoredInPlace checks stored against storedRebuilt over random
// sequences of written tables: the same names under the same ToolSets, the
// same ToolSets told and still waiting, the same notification.
func TestStoredInPlace(t *testing.T) {
	const toolSets, names = 6, 12
	keys := toolSetKeys(toolSets)
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
			// One tool changed a write: its entry in turn one of two.
			tables := [2][]*spec.TableTool{slices.Clone(table), slices.Clone(table)}
			changed := *table[len(table)/2]
			changed.Description = "changed"
			tables[1][len(table)/2] = &changed
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				store(tables[i%2])
				i++
			}
			b.ReportMetric(held, "held-MiB")
			runtime.KeepAlive(p)
		})
	}
}

// TestStoredLetsGoOfReplacedClaims checks that inTable holds the entries of
// the claims as they are now, not those of a claim replaced since the last
// write: an offer of the same tools in a new slice writes nothing, and the
// old slice must not stay live through inTable until some other write.
func TestStoredLetsGoOfReplacedClaims(t *testing.T) {
	p := &TablePublisher{}
	p.init()
	ts := types.NamespacedName{Namespace: "ns", Name: "ts"}
	other := types.NamespacedName{Namespace: "ns", Name: "other"}
	tools := func(uid string, names ...string) []spec.TableTool {
		out := make([]spec.TableTool, len(names))
		for i, n := range names {
			out[i] = spec.TableTool{Name: n, ToolSet: spec.ObjectReference{Namespace: ts.Namespace, Name: ts.Name}, ToolSetUID: uid}
		}
		return out
	}
	first := tools("uid-1", "a", "b", "c")
	p.mu.Lock()
	p.putClaim(ts, &claim{uid: "uid-1", tools: first, sizes: entrySizes(first)}, nil)
	p.mu.Unlock()
	// "c" is stored under another ToolSet, as if the claim had lost it.
	c := first[2]
	c.ToolSet.Name = other.Name
	p.stored([]*spec.TableTool{&first[0], &first[1], &c})

	again := tools("uid-1", "a", "b", "c")
	p.mu.Lock()
	p.putClaim(ts, &claim{uid: "uid-1", tools: again, sizes: entrySizes(again)}, nil)
	p.mu.Unlock()
	for i, name := range []string{"a", "b"} {
		if p.inTable[name] != &again[i] {
			t.Errorf("inTable[%q] is not the entry of the claim as it is now", name)
		}
	}
	if p.inTable["c"] != &c {
		t.Errorf("inTable[%q] moved to a claimant its stored entry does not name", "c")
	}

	// Another object under the name: not the stored owner.
	recreated := tools("uid-2", "a", "b", "c")
	p.mu.Lock()
	p.putClaim(ts, &claim{uid: "uid-2", tools: recreated, sizes: entrySizes(recreated)}, nil)
	p.mu.Unlock()
	if p.inTable["a"] != &again[0] {
		t.Errorf("inTable[%q] moved to a ToolSet of another UID", "a")
	}
	if got := p.Written(ts); len(got) != 0 {
		t.Errorf("Written(%s) = %v for a ToolSet created again, want none", ts, got)
	}
}

// TestReadBackHoldsNoneOfTheTable checks inTable as restore sets it from a
// table read back: the owner each name's last entry names, as the table
// says; the entries of ToolSets kept are their restored claims', and no
// entry is one of the table's own, so the table read back is not kept live.
func TestReadBackHoldsNoneOfTheTable(t *testing.T) {
	entry := func(name, ts, uid string) spec.TableTool {
		return spec.TableTool{Name: name, ToolSet: spec.ObjectReference{Namespace: "ns", Name: ts}, ToolSetUID: uid}
	}
	table := &spec.Table{Tools: []spec.TableTool{
		entry("a", "kept", "k"), entry("b", "kept", "k"),
		entry("c", "gone", "g"),
		entry("d", "kept", "k"), entry("d", "gone", "g"), // the last entry of a name stands
		entry("e", "gone", "g"), entry("e", "kept", "k"),
		entry("f", "kept", "old-uid"), // created again: not the claim's
	}}
	kept := &claim{uid: "k", tools: []spec.TableTool{entry("a", "kept", "k"), entry("b", "kept", "k"), entry("e", "kept", "k")}}
	restored := map[types.NamespacedName]*claim{{Namespace: "ns", Name: "kept"}: kept}

	got := readBack(table, restored)
	want := map[string]storedOwner{
		"a": {types.NamespacedName{Namespace: "ns", Name: "kept"}, "k"},
		"b": {types.NamespacedName{Namespace: "ns", Name: "kept"}, "k"},
		"c": {types.NamespacedName{Namespace: "ns", Name: "gone"}, "g"},
		"d": {types.NamespacedName{Namespace: "ns", Name: "gone"}, "g"},
		"e": {types.NamespacedName{Namespace: "ns", Name: "kept"}, "k"},
		"f": {types.NamespacedName{Namespace: "ns", Name: "kept"}, "old-uid"},
	}
	if len(got) != len(want) {
		t.Fatalf("readBack has %d names, want %d", len(got), len(want))
	}
	for name, o := range want {
		e := got[name]
		if e == nil || e.Name != name || storedOwnerOf(e) != o {
			t.Errorf("readBack[%q] = %+v, want under %v", name, e, o)
		}
		for i := range table.Tools {
			if e == &table.Tools[i] {
				t.Errorf("readBack[%q] is an entry of the table read back", name)
			}
		}
	}
	for i, name := range []string{"a", "b", "e"} {
		if got[name] != &kept.tools[i] {
			t.Errorf("readBack[%q] is not the restored claim's entry", name)
		}
	}
}

// TestReadBackKeepsOnlyTheOwnersOfToolSetsGone checks that for a ToolSet
// gone at start inTable keeps what it reads, the name and the owner, and
// not the entry's schemas and description until the first write.
func TestReadBackKeepsOnlyTheOwnersOfToolSetsGone(t *testing.T) {
	table := &spec.Table{Tools: []spec.TableTool{{Name: "c", Description: "a long description",
		InputSchema: make([]byte, 64<<10), ToolSet: spec.ObjectReference{Namespace: "ns", Name: "gone"}, ToolSetUID: "g"}}}
	e := readBack(table, nil)["c"]
	if len(e.InputSchema) > 0 || e.Description != "" {
		t.Errorf("readBack keeps %d bytes of schema and the description of an entry of a ToolSet gone", len(e.InputSchema))
	}
	if want := (storedOwner{types.NamespacedName{Namespace: "ns", Name: "gone"}, "g"}); storedOwnerOf(e) != want {
		t.Errorf("readBack keeps %v as the owner, want %v", storedOwnerOf(e), want)
	}
}

// TestStoredWriteInFlightLetsReplacedClaimGo: a write's snapshot
// (tableTools, taken under p.mu) is recorded by stored only once the API
// writes are done, without p.mu in between. An offer of the same tools in a
// new slice that comes meanwhile moves inTable to the new slice (putClaim);
// the write ending must not put it back on the slice the claim let go: the
// offer writes nothing, so that slice would stay live through inTable until
// some later write.
func TestStoredWriteInFlightLetsReplacedClaimGo(t *testing.T) {
	ctx := context.Background()
	p := loadedPublisher(&TablePublisher{})
	ts := types.NamespacedName{Namespace: "ns", Name: "ts"}
	slice := func() []spec.TableTool {
		out := make([]spec.TableTool, 100)
		for i := range out {
			out[i] = spec.TableTool{Name: fmt.Sprintf("tool-%03d", i), Description: "d",
				ToolSet: spec.ObjectReference{Namespace: ts.Namespace, Name: ts.Name}, ToolSetUID: "uid-1"}
		}
		return out
	}
	offer := func(tools []spec.TableTool) {
		if _, err := p.Offer(ctx, Offer{ToolSet: ts, UID: "uid-1", Created: metav1.Unix(1, 0), Tools: tools}); err != nil {
			t.Fatal(err)
		}
	}
	freed := make(chan struct{})
	func() {
		first := slice()
		runtime.AddCleanup(&first[0], func(ch chan struct{}) { close(ch) }, freed)
		offer(first)
		<-p.kick
		// A write starts: its snapshot, taken under p.mu.
		tools, _, _ := p.tableTools()
		// While its ConfigMaps are written, the same tools come again in a
		// new slice: nothing to write.
		offer(slice())
		if len(p.kick) > 0 {
			t.Fatal("the same tools offered again kicked a write")
		}
		// The write ends.
		p.stored(tools)
	}()
	cur := p.claims[ts].tools
	for i := range cur {
		if p.inTable[cur[i].Name] != &cur[i] {
			t.Errorf("inTable[%q] = %p is not the entry of the claim as it is now, %p", cur[i].Name, p.inTable[cur[i].Name], &cur[i])
			break
		}
	}
	for range 50 { // up to a second: the cleanup runs on a goroutine of its own after a collection
		runtime.GC()
		select {
		case <-freed:
			runtime.KeepAlive(p)
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Error("the slice the claim replaced is still live, held by inTable; no write follows to let it go")
	runtime.KeepAlive(p)
}

// TestStoredOwnersAsBefore checks, over random sequences of claims
// replaced (new slices, same or other UIDs, names dropped) and writes (of
// the claims as they are, of a stale snapshot, of fresh entries), that the
// owners inTable names and Written's answers are those of the storedOwner
// values the old code kept.
func TestStoredOwnersAsBefore(t *testing.T) {
	for _, stale := range []bool{false, true} {
		t.Run(fmt.Sprintf("stale=%v", stale), func(t *testing.T) { storedOwnersAsBefore(t, stale) })
	}
}

func storedOwnersAsBefore(t *testing.T, stale bool) {
	const toolSets, names = 4, 8
	keys := toolSetKeys(toolSets)
	for seed := range uint64(500) {
		rng := rand.New(rand.NewPCG(seed, 99))
		p := &TablePublisher{}
		p.init()
		old := map[string]storedOwner{}
		replaced := map[*spec.TableTool]bool{}
		var snapshot []*spec.TableTool
		for step := range 40 {
			switch rng.IntN(3) {
			case 0: // a claim replaced by a new slice
				k := keys[rng.IntN(toolSets)]
				uid := fmt.Sprintf("%s-uid-%d", k.Name, rng.IntN(2))
				if rng.IntN(6) == 0 {
					uid = ""
				}
				c := &claim{uid: types.UID(uid)}
				for n := range names {
					if rng.IntN(2) == 0 {
						c.tools = append(c.tools, spec.TableTool{Name: fmt.Sprintf("tool-%d", n),
							ToolSet: spec.ObjectReference{Namespace: k.Namespace, Name: k.Name}, ToolSetUID: uid})
					}
				}
				c.sizes = entrySizes(c.tools)
				if prev := p.claims[k]; prev != nil {
					for i := range prev.tools {
						replaced[&prev.tools[i]] = true
					}
				}
				p.mu.Lock()
				p.putClaim(k, c, nil)
				p.mu.Unlock()
			case 1: // a snapshot of the claims as they are, written now or later
				byName := map[string]*spec.TableTool{}
				for _, k := range keys {
					c := p.claims[k]
					for i := range c.toolsOrNil() {
						if rng.IntN(2) == 0 {
							byName[c.tools[i].Name] = &c.tools[i]
						}
					}
				}
				snapshot = snapshot[:0:0]
				for _, e := range byName {
					snapshot = append(snapshot, e)
				}
				if !stale || rng.IntN(2) == 0 {
					break
				}
				fallthrough
			case 2: // a write, of the last snapshot or of fresh entries
				tools := snapshot
				if !stale {
					tools = nil
					seen := map[string]bool{}
					for _, k := range keys {
						c := p.claims[k]
						for i := range c.toolsOrNil() {
							if !seen[c.tools[i].Name] && rng.IntN(2) == 0 {
								seen[c.tools[i].Name] = true
								tools = append(tools, &c.tools[i])
							}
						}
					}
				}
				if rng.IntN(3) == 0 {
					tools = nil
					for n := range names {
						if rng.IntN(2) == 0 {
							k := keys[rng.IntN(toolSets)]
							tools = append(tools, &spec.TableTool{Name: fmt.Sprintf("tool-%d", n),
								ToolSet: spec.ObjectReference{Namespace: k.Namespace, Name: k.Name}, ToolSetUID: fmt.Sprintf("%s-uid-%d", k.Name, rng.IntN(2))})
						}
					}
				}
				p.stored(tools)
				// An entry of a replaced claim, where the claim as it is now
				// has the name under the same owner: nothing changed, so no
				// write is due that would let that claim's slice go.
				for n, e := range p.inTable {
					if !replaced[e] {
						continue
					}
					if cur, ok := findTool(p.claims[storedOwnerOf(e).toolSet].toolsOrNil(), n); ok && storedOwnerOf(cur) == storedOwnerOf(e) {
						t.Fatalf("seed %d step %d: after a write, inTable[%q] holds the entry of a claim replaced since the write's snapshot", seed, step, n)
					}
				}
				old = map[string]storedOwner{}
				for _, e := range tools {
					old[e.Name] = storedOwnerOf(e)
				}
			}
			got := map[string]storedOwner{}
			for n, e := range p.inTable {
				got[n] = storedOwnerOf(e)
			}
			if !maps.Equal(got, old) {
				t.Fatalf("seed %d step %d: owners %v, want %v", seed, step, got, old)
			}
			for _, k := range keys {
				c := p.claims[k]
				want := map[string]bool{}
				for _, tt := range c.toolsOrNil() {
					if o, ok := old[tt.Name]; ok && o.toolSet == k && ownership.SameObject(o.uid, c.uid) {
						want[tt.Name] = true
					}
				}
				if w := p.Written(k); !maps.Equal(w, want) {
					t.Fatalf("seed %d step %d: Written(%s) = %v, want %v", seed, step, k, w, want)
				}
			}
		}
	}
}
