package ownership

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestDecideTable(t *testing.T) {
	a, b, c := ts("a", "a"), ts("b", "b"), ts("c", "c")
	now := at(100)
	claim := func(owner types.NamespacedName, created int, uid string, names ...string) Claim {
		cl := Claim{ToolSet: owner, Created: at(created), UID: types.UID(uid), Names: names}
		for range names {
			cl.Bytes = append(cl.Bytes, 100)
		}
		return cl
	}
	for _, tc := range []struct {
		name    string
		prev    Ledger
		in      Input
		owners  map[string]types.NamespacedName
		states  map[types.NamespacedName]map[string]State
		records map[string]Why
	}{{
		name:    "a new tool past the namespace's budget is denied, and nobody owns it",
		prev:    Ledger{"x": {Owner: a, UID: "1", Since: at(1), Why: Claimed}},
		in:      Input{Claims: []Claim{claim(a, 1, "1", "x", "y")}, Budget: Budget{MaxToolsPerNamespace: 1}, Now: now},
		owners:  map[string]types.NamespacedName{"x": a},
		states:  map[types.NamespacedName]map[string]State{a: {"x": Owned, "y": Denied}},
		records: map[string]Why{"x": Claimed},
	}, {
		name: "a name kept by its owner is not pushed out by an earlier-created ToolSet's newcomer",
		prev: Ledger{"x": {Owner: b, Since: at(1), Why: Claimed}},
		in: Input{Claims: []Claim{claim(a, 1, "", "a1"), claim(b, 2, "", "x")},
			Budget: Budget{MaxToolsPerNamespace: 1}, Now: now},
		owners: map[string]types.NamespacedName{"a1": a, "x": b},
		states: map[types.NamespacedName]map[string]State{a: {"a1": Owned}, b: {"x": Owned}},
	}, {
		name: "a denied owner is not an owner: the name passes to the next claimant",
		prev: Ledger{},
		in: Input{Claims: []Claim{claim(a, 1, "", "a0", "x"), claim(b, 2, "", "x")},
			Budget: Budget{MaxToolsPerNamespace: 1}, Now: now},
		owners:  map[string]types.NamespacedName{"a0": a, "x": b},
		states:  map[types.NamespacedName]map[string]State{a: {"a0": Owned, "x": Conflicted}, b: {"x": Owned}},
		records: map[string]Why{"x": Claimed, "a0": Claimed},
	}, {
		name: "an owner deleted and created again lets go first: an earlier-created rival takes its names",
		prev: Ledger{"x": {Owner: b, UID: "old", Since: at(1), Why: Claimed}},
		in: Input{Claims: []Claim{claim(b, 50, "new", "x"), claim(c, 3, "", "x")},
			Now: now},
		owners:  map[string]types.NamespacedName{"x": c},
		states:  map[types.NamespacedName]map[string]State{b: {"x": Conflicted}, c: {"x": Owned}},
		records: map[string]Why{"x": HandedOver},
	}, {
		name:    "an owner created again with no rival claims its name afresh",
		prev:    Ledger{"x": {Owner: b, UID: "old", Since: at(1), Why: Claimed}},
		in:      Input{Claims: []Claim{claim(b, 50, "new", "x")}, Now: now},
		owners:  map[string]types.NamespacedName{"x": b},
		states:  map[types.NamespacedName]map[string]State{b: {"x": Owned}},
		records: map[string]Why{"x": Claimed},
	}, {
		name: "past the table's bytes, the heaviest namespace's newcomer goes before what was kept",
		prev: Ledger{"a1": {Owner: a}, "a2": {Owner: a}, "b1": {Owner: b}},
		in: Input{Claims: []Claim{claim(a, 5, "", "a1", "a2", "a3"), claim(b, 1, "", "b1", "b2")},
			Budget: Budget{MaxTableBytes: 400}, Now: now},
		owners: map[string]types.NamespacedName{"a1": a, "a2": a, "b1": b, "b2": b},
		states: map[types.NamespacedName]map[string]State{a: {"a1": Owned, "a2": Owned, "a3": Denied}, b: {"b1": Owned, "b2": Owned}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.prev, tc.in)
			owners := map[string]types.NamespacedName{}
			for name, rec := range d.Ledger {
				owners[name] = rec.Owner
			}
			if !reflect.DeepEqual(owners, tc.owners) {
				t.Errorf("owners %v, want %v", owners, tc.owners)
			}
			states := map[types.NamespacedName]map[string]State{}
			for ts, vs := range d.Verdicts {
				states[ts] = map[string]State{}
				for name, v := range vs {
					states[ts][name] = v.State
				}
			}
			if !reflect.DeepEqual(states, tc.states) {
				t.Errorf("states %v, want %v", states, tc.states)
			}
			for name, why := range tc.records {
				if got := d.Ledger[name]; got.Why != why {
					t.Errorf("record of %s: %+v, want why %s", name, got, why)
				}
			}
			for _, e := range d.Publish {
				if d.Ledger[e.Name].Owner != e.ToolSet {
					t.Errorf("published %s under %s, the ledger says %s", e.Name, e.ToolSet, d.Ledger[e.Name].Owner)
				}
			}
		})
	}
}

// TestDecideProperties checks, over random clusters, budgets and policies:
// the outcome does not depend on the order of the claims; deciding again
// from the outcome changes nothing, verdicts included (so that a re-offer
// never moves a name or rewrites a status); every Owned verdict is in the
// ledger and published, and every name published fits the budget.
func TestDecideProperties(t *testing.T) {
	budgets := []Budget{{}, {MaxToolsPerNamespace: 2}, {MaxTableBytes: 700}, {MaxToolsPerNamespace: 3, MaxTableBytes: 1000, MaxEncodedBytes: 500}}
	for seed := range uint64(400) {
		rng := rand.New(rand.NewPCG(seed, 7))
		w := newWorld(seed)
		claims := w.claims()
		for i := range claims {
			claims[i].UID = types.UID(fmt.Sprintf("u%d", rng.IntN(2)))
			for range claims[i].Names {
				claims[i].Bytes = append(claims[i].Bytes, int64(50+rng.IntN(250)))
				claims[i].Encoded = append(claims[i].Encoded, int64(20+rng.IntN(150)))
			}
		}
		rule, err := NewRule(w.policies())
		if err != nil {
			t.Fatal(err)
		}
		prev := Ledger{}
		for _, name := range w.names {
			if rng.IntN(2) == 0 {
				owner := w.toolSets[rng.IntN(len(w.toolSets))]
				prev[name] = Record{Owner: owner, UID: types.UID(fmt.Sprintf("u%d", rng.IntN(2))), Since: epoch, Why: Claimed}
			}
		}
		in := Input{Rule: rule, Claims: claims, Budget: budgets[int(seed)%len(budgets)], Now: at(1000)}
		where := fmt.Sprintf("seed %d", seed)
		d := Decide(prev, in)

		shuffled := slices.Clone(claims)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		in2 := in
		in2.Claims = shuffled
		if d2 := Decide(prev, in2); !reflect.DeepEqual(d, d2) {
			t.Fatalf("%s: the outcome depends on the order of claims", where)
		}

		again := in
		again.Now = at(2000)
		d3 := Decide(d.Ledger, again)
		if !reflect.DeepEqual(d3.Ledger, d.Ledger) {
			t.Fatalf("%s: deciding again moved names:\n%v\n%v", where, d.Ledger, d3.Ledger)
		}
		if !reflect.DeepEqual(d3.Verdicts, d.Verdicts) {
			t.Fatalf("%s: deciding again changed verdicts:\n%v\n%v", where, d.Verdicts, d3.Verdicts)
		}

		if over := in.Budget.Apply(d.Publish); len(over) > 0 {
			t.Fatalf("%s: the published entries do not fit the budget: %v", where, over)
		}
		for ts, vs := range d.Verdicts {
			for name, v := range vs {
				if (v.State == Owned) != (d.Ledger[name].Owner == ts) {
					t.Fatalf("%s: %s on %s is %s, the ledger says %v", where, ts, name, v.State, d.Ledger[name])
				}
			}
		}
	}
}

// TestRestoreKeepsRecords checks that a table read back keeps the records
// it kept of its entries, that an entry without one reads Restored, since
// now, and that a name the table names twice goes by the rule with the
// record of the entry that wins.
func TestRestoreKeepsRecords(t *testing.T) {
	now := time.Date(2026, 12, 1, 16, 0, 0, 0, time.UTC)
	claimed, handed := now.Add(-48*time.Hour), now.Add(-time.Hour)
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	b := types.NamespacedName{Namespace: "ns", Name: "b"}
	exists := map[types.NamespacedName]Identity{
		a: {Created: now.Add(-72 * time.Hour), UID: "uid-a"},
		b: {Created: now.Add(-24 * time.Hour), UID: "uid-b"},
	}
	got := Restore([]RestoredEntry{
		{Name: "x", ToolSet: a, UID: "uid-a", Since: claimed, Why: Claimed},
		{Name: "h", ToolSet: b, UID: "uid-b", Since: handed, Why: HandedOver},
		{Name: "old", ToolSet: a, UID: "uid-a"},
		// Named twice: a, created first, wins, with its record.
		{Name: "twice", ToolSet: b, UID: "uid-b", Since: handed, Why: HandedOver},
		{Name: "twice", ToolSet: a, UID: "uid-a", Since: claimed, Why: Claimed},
		// Another object of a's name: dropped, record and all.
		{Name: "gone", ToolSet: a, UID: "uid-old", Since: claimed, Why: Claimed},
	}, exists, now)
	want := Ledger{
		"x":     {Owner: a, UID: "uid-a", Since: claimed, Why: Claimed},
		"h":     {Owner: b, UID: "uid-b", Since: handed, Why: HandedOver},
		"old":   {Owner: a, UID: "uid-a", Since: now, Why: Restored},
		"twice": {Owner: a, UID: "uid-a", Since: claimed, Why: Claimed},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Restore\n got %v\nwant %v", got, want)
	}
}
