package controllers

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// benchPublisher returns a publisher that answers offers without an API
// server, holding toolSets ToolSets of perToolSet tools each: every scrape
// of a large cluster calls Offer, so its cost is per ToolSet, not per table.
func benchPublisher(b *testing.B, toolSets, perToolSet int, shared bool) (*TablePublisher, []Offer) {
	b.Helper()
	p := &TablePublisher{}
	p.init()
	close(p.loaded)
	offers := make([]Offer, toolSets)
	for i := range offers {
		ts := types.NamespacedName{Namespace: fmt.Sprintf("ns-%04d", i), Name: "tools"}
		o := Offer{ToolSet: ts, Created: metav1.Unix(int64(i), 0)}
		for j := range perToolSet {
			name := fmt.Sprintf("ts%04d_tool_%02d", i, j)
			if shared {
				// Every ToolSet claims the same names: all but one conflict.
				name = fmt.Sprintf("tool_%02d", j)
			}
			o.Tools = append(o.Tools, spec.TableTool{Name: name, SourceName: name, InputSchema: []byte(`{"type":"object"}`)})
		}
		offers[i] = o
		if _, err := p.Offer(context.Background(), o); err != nil {
			b.Fatal(err)
		}
	}
	return p, offers
}

// BenchmarkOffer measures one ToolSet's re-offer of unchanged tools (the
// steady state of every scrape) in a cluster of 1,000 ToolSets, with
// distinct names and with every name contested, against the baseline of
// offering into an empty publisher.
func BenchmarkOffer(b *testing.B) {
	for _, bc := range []struct {
		name     string
		toolSets int
		shared   bool
	}{
		{"baseline-1-toolset", 1, false},
		{"1000-toolsets-distinct", 1000, false},
		{"1000-toolsets-contested", 1000, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p, offers := benchPublisher(b, bc.toolSets, 20, bc.shared)
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := p.Offer(ctx, offers[i%len(offers)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
