package ownership

import (
	"fmt"
	"maps"
	"math/rand/v2"
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
				cl := Claimant{Created: time.Unix(int64(op), 0)}
				c.Set(ts, cl)
				model[ts] = cl
			}
			if c.Len() != len(model) {
				t.Fatalf("round %d op %d: Len %d, want %d", round, op, c.Len(), len(model))
			}
			got := maps.Collect(c.All())
			if !maps.EqualFunc(got, model, func(a, b Claimant) bool { return a.Created.Equal(b.Created) }) {
				t.Fatalf("round %d op %d: All %v, want %v", round, op, got, model)
			}
			for k := range keys {
				ts := types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("ts-%d", k)}
				cl, ok := c.Get(ts)
				want, wantOK := model[ts]
				if ok != wantOK || !cl.Created.Equal(want.Created) {
					t.Fatalf("round %d op %d: Get(%s) = %v, %v; want %v, %v", round, op, ts, cl, ok, want, wantOK)
				}
			}
		}
	}
	if n := (Claimants{}).Len(); n != 0 {
		t.Errorf("the zero value holds %d claimants", n)
	}
}
