package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// TestPublishedSharesClaim checks that Published, for a ToolSet that owns
// every tool it claims, returns the claim's own tools, not a copy: the
// reconciler keeps them as its contract baseline and held tools, and a copy
// for every ToolSet was 17 MB at 5,000 ToolSets until their first status.
// A ToolSet that owns some of its tools gets those alone.
func TestPublishedSharesClaim(t *testing.T) {
	ctx := context.Background()
	p := loadedPublisher(&TablePublisher{})
	key := types.NamespacedName{Namespace: "ns", Name: "ts"}
	tools := make([]spec.TableTool, 10)
	for i := range tools {
		name := fmt.Sprintf("ts_%02d", i)
		tools[i] = spec.TableTool{Name: name, SourceName: name, InputSchema: []byte(`{"type":"object"}`),
			ToolSet: spec.ObjectReference{Namespace: key.Namespace, Name: key.Name}}
	}
	if _, err := p.Offer(ctx, Offer{ToolSet: key, Created: metav1.NewTime(time.Now()), Tools: tools}); err != nil {
		t.Fatal(err)
	}
	got, err := p.Published(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(tools) {
		t.Fatalf("Published returned %d tools, want %d", len(got), len(tools))
	}
	if c := p.claims[key]; &got[0] != &c.tools[0] {
		t.Error("Published copied the tools of a ToolSet that owns them all")
	}
	if cap(got) != len(got) {
		t.Error("Published returned the claim's tools unclipped: an append would write into them")
	}
	// A rival that claims one of the names first-come keeps it from a
	// later ToolSet: that one is Published its other tools alone.
	later := types.NamespacedName{Namespace: "ns", Name: "later"}
	theirs := []spec.TableTool{tools[3], {Name: "later_only", SourceName: "later_only", InputSchema: []byte(`{"type":"object"}`)}}
	if _, err := p.Offer(ctx, Offer{ToolSet: later, Created: metav1.NewTime(time.Now().Add(time.Hour)), Tools: theirs}); err != nil {
		t.Fatal(err)
	}
	got, err = p.Published(ctx, later)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "later_only" {
		t.Fatalf("Published gave the later ToolSet %v, want later_only alone", got)
	}
}
