package controllers

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/toolplane/toolplane/controllers/ownership"
	"github.com/toolplane/toolplane/test/harness"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// contestedOffers returns a hostile tenant's two ToolSets of one namespace,
// evil/a and evil/b, that offer the same names, one more than
// MaxToolsPerNamespace: the last name is denied to a, passes to b, is denied
// to b, and is owned by nobody. At every decision it is a denied name with
// another claimant, which the index decides with Decide over every claim.
func contestedOffers(perNamespace int) []Offer {
	var tools []spec.TableTool
	for j := range perNamespace + 1 {
		name := fmt.Sprintf("evil_%03d", j)
		tools = append(tools, spec.TableTool{Name: name, SourceName: name, InputSchema: []byte(`{"type":"object"}`)})
	}
	return []Offer{
		{ToolSet: types.NamespacedName{Namespace: "evil", Name: "a"}, Created: metav1.Unix(1e6, 0), UID: "evil-a", Tools: tools},
		{ToolSet: types.NamespacedName{Namespace: "evil", Name: "b"}, Created: metav1.Unix(1e6+1, 0), UID: "evil-b", Tools: tools},
	}
}

// TestContestedDenialDoesNotDecideEveryOffer is the attack of a tenant that
// keeps a denied name contested (contestedOffers): then every changed offer
// of any tenant was decided with Decide over every claim, some 100 ms of
// CPU each at 50,000 names, under the publisher's lock (BenchmarkOfferContested).
// Offers that come together while one such decision is paid for must share
// the next: twenty tenants offering changed tools five times each cost a
// handful of those decisions, not a hundred. Each still gets the verdicts
// the table will show: its names owned, the hostile tenant's last denied.
// (Each offer resizes the tenant's tool: an offer that weighs as the last
// decides nothing.)
func TestContestedDenialDoesNotDecideEveryOffer(t *testing.T) {
	const perNamespace, tenants, rounds = 4, 20, 5
	p := loadedPublisher(&TablePublisher{Budget: ownership.Budget{MaxToolsPerNamespace: perNamespace}})
	ctx := context.Background()
	for _, o := range contestedOffers(perNamespace) {
		if _, err := p.Offer(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	offers := make([]Offer, tenants)
	for i := range offers {
		offers[i] = Offer{ToolSet: types.NamespacedName{Namespace: fmt.Sprintf("tenant-%02d", i), Name: "tools"},
			Created: metav1.Unix(int64(i), 0), UID: types.UID(fmt.Sprintf("uid-%02d", i))}
	}
	_, before := p.index.Decisions()
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, tenants*rounds)
	for i := range offers {
		wg.Go(func() {
			<-start
			for r := range rounds {
				o := offers[i]
				name := fmt.Sprintf("tenant%02d_tool", i)
				o.Tools = []spec.TableTool{{Name: name, SourceName: name, Description: strings.Repeat("changed ", r+1)}}
				v, err := p.Offer(ctx, o)
				switch {
				case err != nil:
					errs <- err
				case v[name].State != ownership.Owned:
					errs <- fmt.Errorf("%s round %d: %s is %v, want Owned", o.ToolSet, r, name, v[name].State)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	inc, after := p.index.Decisions()
	t.Logf("%d incremental, %d full decisions", inc, after-before)
	if full := after - before; full > tenants*rounds/4 {
		t.Errorf("%d offers made %d decisions with Decide over every claim, want at most %d", tenants*rounds, full, tenants*rounds/4)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	last := fmt.Sprintf("evil_%03d", perNamespace)
	for _, o := range contestedOffers(perNamespace) {
		if v := p.verdicts(o.ToolSet)[last]; v.State != ownership.Denied {
			t.Errorf("%s: %s is %v, want Denied", o.ToolSet, last, v.State)
		}
	}
}

// BenchmarkOfferContested measures changed offers made together (8 at a
// time, as the reconciler's workers make them) in make bench-scale's
// largest cluster, 5,000 ToolSets of 10 tools, each namespace at a
// MaxToolsPerNamespace of 10, beside a hostile tenant one tool past it:
// "uncontested" with one ToolSet, whose denied name has no other claimant,
// the baseline; "contested" with the two of contestedOffers, whose denied
// name keeps every decision from being incremental. Run with
// go test ./controllers -run '^$' -bench OfferContested -benchmem -benchtime 400x -count 6
func BenchmarkOfferContested(b *testing.B) {
	const toolSets, perToolSet = 5000, 10
	for _, contested := range []bool{false, true} {
		b.Run(map[bool]string{false: "uncontested", true: "contested"}[contested], func(b *testing.B) {
			p, offers := benchPublisher(b, toolSets, perToolSet, false)
			ctx := context.Background()
			p.mu.Lock()
			p.Budget = ownership.Budget{MaxToolsPerNamespace: perToolSet}
			p.rebudgetLocked()
			p.mu.Unlock()
			hostile := contestedOffers(perToolSet)
			if !contested {
				hostile = hostile[:1]
			}
			for _, o := range hostile {
				if _, err := p.Offer(ctx, o); err != nil {
					b.Fatal(err)
				}
			}
			// Two versions of each offer, of other sizes, alternated.
			alt := make([]Offer, len(offers))
			for i, o := range offers {
				o.Tools = slices.Clone(o.Tools)
				o.Tools[0].Description = "changed"
				alt[i] = o
			}
			const workers = 8
			var worker, done atomic.Int64
			b.SetParallelism(workers / runtime.GOMAXPROCS(0))
			b.ReportAllocs()
			b.ResetTimer()
			defer harness.CPUPerOp(b)()
			b.RunParallel(func(pb *testing.PB) {
				// Each worker offers its own ToolSets, as the reconciler
				// never reconciles one ToolSet in two workers at once.
				w := int(worker.Add(1)) - 1
				for i := 0; pb.Next(); i++ {
					k := (w + workers*int(done.Add(1))*7919) % len(offers)
					k -= k % workers
					k = (k + w) % len(offers)
					o := offers[k]
					if i%2 == 0 {
						o = alt[k]
					}
					if _, err := p.Offer(ctx, o); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			if _, full := p.index.Decisions(); contested && full == 0 {
				b.Fatal("no decision with Decide: the hostile tenant's name is not contested")
			}
		})
	}
}
