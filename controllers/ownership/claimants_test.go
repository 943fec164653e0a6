package ownership

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// TestClaimantsActLikeAMap checks Claimants against a map under random
// sets and deletes, across the size at which it takes a map and back down
// to empty.
func TestClaimantsActLikeAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		var c Claimants
		model := map[types.NamespacedName]Claimant{}
		keys := 1 + rng.IntN(3*maxFewClaimants)
		for op := range 200 {
			ts := types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("ts-%d", rng.IntN(keys))}
			if rng.IntN(3) == 0 {
				c.Delete(ts)
				delete(model, ts)
			} else {
				// A claimant set again keeps its creation time or takes
				// another; some are denied.
				cl := Claimant{Created: time.Unix(int64(rng.IntN(2)), 0)}
				if rng.IntN(3) == 0 {
					cl.Denied = &Denial{Policy: "OverBudget", Reason: fmt.Sprint(op)}
				}
				c.Set(ts, cl)
				model[ts] = cl
			}
			if c.Len() != len(model) {
				t.Fatalf("round %d op %d: Len %d, want %d", round, op, c.Len(), len(model))
			}
			got := maps.Collect(c.All())
			if !maps.EqualFunc(got, model, sameClaimant) {
				t.Fatalf("round %d op %d: All %v, want %v", round, op, got, model)
			}
			for k := range keys {
				ts := types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("ts-%d", k)}
				cl, ok := c.Get(ts)
				want, wantOK := model[ts]
				if ok != wantOK || !sameClaimant(cl, want) {
					t.Fatalf("round %d op %d: Get(%s) = %v, %v; want %v, %v", round, op, ts, cl, ok, want, wantOK)
				}
			}
			without := maps.Collect(c.without(ts).All())
			wantWithout := maps.Clone(model)
			delete(wantWithout, ts)
			if !maps.EqualFunc(without, wantWithout, sameClaimant) {
				t.Fatalf("round %d op %d: without(%s) %v, want %v", round, op, ts, without, wantWithout)
			}
		}
	}
	if n := (Claimants{}).Len(); n != 0 {
		t.Errorf("the zero value holds %d claimants", n)
	}
}

// sameClaimant reports whether a and b are the same claim: the same
// creation time and the very same denial.
func sameClaimant(a, b Claimant) bool { return a.Created.Equal(b.Created) && a.Denied == b.Denied }

// TestIndexClaimantsShareTheClaimsID checks what the index's claimants
// point at: one claimantID for every name of a claim, kept by the claim
// that replaces it while the claimant is the same (its names need not be
// touched), another once the claimant was created again, and none of the
// claims themselves.
func TestIndexClaimantsShareTheClaimsID(t *testing.T) {
	x := NewIndex()
	ts := types.NamespacedName{Namespace: "ns", Name: "ts"}
	t0 := time.Unix(100, 0)
	claim := func(created time.Time, names ...string) *Indexed {
		return &Indexed{Created: created, UID: "uid", Names: names, Sizes: make([]int32, len(names))}
	}
	idsOf := func(names ...string) []*claimantID {
		var out []*claimantID
		for _, name := range names {
			set := x.claimants[name]
			if set.Len() != 1 {
				t.Fatalf("%s has %d claimants, want 1", name, set.Len())
			}
			out = append(out, set.first.id)
		}
		return out
	}
	c1 := claim(t0, "a", "b", "c")
	x.Put(ts, c1)
	for _, id := range idsOf("a", "b", "c") {
		if id != c1.id || id.ts != ts || !id.created.Equal(t0) {
			t.Fatalf("a claimant of the first claim points at %+v, want its claim's %+v", id, c1.id)
		}
	}

	c2 := claim(t0, "a", "b", "d")
	x.Put(ts, c2)
	if c2.id != c1.id {
		t.Fatalf("the claim replacing another of the same claimant has an id of its own")
	}
	if _, ok := x.claimants["c"]; ok {
		t.Fatalf("a name dropped from the claim still has claimants")
	}
	for _, id := range idsOf("a", "b", "d") {
		if id != c2.id {
			t.Fatalf("a claimant points at %+v, want the claim's %+v", id, c2.id)
		}
	}

	t1 := t0.Add(time.Hour)
	c3 := claim(t1, "a", "d")
	x.Put(ts, c3)
	if c3.id == c2.id || !c3.id.created.Equal(t1) {
		t.Fatalf("the ToolSet created again kept the id of the one before")
	}
	for _, id := range idsOf("a", "d") {
		if id != c3.id {
			t.Fatalf("a claimant of the ToolSet created again points at %+v, want %+v", id, c3.id)
		}
	}
	if cl, _ := x.claimants["a"].Get(ts); !cl.Created.Equal(t1) {
		t.Fatalf("Get gives the creation time %v, want %v", cl.Created, t1)
	}
}

// oneIndexedTwoToolSets returns an empty index, two ToolSets, a creation
// time and one claim of it, for the specs of one *Indexed under both.
func oneIndexedTwoToolSets() (x *Index, a, b types.NamespacedName, t0 time.Time, shared *Indexed) {
	t0 = time.Unix(100, 0)
	return NewIndex(), types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"},
		t0, &Indexed{Created: t0, Names: []string{"n"}, Sizes: []int32{1}}
}

// TestIndexedPutUnderTwoToolSets checks one *Indexed Put under two
// ToolSets (the exported API allows it): the next claim of the first, of
// the same creation time, must not take the other's claimantID and record
// its new names as claimed by the other ToolSet.
func TestIndexedPutUnderTwoToolSets(t *testing.T) {
	x, a, b, t0, shared := oneIndexedTwoToolSets()
	x.Put(a, shared)
	x.Put(b, shared) // the same claim offered by another ToolSet
	x.Put(a, &Indexed{Created: t0, Names: []string{"n", "z"}, Sizes: []int32{1, 1}})
	set := x.Claimants("z")
	if _, ok := set.Get(a); !ok {
		t.Errorf("z: %v claims it, but its claimants are %v", a, maps.Collect(set.All()))
	}
	if _, ok := set.Get(b); ok {
		t.Errorf("z: %v is a claimant, but never claimed it", b)
	}
}

// TestIndexedPutUnderTwoToolSetsOwnsNothingUnclaimed is the same through
// Offer: no ToolSet owns a name it never claimed, nor keeps one after the
// claimant withdraws.
func TestIndexedPutUnderTwoToolSetsOwnsNothingUnclaimed(t *testing.T) {
	x, a, b, t0, shared := oneIndexedTwoToolSets()
	x.Offer(a, shared, nil)
	x.Offer(b, shared, nil)
	x.Offer(a, &Indexed{Created: t0, Names: []string{"n", "z"}, Sizes: []int32{1, 1}}, nil)
	x.Release(a, a)
	x.Offer(b, &Indexed{Created: t0, Names: []string{"n"}, Sizes: []int32{1}}, nil)
	if o := x.Owner("z"); o != (types.NamespacedName{}) {
		t.Errorf("z is claimed by nobody, but owned by %v (claimants %v)", o, maps.Collect(x.Claimants("z").All()))
	}
}

// TestDecideInAReusedBuffer checks decide with the index's reused buffer
// against decide from scratch,
// over random inputs with up to 14 claimants a name (first, few, many),
// denials and budgets that bind, the buffer reused across calls of other
// sizes.
func TestDecideInAReusedBuffer(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var buf decideBuf
	names := []string{"a", "b", "c", "d", "e"}
	budgets := []Budget{{}, {MaxToolsPerNamespace: 1}, {MaxTableBytes: 500}, {MaxToolsPerNamespace: 2, MaxTableBytes: 900}}
	for round := range 3000 {
		in := Input{Budget: budgets[rng.IntN(len(budgets))], Now: time.Unix(1000, 0), Hold: rng.IntN(6) == 0}
		prev := Ledger{}
		nts := 1 + rng.IntN(14)
		for k := range nts {
			ts := types.NamespacedName{Namespace: fmt.Sprintf("ns-%d", k%3), Name: fmt.Sprintf("ts-%d", k)}
			cl := Claim{ToolSet: ts, Created: time.Unix(int64(rng.IntN(3)), 0), UID: types.UID(ts.Name)}
			for _, n := range names {
				if rng.IntN(3) == 0 {
					continue
				}
				cl.Names = append(cl.Names, n)
				cl.Bytes = append(cl.Bytes, int64(50+rng.IntN(300)))
				if rng.IntN(6) == 0 {
					if cl.Denied == nil {
						cl.Denied = map[string]Denial{}
					}
					cl.Denied[n] = Denial{Policy: "p", Reason: "r"}
				}
				if rng.IntN(3) == 0 {
					prev[n] = Record{Owner: ts, UID: cl.UID}
				}
			}
			in.Claims = append(in.Claims, cl)
		}
		prevOf := func(n string) (Record, bool) { r, ok := prev[n]; return r, ok }
		want := decide(prevOf, in, nil)
		got := decide(prevOf, in, &buf)
		if !reflect.DeepEqual(slices.Clone(got.Publish), want.Publish) || !reflect.DeepEqual(got.OverBudget, want.OverBudget) {
			t.Fatalf("round %d: reused buffer\n%v %v\nwant\n%v %v", round, got.Publish, got.OverBudget, want.Publish, want.OverBudget)
		}
		for _, e := range want.Publish {
			if r, _ := got.record(e.Name); r != want.Ledger[e.Name] {
				t.Fatalf("round %d: record %s %v want %v", round, e.Name, r, want.Ledger[e.Name])
			}
		}
	}
}

// TestIndexLetsAReplacedClaimGo checks that a claim replaced by one of the
// same claimant is not kept live by the index, through its names'
// claimantIDs or a decision's buffer.
func TestIndexLetsAReplacedClaimGo(t *testing.T) {
	x := NewIndex()
	x.Budget = func() Budget { return Budget{MaxTableBytes: 10} } // binds: full decisions
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	b := types.NamespacedName{Namespace: "ns", Name: "b"}
	t0 := time.Unix(100, 0)
	collected := make(chan struct{}, 1)
	func() {
		c1 := &Indexed{Created: t0, Names: []string{"n", "m"}, Sizes: []int32{8, 8}, Denied: map[string]Denial{"m": {Policy: "p"}}}
		runtime.AddCleanup(c1, func(struct{}) { collected <- struct{}{} }, struct{}{})
		x.Offer(a, c1, nil)
		x.Offer(b, &Indexed{Created: t0, Names: []string{"n"}, Sizes: []int32{8}}, nil)
		x.Rebudget()
		x.Offer(a, &Indexed{Created: t0, Names: []string{"n", "m"}, Sizes: []int32{8, 8}, Denied: map[string]Denial{"m": {Policy: "p"}}}, nil)
		x.Rebudget()
	}()
	for range 50 { // up to a second: the cleanup runs on a goroutine of its own after a collection
		runtime.GC()
		select {
		case <-collected:
			runtime.KeepAlive(x)
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatal("the replaced claim is still live")
}
