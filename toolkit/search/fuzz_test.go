package search

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// FuzzSearch indexes tools whose name, description and schema are any
// bytes, searches them with any query, and updates the index with one of
// them changed: no panic, every hit a tool of the table, at most the limit,
// best first, and the update's matches those of a full build.
func FuzzSearch(f *testing.F) {
	f.Add("github.create_issue", "Create a new issue in a GitHub repository", `{"type":"object","properties":{"title":{"type":"string"}}}`, "open a ticket on GitHub", 3)
	f.Add("getHTTPResponse", "Ünïcödé ✓ and \x00 bytes", `{"properties":{"a":true,"b":{"title":1}}}`, "the of and", 0)
	f.Add("x", "", `[`, "x x x x", 60)
	f.Fuzz(func(t *testing.T, name, desc, schema, q string, limit int) {
		tools := []spec.TableTool{
			{Name: "a_" + name, Description: desc, InputSchema: json.RawMessage(schema), ToolSet: spec.ObjectReference{Namespace: "n", Name: name}},
			{Name: "b_fixed", Description: "Refund a payment " + q, InputSchema: json.RawMessage(`{"type":"object"}`)},
			{Name: "c_" + desc, Description: name, InputSchema: json.RawMessage(schema)},
		}
		tb := table(tools...)
		x := New(tb, nil)
		hits := x.Search(context.Background(), q, Filter{Limit: limit})
		want := limit
		if want <= 0 {
			want = DefaultLimit
		}
		if len(hits) > min(want, MaxLimit) {
			t.Fatalf("%d hits for limit %d", len(hits), limit)
		}
		for i, h := range hits {
			if h.Index < 0 || h.Index >= len(tb.Tools) || h.Score <= 0 || i > 0 && h.Score > hits[i-1].Score {
				t.Fatalf("hits %v", hits)
			}
		}
		changed := append([]spec.TableTool(nil), tb.Tools...)
		changed[0].Description += " " + q
		tb2 := &spec.Table{Revision: "next", Tools: changed}
		y, full := x.Update(tb2), New(tb2, nil)
		for _, query := range []string{q, name, desc} {
			got, want := candidates(y, query), candidates(full, query)
			if len(got) != len(want) {
				t.Fatalf("%q: update matches %v, a full build %v", query, got, want)
			}
			for i := range got {
				if !want[i] {
					t.Fatalf("%q: update matches %v, a full build %v", query, got, want)
				}
			}
		}
	})
}
