package ownership

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// TestWindowAgreesWithModel drives a Window through random openings, heard
// ToolSets (awaited or not) and closings, and checks after every step that
// it says what a plain set of the ToolSets not yet heard from says.
func TestWindowAgreesWithModel(t *testing.T) {
	var keys []types.NamespacedName
	for i := range 6 {
		keys = append(keys, types.NamespacedName{Namespace: fmt.Sprintf("ns-%d", i%2), Name: fmt.Sprintf("ts-%d", i)})
	}
	var zero Window
	if zero.Restoring() || zero.HoldsWrites() || zero.Awaiting() != 0 || zero.Heard(keys[0]) || zero.Close() {
		t.Fatal("the zero Window is not closed")
	}
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 0x51ed27))
		var w Window
		model := map[types.NamespacedName]bool{}
		restoring, unreadable := false, false
		for step := range 40 {
			what := ""
			switch r := rng.IntN(20); {
			case r == 0 || step == 0:
				clear(model)
				for _, k := range keys {
					if rng.IntN(2) == 0 {
						model[k] = true
					}
				}
				unreadable = rng.IntN(2) == 0
				w.Open(maps.Keys(model), unreadable)
				restoring = len(model) > 0
				what = fmt.Sprintf("open on %d, unreadable %v", len(model), unreadable)
			case r == 1:
				if got := w.Close(); got != restoring {
					t.Fatalf("seed %d step %d: Close reported open %v, want %v", seed, step, got, restoring)
				}
				clear(model)
				restoring = false
				what = "close"
			default:
				k := keys[rng.IntN(len(keys))]
				awaited := model[k]
				delete(model, k)
				want := awaited && len(model) == 0 && restoring
				if want {
					restoring = false
				}
				if got := w.Heard(k); got != want {
					t.Fatalf("seed %d step %d: Heard(%v) closed %v, want %v", seed, step, k, got, want)
				}
				what = fmt.Sprintf("heard %v", k)
			}
			unheard := slices.SortedFunc(maps.Keys(model), compareNN)
			switch {
			case w.Restoring() != restoring:
				t.Fatalf("seed %d step %d (%s): restoring %v, want %v", seed, step, what, w.Restoring(), restoring)
			case w.HoldsWrites() != (restoring && unreadable):
				t.Fatalf("seed %d step %d (%s): holds writes %v, want %v", seed, step, what, w.HoldsWrites(), restoring && unreadable)
			case !slices.Equal(w.Unheard(), unheard) || w.Awaiting() != len(unheard):
				t.Fatalf("seed %d step %d (%s): unheard %v (%d), want %v", seed, step, what, w.Unheard(), w.Awaiting(), unheard)
			case !restoring && len(unheard) > 0:
				t.Fatalf("seed %d step %d (%s): closed, yet awaits %v", seed, step, what, unheard)
			}
			for _, k := range keys {
				if w.Awaits(k) != model[k] {
					t.Fatalf("seed %d step %d (%s): awaits %v: %v, want %v", seed, step, what, k, w.Awaits(k), model[k])
				}
			}
		}
	}
}

// TestWindowHoldsHandOvers restores random tables into an Index held by a
// Window, as the table publisher does after a start, and drives random
// offers, withdrawals and a closing of the window by its bound. While the
// window is open no name changes hands: every owned name keeps the owner
// the table gave it, a ToolSet not heard from keeps its restored names, and
// a name without an owner is Pending for its claimants. Once it is closed,
// by the last ToolSet heard from or by its bound, every claimed name has an
// owner, and the ToolSets not heard from by the bound own nothing.
func TestWindowHoldsHandOvers(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e"}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var keys []types.NamespacedName
	ids := map[types.NamespacedName]Identity{}
	for i := range 4 {
		k := types.NamespacedName{Namespace: fmt.Sprintf("ns-%d", i%2), Name: fmt.Sprintf("ts-%d", i)}
		keys = append(keys, k)
		// Created in an order of their own, not the keys'.
		ids[k] = Identity{Created: t0.Add(time.Duration((i*3)%4) * time.Second), UID: types.UID(k.Name)}
	}
	claimOf := func(k types.NamespacedName, owned []string) *Indexed {
		slices.Sort(owned)
		return &Indexed{Created: ids[k].Created, UID: ids[k].UID, Names: owned, Sizes: make([]int32, len(owned))}
	}
	closings := map[string]int{}
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 0x7f4a7c15))
		var w Window
		x := NewIndex()
		x.Hold = w.Restoring
		// A table read back: each name under one ToolSet or two (a table
		// not written by one leader), or none.
		var read []RestoredEntry
		tables := map[types.NamespacedName][]string{}
		for _, n := range names {
			for range rng.IntN(3) {
				k := keys[rng.IntN(len(keys))]
				if !slices.Contains(tables[k], n) {
					tables[k] = append(tables[k], n)
					read = append(read, RestoredEntry{Name: n, ToolSet: k, UID: ids[k].UID})
				}
			}
		}
		restored := map[types.NamespacedName]bool{}
		for k, owned := range tables {
			x.Put(k, claimOf(k, owned))
			restored[k] = true
		}
		atStart := Restore(read, ids, t0)
		for n, rec := range atStart {
			x.SetOwner(n, rec)
		}
		w.Open(slices.Values(keys), false)
		x.Settle()
		var closedBy string
		var unheardAtClose []types.NamespacedName
		for step := range 30 {
			k := keys[rng.IntN(len(keys))]
			what := ""
			switch r := rng.IntN(10); {
			case r == 0 && w.Restoring():
				// The bound passed: drop what was kept for the ToolSets
				// not heard from, then hand over what waited.
				unheardAtClose = w.Unheard()
				for _, u := range unheardAtClose {
					if restored[u] {
						x.Release(u, types.NamespacedName{})
					}
				}
				w.Close()
				x.Settle()
				closedBy, what = "bound", "the bound"
			case r < 3:
				// Withdraw: heard, then released.
				delete(restored, k)
				if w.Heard(k) {
					x.Settle()
					closedBy = "heard"
				}
				x.Release(k, k)
				what = fmt.Sprintf("%v withdraws", k)
			default:
				var owned []string
				for _, n := range names {
					if rng.IntN(2) == 0 {
						owned = append(owned, n)
					}
				}
				x.Offer(k, claimOf(k, owned), nil)
				delete(restored, k)
				if w.Heard(k) {
					x.Settle()
					closedBy = "heard"
				}
				what = fmt.Sprintf("%v offers %v", k, owned)
			}
			ledger := x.Ledger()
			if w.Restoring() {
				for n, rec := range ledger {
					if rec.Owner != atStart[n].Owner {
						t.Fatalf("seed %d step %d (%s): %q passed to %v while the window is open (owner at start %v)", seed, step, what, n, rec.Owner, atStart[n].Owner)
					}
				}
				for n, rec := range atStart {
					if w.Awaits(rec.Owner) && ledger[n].Owner != rec.Owner {
						t.Fatalf("seed %d step %d (%s): %q of %v, not heard from, is not kept", seed, step, what, n, rec.Owner)
					}
				}
				for n, cs := range x.All() {
					if _, owned := ledger[n]; owned {
						continue
					}
					for ts := range cs.All() {
						if v := x.Verdicts(ts)[n]; v.State != Pending {
							t.Fatalf("seed %d step %d (%s): %q without an owner is %s for %v, want Pending", seed, step, what, n, v.State, ts)
						}
					}
				}
				continue
			}
			for n, cs := range x.All() {
				if _, owned := ledger[n]; !owned && cs.Len() > 0 {
					t.Fatalf("seed %d step %d (%s): window closed, yet %q is claimed and owned by nobody", seed, step, what, n)
				}
			}
			for n, rec := range ledger {
				if restored[rec.Owner] {
					t.Fatalf("seed %d step %d (%s): %v, not heard from by the bound, still owns %q", seed, step, what, rec.Owner, n)
				}
			}
			if closedBy == "heard" && len(unheardAtClose) > 0 {
				t.Fatalf("seed %d: closed by the last ToolSet heard, with %v unheard", seed, unheardAtClose)
			}
		}
		closings[closedBy]++
	}
	// Both ways of closing are drawn.
	if closings["heard"] == 0 || closings["bound"] == 0 {
		t.Fatalf("closings drawn: %v", closings)
	}
}
