package ownership

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestTreeAgreesWithASortedSlice checks the tree's answers against a
// sorted slice's, over random inserts and deletes.
func TestTreeAgreesWithASortedSlice(t *testing.T) {
	type kv struct {
		k int
		w int64
	}
	rng := rand.New(rand.NewPCG(1, 2))
	tr := newTree(cmp.Compare[int])
	var want []kv
	for step := range 4000 {
		k := rng.IntN(300)
		i, found := slices.BinarySearchFunc(want, k, func(e kv, k int) int { return cmp.Compare(e.k, k) })
		if found {
			tr.delete(k)
			want = slices.Delete(want, i, i+1)
		} else {
			w := int64(rng.IntN(50))
			tr.insert(k, w, nil)
			want = slices.Insert(want, i, kv{k, w})
		}
		if tr.len != len(want) {
			t.Fatalf("step %d: len %d, want %d", step, tr.len, len(want))
		}
		// cut: the shortest prefix weighing need.
		need := int64(rng.IntN(2000) + 1)
		var sum int64
		wantAt := -1
		for j, e := range want {
			sum += e.w
			if sum >= need {
				wantAt = j
				break
			}
		}
		k2, s2, ok := tr.cut(need)
		if ok != (wantAt >= 0) || ok && (k2 != want[wantAt].k || s2 != sum) {
			t.Fatalf("step %d: cut(%d) = %d %d %v, want index %d sum %d", step, need, k2, s2, ok, wantAt, sum)
		}
		// firstFit: the first after k weighing at most bound.
		after, bound := rng.IntN(320)-10, int64(rng.IntN(50))
		hasAfter := rng.IntN(4) != 0
		var fit *kv
		for j := range want {
			if (!hasAfter || want[j].k > after) && want[j].w <= bound {
				fit = &want[j]
				break
			}
		}
		n := tr.firstFit(after, hasAfter, bound)
		if (n == nil) != (fit == nil) || n != nil && n.key != fit.k {
			t.Fatalf("step %d: firstFit(%d, %v, %d) = %v, want %v", step, after, hasAfter, bound, n, fit)
		}
		// between: the keys after lo, at or before hi.
		lo, hi := rng.IntN(300), rng.IntN(300)
		hasLo := rng.IntN(4) != 0
		var got, in []int
		tr.between(lo, hasLo, hi, true, func(n *node[int]) { got = append(got, n.key) })
		for _, e := range want {
			if (!hasLo || e.k > lo) && e.k <= hi {
				in = append(in, e.k)
			}
		}
		if !slices.Equal(got, in) {
			t.Fatalf("step %d: between(%d, %v, %d) = %v, want %v", step, lo, hasLo, hi, got, in)
		}
	}
}
