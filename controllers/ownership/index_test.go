package ownership

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// TestIndexAgreesWithDecide drives an Index through random offers (names
// added, dropped, denied, re-created under another UID), withdrawals,
// policy changes, holds and compressed ceilings, under random budgets, as
// the table publisher does, and checks after every step that what it
// keeps incrementally (the ledger, every verdict, the counts its budget
// looks at) is what Decide makes from scratch of the ledger before the
// step and every claim after it.
func TestIndexAgreesWithDecide(t *testing.T) {
	indexAgreesWithDecide(t, indexModel{
		seeds: 60, steps: 80, ops: 13, toolSets: 6, namespaces: 3,
		names: []string{"a", "b", "c", "d", "e", "f", "pay_x"},
		budgets: []Budget{
			{},
			{MaxToolsPerNamespace: 2},
			{MaxTableBytes: 900},
			{MaxToolsPerNamespace: 3, MaxTableBytes: 1400},
		},
	})
}

// indexModel is what indexAgreesWithDecide draws from.
type indexModel struct {
	seeds, steps uint64
	// ops: 13 draws the ops of TestIndexAgreesWithDecide; more adds budget
	// changes, drawn from budgets, and offers of one entry resized.
	ops                  int
	toolSets, namespaces int
	names                []string
	// sizes: an entry weighs 80 to 80+sizes bytes (300 if zero).
	sizes int
	// own: each ToolSet draws from this many names of its own too (fewer
	// than 10), which no other claims.
	own int
	// quiet: holds begin, and compressed ceilings are set, one time in
	// quiet of what TestIndexAgreesWithDecide draws (zero: every time).
	quiet   int
	budgets []Budget
}

// indexAgreesWithDecide is TestIndexAgreesWithDecide under m, and returns
// how many decisions the index made, and how many of them incrementally.
func indexAgreesWithDecide(t *testing.T, m indexModel) (incremental, decisions int) {
	t.Helper()
	seeds, names, budgets := m.seeds, m.names, m.budgets
	sizes := cmp.Or(m.sizes, 300)
	policySets := [][]Policy{
		nil,
		{{Name: "pay", Names: []string{"pay_*"}, Namespaces: []string{"ns-2"}}},
		{{Name: "locked", Names: []string{"c"}}},
	}
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
		budget := budgets[int(seed)%len(budgets)]
		var ceiling int64
		hold := false
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		x := NewIndex()
		// Weights as the publisher's: a size, times how well the claim
		// compresses (here a ratio of its own).
		ratio := map[types.NamespacedName]float64{}
		x.Budget = func() Budget {
			b := budget
			b.MaxEncodedBytes = ceiling
			return b
		}
		x.Hold = func() bool { return hold }
		x.Now = func() time.Time { return now }
		x.Weigh = func(ts types.NamespacedName, i int) int64 {
			return max(int64(float64(x.Claim(ts).Sizes[i])*ratio[ts]), 1)
		}
		var keys []types.NamespacedName
		for i := range m.toolSets {
			keys = append(keys, types.NamespacedName{Namespace: fmt.Sprintf("ns-%d", i%m.namespaces), Name: fmt.Sprintf("ts-%d", i)})
		}
		// world is what every ToolSet claims now, by which object.
		world := map[types.NamespacedName]*Indexed{}
		created := map[types.NamespacedName]time.Time{}
		uid := map[types.NamespacedName]types.UID{}
		serial := 0
		newObject := func(ts types.NamespacedName) {
			serial++
			// Creation times in whole seconds, as the API server's: ties.
			created[ts] = now.Add(-time.Duration(rng.IntN(4)) * time.Second).Truncate(time.Second)
			uid[ts] = types.UID(fmt.Sprintf("uid-%d", serial))
		}
		for _, ts := range keys {
			newObject(ts)
		}
		input := func() Input {
			in := Input{Rule: x.Rule(), Budget: x.Budget(), Hold: hold, Now: now}
			for _, ts := range slices.SortedFunc(maps.Keys(world), compareNN) {
				c := world[ts]
				cl := Claim{ToolSet: ts, Created: c.Created, UID: c.UID, Denied: c.Denied, Names: c.Names}
				for i := range c.Names {
					cl.Bytes = append(cl.Bytes, int64(c.Sizes[i]))
					if ceiling > 0 {
						cl.Encoded = append(cl.Encoded, max(int64(float64(c.Sizes[i])*ratio[ts]), 1))
					}
				}
				in.Claims = append(in.Claims, cl)
			}
			return in
		}
		var ledger Ledger
		for step := range m.steps {
			where := fmt.Sprintf("seed %d step %d", seed, step)
			now = now.Add(time.Second)
			ts := keys[rng.IntN(len(keys))]
			before, full := x.incDecisions, x.fullDecisions
			switch op := rng.IntN(m.ops); {
			case op >= 14:
				// One entry of a claim resized, as when a tool's
				// description changes: the offer the budget weighs most.
				if old := x.Claim(ts); old != nil {
					c := &Indexed{Created: old.Created, UID: old.UID, Names: old.Names,
						Sizes: slices.Clone(old.Sizes), Denied: old.Denied}
					c.Sizes[rng.IntN(len(c.Sizes))] = int32(80 + rng.IntN(sizes))
					x.Offer(ts, c, nil)
					world[ts] = c
				}
				x.Rebudget()
			case op == 13:
				// The admin changed the budget.
				budget = budgets[rng.IntN(len(budgets))]
				x.Rebudget()
			case op >= 11:
				// The same claim again, in new slices, as a scrape of an
				// unchanged ToolSet offers it: the index need not decide
				// again, and must agree with Decide all the same.
				if old := x.Claim(ts); old != nil {
					c := &Indexed{Created: old.Created, UID: old.UID, Names: slices.Clone(old.Names),
						Sizes: slices.Clone(old.Sizes), Denied: maps.Clone(old.Denied)}
					x.Offer(ts, c, nil)
					world[ts] = c
				}
				x.Rebudget()
			case op <= 6:
				if op == 6 {
					// Deleted and created again, with no withdraw between:
					// the old object lets go first, a decision of its own.
					if x.Claim(ts) != nil {
						delete(world, ts)
						ledger = Decide(ledger, input()).Ledger
					}
					newObject(ts)
				}
				c := &Indexed{Created: created[ts], UID: uid[ts]}
				candidates := slices.Clone(names)
				for k := range m.own {
					// Names of its own, after the shared ones.
					candidates = append(candidates, fmt.Sprintf("%s_%d", ts.Name, k))
				}
				for _, name := range candidates {
					if rng.IntN(2) == 0 {
						continue
					}
					c.Names = append(c.Names, name)
					c.Sizes = append(c.Sizes, int32(80+rng.IntN(sizes)))
					if rng.IntN(8) == 0 {
						if c.Denied == nil {
							c.Denied = map[string]Denial{}
						}
						c.Denied[name] = Denial{Policy: OverBudget, Reason: "per ToolSet"}
					}
				}
				if old := x.Claim(ts); old != nil && old.UID != c.UID {
					x.Release(ts, ts)
					x.Rebudget()
				}
				ratio[ts] = 0.2 + rng.Float64()
				x.Offer(ts, c, nil)
				x.Rebudget()
				if len(c.Names) == 0 {
					delete(world, ts)
				} else {
					world[ts] = c
				}
			case op == 7:
				x.Release(ts, ts)
				x.Rebudget()
				delete(world, ts)
			case op == 8:
				rule, err := NewRule(policySets[rng.IntN(len(policySets))])
				if err != nil {
					t.Fatal(err)
				}
				x.SetRule(rule)
				x.Settle()
				x.Rebudget()
			case op == 9:
				if m.quiet > 0 && !hold && rng.IntN(m.quiet) != 0 {
					x.Rebudget()
					break
				}
				hold = !hold
				x.Settle()
				x.Rebudget()
			default:
				// A table that did not fit its ConfigMaps, or one that did.
				ceiling = 0
				if rng.IntN(2) == 0 && (m.quiet == 0 || rng.IntN(m.quiet) == 0) {
					ceiling = int64(200 + rng.IntN(1500))
				}
				x.Rebudget()
			}
			x.Drain(func(types.NamespacedName) {})
			incremental += x.incDecisions - before
			decisions += x.incDecisions - before + x.fullDecisions - full

			d := Decide(ledger, input())
			ledger = d.Ledger
			if !reflect.DeepEqual(x.Ledger(), ledger) && (len(x.Ledger()) != 0 || len(ledger) != 0) {
				t.Fatalf("%s: the index's ledger\n%v\nwant\n%v", where, x.Ledger(), ledger)
			}
			for _, k := range keys {
				want := d.Verdicts[k]
				if want == nil {
					want = map[string]Verdict{}
				}
				if v := x.Verdicts(k); !reflect.DeepEqual(v, want) {
					t.Fatalf("%s: the verdicts of %s\n%v\nwant\n%v", where, k, v, want)
				}
			}
			var bytes int64
			ns := map[string]int{}
			for _, e := range d.Publish {
				bytes += e.Bytes
				ns[e.ToolSet.Namespace]++
			}
			if owned, nsOwned := x.OwnedBytes(); owned != bytes || !maps.Equal(nsOwned, ns) {
				t.Fatalf("%s: the budget's counts %d %v, want %d %v", where, owned, nsOwned, bytes, ns)
			}
			if ceiling > 0 {
				var kept int64
				for _, e := range d.Publish {
					kept += e.Encoded
				}
				if bound, k := x.Encoded(); bound != d.EncodedBound || k != kept {
					t.Fatalf("%s: encoded %v %d, want %v %d", where, bound, k, d.EncodedBound, kept)
				}
			}
		}
	}
	return incremental, decisions
}

// TestIndexTells checks what Drain reports: a name that changes hands
// tells its other claimants and asks for a write; a re-offer of the same
// claim tells nobody and moves nothing.
func TestIndexTells(t *testing.T) {
	x := NewIndex()
	a := types.NamespacedName{Namespace: "a", Name: "first"}
	b := types.NamespacedName{Namespace: "b", Name: "second"}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	drain := func() (told []types.NamespacedName, moved bool) {
		moved = x.Drain(func(ts types.NamespacedName) { told = append(told, ts) })
		return told, moved
	}
	x.Offer(a, &Indexed{Created: t0, Names: []string{"shared"}, Sizes: []int32{10}}, nil)
	if told, moved := drain(); len(told) != 0 || !moved {
		t.Fatalf("first claim: told %v, moved %v; want nobody, moved", told, moved)
	}
	x.Offer(b, &Indexed{Created: t0.Add(time.Second), Names: []string{"shared"}, Sizes: []int32{10}}, nil)
	if told, moved := drain(); len(told) != 0 || moved {
		t.Fatalf("second claimant: told %v, moved %v; want nobody, not moved", told, moved)
	}
	if x.Conflicts() != 1 {
		t.Fatalf("conflicts %d, want 1", x.Conflicts())
	}
	var seen []string
	x.Offer(b, &Indexed{Created: t0.Add(time.Second), Names: []string{"shared"}, Sizes: []int32{12}}, func(name string, i, j int, moved bool) {
		seen = append(seen, fmt.Sprintf("%s %d %d %v", name, i, j, moved))
	})
	if told, moved := drain(); len(told) != 0 || moved || !slices.Equal(seen, []string{"shared 0 0 false"}) {
		t.Fatalf("the same claim again: told %v, moved %v, changed %v", told, moved, seen)
	}
	x.Release(a, a)
	if told, moved := drain(); !slices.Equal(told, []types.NamespacedName{b}) || !moved {
		t.Fatalf("the owner withdrawn: told %v, moved %v; want %v, moved", told, moved, b)
	}
	if got := x.Owner("shared"); got != b {
		t.Fatalf("owner %v, want %v", got, b)
	}
	if rec := x.Ledger()["shared"]; rec.Why != HandedOver {
		t.Fatalf("record %+v, want HandedOver", rec)
	}
}

func compareNN(a, b types.NamespacedName) int {
	if a.Namespace != b.Namespace {
		if a.Namespace < b.Namespace {
			return -1
		}
		return 1
	}
	switch {
	case a.Name < b.Name:
		return -1
	case a.Name > b.Name:
		return 1
	}
	return 0
}

// TestIndexBudgetChanges is TestIndexAgreesWithDecide where the budget
// binds most: more ToolSets, mostly of names of their own, entries that
// fit in the room left, tight budgets the admin changes, offers that
// resize one entry, and fewer holds and compressed ceilings. Each decision
// must be Decide's from scratch; where no name is contested, most are made
// incrementally (see incBudget), and where names are, the index falls back
// to Decide whenever a denied name would pass on.
func TestIndexBudgetChanges(t *testing.T) {
	budgets := []Budget{
		{MaxTableBytes: 1500},
		{MaxTableBytes: 900},
		{MaxToolsPerNamespace: 4, MaxTableBytes: 2500},
		{MaxToolsPerNamespace: 3},
		{MaxToolsPerNamespace: 6, MaxTableBytes: 1200},
		{},
	}
	// Namespace caps that bind beside a bytes cap, and sizes far apart, so
	// that a namespace at its cap loses tools to the bytes cap and takes
	// others past its cap back.
	caps := []Budget{
		{MaxToolsPerNamespace: 3, MaxTableBytes: 1500},
		{MaxToolsPerNamespace: 5, MaxTableBytes: 1200},
		{MaxToolsPerNamespace: 2, MaxTableBytes: 1000},
	}
	for _, tc := range []struct {
		name    string
		shared  []string
		sizes   int
		budgets []Budget
		// share is the least part of the decisions made incrementally.
		share float64
	}{
		{"own names", nil, 60, budgets, 0.6},
		{"contested names", []string{"a", "b", "pay_x"}, 60, budgets, 0.1},
		{"namespace caps", nil, 500, caps, 0.6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			incremental, decisions := indexAgreesWithDecide(t, indexModel{
				seeds: 60, steps: 150, ops: 18, toolSets: 12, namespaces: 4, own: 8, sizes: tc.sizes, quiet: 4,
				names: tc.shared, budgets: tc.budgets,
			})
			t.Logf("%d of %d decisions made incrementally", incremental, decisions)
			if float64(incremental) < tc.share*float64(decisions) {
				t.Errorf("%d of %d decisions made incrementally, want %.0f%% at least", incremental, decisions, 100*tc.share)
			}
		})
	}
}
