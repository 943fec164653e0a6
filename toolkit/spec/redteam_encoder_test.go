package spec

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"
)

// Red-team checks of the encoder across failed encodings and concurrent
// callers, written against a change that reused its arrays between
// encodings (left out): after any mix of failures, the next encoding
// that succeeds is byte for byte a fresh encoder's.

func redteamTools(n int, tag string) []TableTool {
	tools := make([]TableTool, n)
	for i := range tools {
		name := fmt.Sprintf("tool%05d", i)
		tools[i] = TableTool{Name: name, SourceName: name, Description: fmt.Sprintf("Tool %d of the table %s.", i, tag),
			InputSchema: []byte(`{"type":"object"}`), ToolSet: ObjectReference{Namespace: "ns", Name: "ts"}}
	}
	return tools
}

func redteamFresh(t *testing.T, tools []TableTool) []TablePart {
	t.Helper()
	want, err := NewTableEncoderChunked(4<<10, 16<<10).Encode(&Table{Tools: tools}, "t", TableStored{})
	if err != nil {
		t.Fatalf("fresh encoder: %v", err)
	}
	return want
}

// checkHeld checks that the entries the encoder holds are in order, as
// the next encoding's merge with them needs.
func checkHeld(t *testing.T, e *TableEncoder, step int, what string) {
	t.Helper()
	for i := 1; i < len(e.held.entries); i++ {
		if e.held.entries[i-1].name >= e.held.entries[i].name {
			t.Fatalf("step %d (%s): held entries out of order at %d", step, what, i)
		}
	}
}

// TestRedteamEncoderSpareAcrossFailures mixes with successful encodings
// every way one can fail (a duplicate name, a tool whose _meta does not
// marshal midway through the table, a table too large for its parts, a
// held segment that does not read back) and EncodeEntries, and checks
// after each that the next successful encoding is byte-identical to a
// fresh encoder's.
func TestRedteamEncoderSpareAcrossFailures(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	base := redteamTools(1500, "v0")
	tools := slices.Clone(base)
	e := NewTableEncoderChunked(4<<10, 16<<10)
	failed := map[string]int{}
	defer func() { t.Logf("failed encodings by kind: %v", failed) }()
	for step := range 120 {
		// Change a few tools, or drop or add some.
		switch r.IntN(4) {
		case 0:
			for range 1 + r.IntN(5) {
				tools[r.IntN(len(tools))].Description += " More."
			}
		case 1:
			if len(tools) > 100 {
				i := r.IntN(len(tools) - 50)
				tools = slices.Delete(slices.Clone(tools), i, i+1+r.IntN(40))
			}
		case 2:
			tools = slices.Clone(base[:200+r.IntN(len(base)-200)])
		}
		what := ""
		switch op := r.IntN(7); op {
		case 0: // duplicate name
			what = "duplicate"
			bad := append(slices.Clone(tools), tools[r.IntN(len(tools))])
			if _, err := e.Encode(&Table{Tools: bad}, "t", TableStored{}); err == nil {
				t.Fatalf("step %d: duplicate accepted", step)
			}
			failed[what]++
		case 1: // a tool that does not marshal, midway
			what = "unmarshallable _meta"
			bad := slices.Clone(tools)
			bad[len(bad)/2].Meta = map[string]any{"x": math.NaN()}
			ptrs := make([]*TableTool, len(bad))
			for i := range bad {
				ptrs[i] = &bad[i]
			}
			if _, err := e.EncodeTools(ptrs, "t", TableStored{}); err == nil {
				t.Fatalf("step %d: NaN _meta accepted", step)
			}
			failed[what]++
		case 2: // too many parts
			what = "too large"
			if _, err := e.Encode(&Table{Tools: tools}, "t", TableStored{MaxParts: 2}); err != nil {
				failed[what]++
			}
		case 3: // a held segment that does not read back
			what = "corrupt held"
			if n := len(e.held.segs); n > 1 && e.held.segs[n-1].members != nil {
				last := &e.held.segs[n-1]
				z := slices.Clone(last.members[0].z)
				z[len(z)/2] ^= 0xff
				last.members = []heldMember{{sum: last.members[0].sum, z: z}}
				e.members = nil // so the member is not found by digest
				changed := slices.Clone(tools)
				changed[len(changed)-1].Description += " Changed last."
				if _, err := e.Encode(&Table{Tools: changed}, "t", TableStored{}); err != nil {
					failed[what]++
				}
			}
		case 4: // EncodeEntries
			what = "EncodeEntries"
			entries, err := MarshalTableEntries(&Table{Tools: tools})
			if err != nil {
				t.Fatal(err)
			}
			got, err := e.EncodeEntries(entries, "t", TableStored{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, redteamFresh(t, tools)) {
				t.Fatalf("step %d: EncodeEntries differs from a fresh encoder's", step)
			}
		}
		checkHeld(t, e, step, what)
		// The successful write that follows.
		ptrs := make([]*TableTool, len(tools))
		for i := range tools {
			ptrs[len(tools)-1-i] = &tools[i] // unsorted, by reference
		}
		got, err := e.EncodeTools(ptrs, "t", TableStored{})
		if err != nil {
			t.Fatalf("step %d, after %s: %v", step, what, err)
		}
		checkHeld(t, e, step, what+", then a write")
		if !reflect.DeepEqual(got, redteamFresh(t, tools)) {
			t.Fatalf("step %d, after %s: the encoding differs from a fresh encoder's", step, what)
		}
		// The caller reuses its tools for something else: the encoder must
		// not see it.
		for i := range tools {
			tools[i].Title = ""
		}
	}
}

// TestRedteamEncoderConcurrentReuse: goroutines share one encoder, each
// encoding tables of its own, by value, by reference and as entries; every
// result is a fresh encoder's. Run with -race.
func TestRedteamEncoderConcurrentReuse(t *testing.T) {
	e := NewTableEncoderChunked(4<<10, 16<<10)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	tables := make([][]TableTool, 6)
	wants := make([][]TablePart, 6)
	for g := range tables {
		tables[g] = redteamTools(300+g*150, fmt.Sprintf("g%d", g))
		wants[g] = redteamFresh(t, tables[g])
	}
	for g := range tables {
		wg.Go(func() {
			tools := tables[g]
			for k := range 15 {
				var got []TablePart
				var err error
				switch k % 3 {
				case 0:
					got, err = e.Encode(&Table{Tools: tools}, "t", TableStored{})
				case 1:
					ptrs := make([]*TableTool, len(tools))
					for i := range tools {
						ptrs[i] = &tools[i]
					}
					got, err = e.EncodeTools(ptrs, "t", TableStored{})
				default:
					var entries []TableEntryJSON
					if entries, err = MarshalTableEntries(&Table{Tools: tools}); err == nil {
						got, err = e.EncodeEntries(entries, "t", TableStored{})
					}
				}
				if err != nil {
					errs <- fmt.Errorf("goroutine %d, round %d: %w", g, k, err)
					return
				}
				if !reflect.DeepEqual(got, wants[g]) {
					errs <- fmt.Errorf("goroutine %d, round %d: differs from a fresh encoder's", g, k)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	checkHeld(t, e, -1, "concurrent")
}
