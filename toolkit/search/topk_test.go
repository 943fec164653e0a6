package search

import (
	"context"
	"math"
	"testing"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// TestTopKIsTheExhaustiveTopK checks that the bounded selection of the best
// Limit loses nothing: for every task of the corpus, on a table of
// replicated tools (many equal and near-equal scores), with filters and an
// updated index's delta, the hits are those of ordering every match.
func TestTopKIsTheExhaustiveTopK(t *testing.T) {
	tb, tasks := syntheticTable(t, 3000)
	x := New(tb, nil)
	// An update, so that a delta segment and dead documents take part.
	tools := append(tb.Tools[:0:0], tb.Tools...)
	tools[100].Description = "Create a new issue in the tracker, with a title and labels."
	tools[2000].Description = "Take a screenshot of the current browser page."
	y := x.Update(&spec.Table{Revision: "r2", Tools: tools})
	if y.delta == nil {
		t.Fatal("no delta")
	}
	ctx := context.Background()
	for _, idx := range []*Index{x, y} {
		for _, f := range []Filter{{}, {Limit: 50}, {Namespace: "team-3"}, {Limit: 3, ReadOnly: ptr(true)}} {
			for _, k := range tasks {
				got := idx.Search(ctx, k.Task, f)
				s := idx.getScratch()
				s.question = question(k.Task)
				q := plainQuery(k.Task)
				want := idx.exhaustive(expand(queryTerms(q), queryWords(q)), &f, s, f.limit(), nil)
				if len(got) != len(want) {
					t.Fatalf("%q %+v: %d hits, exhaustive %d", k.Task, f, len(got), len(want))
				}
				for i := range got {
					// Equal scores may come in another order only if equal.
					if math.Abs(got[i].Score-want[i].Score) > 1e-4 {
						t.Fatalf("%q %+v: hit %d scores %v, exhaustive %v", k.Task, f, i, got[i].Score, want[i].Score)
					}
				}
			}
		}
	}
}
