package search

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// A tenant publishes tools built to hurt the index: megabytes of distinct
// junk words, one very long word, a schema nested far deeper than the walk
// goes, thousands of properties, boolean subschemas, odd JSON types. The
// index bounds what each contributes and still ranks the ordinary tool
// first; queries of any size are bounded too.
func TestHostileToolsAreBounded(t *testing.T) {
	var junk strings.Builder
	for i := range 200000 {
		fmt.Fprintf(&junk, "w%dx ", i)
	}
	deep := strings.Repeat(`{"type":"object","properties":{"a":`, 500) + `{}` + strings.Repeat(`}}`, 500)
	var props strings.Builder
	props.WriteString(`{"type":"object","properties":{`)
	for i := range 5000 {
		if i > 0 {
			props.WriteByte(',')
		}
		fmt.Fprintf(&props, `"p%d":{"description":"junk %d"}`, i, i)
	}
	props.WriteString(`}}`)
	tools := []spec.TableTool{
		tool("evil", "evil", "evil_junk", junk.String(), ""),
		tool("evil", "evil", "evil_long", strings.Repeat("x", 1<<20), ""),
		tool("evil", "evil", "evil_deep", "Deep.", deep),
		tool("evil", "evil", "evil_props", "Many properties.", props.String()),
		tool("evil", "evil", "evil_odd", "Odd schema.", `{"type":"object","properties":{"a":true,"b":{"title":7,"enum":[1,{"x":2},"refund"]}},"items":[1,2]}`),
		tool("evil", "evil", "evil_notjson", "Not JSON at all.", `{"type":`),
		tool("shop", "billing", "billing_refund", "Refund a payment to the customer.", `{"type":"object","properties":{"amount":{"type":"number"}}}`),
	}
	tb := table(tools...)
	var x *Index
	size := indexBytes(func() any { x = New(tb, nil); return x })
	if size > 8<<20 {
		t.Errorf("the index of %d hostile tools holds %d bytes", len(tools), size)
	}
	if got := names(tb, x.Search(context.Background(), "refund the customer", Filter{})); len(got) == 0 || got[0] != "billing_refund" {
		t.Errorf("ordinary tool not first: %v", got)
	}
	// A junk word past the field bound is not indexed; one before it is.
	if len(x.Search(context.Background(), "w1x", Filter{})) != 1 || len(x.Search(context.Background(), "w199999x", Filter{})) != 0 {
		t.Errorf("the description was not clipped at maxFieldBytes")
	}
	// The odd schema's string enum value is still read.
	if got := names(tb, x.Search(context.Background(), "refund", Filter{})); len(got) < 2 {
		t.Errorf("odd schema's enum not read: %v", got)
	}
	// A huge query is cut, not scanned whole.
	hits := x.Search(context.Background(), strings.Repeat("refund customer ", 1<<16), Filter{})
	if len(hits) == 0 || tb.Tools[hits[0].Index].Name != "billing_refund" {
		t.Errorf("huge query: %v", hits)
	}
	if n := len(queryTerms(strings.Repeat("alpha beta gamma delta ", 1000) + junk.String())); n > maxQueryTerms {
		t.Errorf("%d query terms", n)
	}
}
