package controllers

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/toolplane/toolplane/controllers/ownership"
	"github.com/toolplane/toolplane/test/harness"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// loadedPublisher returns p ready for offers without an API server, as if
// it had read the table back: none.
func loadedPublisher(p *TablePublisher) *TablePublisher {
	p.init()
	close(p.loaded)
	return p
}

// benchPublisher returns a publisher that answers offers without an API
// server, holding toolSets ToolSets of perToolSet tools each: every scrape
// of a large cluster calls Offer, so its cost is per ToolSet, not per table.
func benchPublisher(b *testing.B, toolSets, perToolSet int, shared bool) (*TablePublisher, []Offer) {
	b.Helper()
	p := loadedPublisher(&TablePublisher{})
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
			defer harness.CPUPerOp(b)()
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

// TestOfferRepeated re-offers the very same slice: the verdicts it gets
// follow what others did in between, and a new slice is compared anew.
func TestOfferRepeated(t *testing.T) {
	p := loadedPublisher(&TablePublisher{})
	ctx := context.Background()
	first := Offer{ToolSet: types.NamespacedName{Namespace: "a", Name: "first"}, Created: metav1.Unix(1, 0),
		Tools: []spec.TableTool{{Name: "shared", SourceName: "shared"}}}
	second := Offer{ToolSet: types.NamespacedName{Namespace: "b", Name: "second"}, Created: metav1.Unix(2, 0),
		Tools: []spec.TableTool{{Name: "shared", SourceName: "shared"}}}
	offer := func(o Offer) ownership.State {
		t.Helper()
		v, err := p.Offer(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		return v["shared"].State
	}
	if got := offer(first); got != ownership.Owned {
		t.Fatalf("first offer: %v, want Owned", got)
	}
	if got := offer(second); got != ownership.Conflicted {
		t.Fatalf("second ToolSet: %v, want Conflicted", got)
	}
	if got := offer(second); got != ownership.Conflicted {
		t.Fatalf("second ToolSet again: %v, want Conflicted", got)
	}
	if err := p.Withdraw(ctx, first.ToolSet); err != nil {
		t.Fatal(err)
	}
	if got := offer(second); got != ownership.Owned {
		t.Fatalf("the same slice after the owner went: %v, want Owned", got)
	}

	// A new slice with a changed entry is compared: the table changes.
	p.mu.Lock()
	before := claimedTool(p, second.ToolSet, "shared").Description
	p.mu.Unlock()
	changed := second
	changed.Tools = []spec.TableTool{{Name: "shared", SourceName: "shared", Description: "changed"}}
	offer(changed)
	p.mu.Lock()
	after := claimedTool(p, second.ToolSet, "shared").Description
	p.mu.Unlock()
	if before != "" || after != "changed" {
		t.Errorf("description %q then %q, want \"\" then \"changed\"", before, after)
	}

	// The same slice under a denial is no repeat.
	denied := changed
	denied.Denied = map[string]ownership.Denial{"shared": {Policy: ownership.OverBudget, Reason: "too many"}}
	if got := offer(denied); got != ownership.Denied {
		t.Fatalf("the same slice, denied: %v, want Denied", got)
	}
}

// claimedTool is the entry of name that toolSet claims; p.mu is held.
func claimedTool(p *TablePublisher, toolSet types.NamespacedName, name string) spec.TableTool {
	if t, ok := findTool(p.claims[toolSet].tools, name); ok {
		return *t
	}
	return spec.TableTool{}
}

// BenchmarkOfferChanged measures one ToolSet's offer of a changed tool in
// a cluster of 1,000 ToolSets under the manager's default budget: the path
// that settles the names it touches and decides the budget.
func BenchmarkOfferChanged(b *testing.B) {
	for _, shared := range []bool{false, true} {
		b.Run(map[bool]string{false: "1000-toolsets-distinct", true: "1000-toolsets-contested"}[shared], func(b *testing.B) {
			p, offers := benchPublisher(b, 1000, 20, shared)
			p.Budget = ownership.Budget{MaxToolsPerNamespace: DefaultMaxToolsPerNamespace, MaxTableBytes: DefaultMaxTableBytes}
			ctx := context.Background()
			// Two versions of each offer, alternated: every offer changes.
			alt := make([]Offer, len(offers))
			for i, o := range offers {
				o.Tools = slices.Clone(o.Tools)
				o.Tools[0].Description = "changed"
				alt[i] = o
			}
			b.ReportAllocs()
			defer harness.CPUPerOp(b)()
			i := 0
			for b.Loop() {
				o := offers[i%len(offers)]
				if (i/len(offers))%2 == 0 {
					o = alt[i%len(offers)]
				}
				if _, err := p.Offer(ctx, o); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkPublisherTable measures building the table the publisher writes
// from 20,000 owned entries, once per write of the table: "copy" copies
// every entry into a Table, as a write did before the store took the
// claims' tools by reference (the baseline, in the same run); "refs" is
// what a write does now.
func BenchmarkPublisherTable(b *testing.B) {
	p, _ := benchPublisher(b, 1000, 20, false)
	p.Budget = ownership.Budget{MaxToolsPerNamespace: DefaultMaxToolsPerNamespace, MaxTableBytes: DefaultMaxTableBytes}
	b.Run("copy", func(b *testing.B) {
		b.ReportAllocs()
		defer harness.CPUPerOp(b)()
		for b.Loop() {
			if t, ok := p.table(); !ok || len(t.Tools) != 20000 {
				b.Fatalf("%d tools", len(t.Tools))
			}
		}
	})
	b.Run("refs", func(b *testing.B) {
		b.ReportAllocs()
		defer harness.CPUPerOp(b)()
		for b.Loop() {
			if tools, _, ok := p.tableTools(); !ok || len(tools) != 20000 {
				b.Fatalf("%d tools", len(tools))
			}
		}
	})
}

// BenchmarkPublisherLockWait measures how long an offer waits for the
// publisher's lock while writes of the table, one after another, build it
// from 50,000 owned entries (bench-scale's largest cluster): longest-ms is
// the longest wait of one Lock, ns/op the mean. "idle" is the same Lock with no write running,
// the baseline in the same run. Run with
// go test ./controllers -run '^$' -bench PublisherLockWait -count 6
func BenchmarkPublisherLockWait(b *testing.B) {
	p, _ := benchPublisher(b, 5000, 10, false)
	b.Run("idle", func(b *testing.B) {
		for b.Loop() {
			p.mu.Lock()
			p.mu.Unlock() //nolint:staticcheck // the wait is what is measured
		}
	})
	b.Run("writing", func(b *testing.B) {
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if tools, _, ok := p.tableTools(); !ok || len(tools) != 50000 {
					panic(fmt.Sprintf("%d tools", len(tools)))
				}
			}
		}()
		var longest time.Duration
		for b.Loop() {
			start := time.Now()
			p.mu.Lock()
			p.mu.Unlock() //nolint:staticcheck // the wait is what is measured
			longest = max(longest, time.Since(start))
		}
		close(stop)
		b.ReportMetric(float64(longest.Microseconds())/1000, "longest-ms")
		<-done
	})
}

// BenchmarkOfferBinding measures one ToolSet's offer in make
// bench-scale's largest cluster, 5,000 ToolSets of 10 tools each, while the
// table's bytes cap binds (set at nine tenths of what they weigh): every
// offer but a repeat of the same names and sizes decides the budget again,
// which at 50,000 names once cost seconds, then 100 ms, and now what the
// offer touches (see ownership.Index.Rebudget). "changed" offers a
// changed tool; "same" the same tools in new slices, as a scrape of an
// unchanged ToolSet does. Run with
// go test ./controllers -run '^$' -bench OfferBinding -benchmem -benchtime 200x -count 6
func BenchmarkOfferBinding(b *testing.B) {
	p, offers := benchPublisher(b, 5000, 10, false)
	var total int64
	for _, c := range p.claims {
		for _, s := range c.sizes {
			total += int64(s)
		}
	}
	p.mu.Lock()
	p.Budget = ownership.Budget{MaxTableBytes: total * 9 / 10}
	p.rebudgetLocked()
	p.mu.Unlock()
	ctx := context.Background()
	// A changed offer and back, untimed: the first decisions under the
	// cap weigh every name.
	warm := offers[0]
	warm.Tools = slices.Clone(warm.Tools)
	warm.Tools[0].Description = "warm"
	for _, o := range []Offer{warm, offers[0]} {
		if _, err := p.Offer(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	for _, changed := range []bool{true, false} {
		b.Run(map[bool]string{true: "changed", false: "same"}[changed], func(b *testing.B) {
			// Two versions of each offer, alternated: none repeats the last.
			alt := make([]Offer, len(offers))
			for i, o := range offers {
				o.Tools = slices.Clone(o.Tools)
				if changed {
					o.Tools[0].Description = "changed"
				}
				alt[i] = o
			}
			b.ReportAllocs()
			defer harness.CPUPerOp(b)()
			i := 0
			for b.Loop() {
				// Offers spread over the cluster, not only the first ToolSets.
				k := (i * 7919) % len(offers)
				o := offers[k]
				if (i/len(offers))%2 == 0 {
					o = alt[k]
				}
				if _, err := p.Offer(ctx, o); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
	if owned, _ := p.index.OwnedBytes(); owned > total*9/10 {
		b.Fatalf("owned %d bytes, over the cap %d", owned, total*9/10)
	}
}
