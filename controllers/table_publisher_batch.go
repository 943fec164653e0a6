package controllers

import (
	"context"
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/toolplane/toolplane/controllers/ownership"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// This file holds how the publisher bounds the decisions the index makes
// with Decide over every claim (see ownership.Index.Rebudget): under a
// compressed ceiling, while hand-overs are held, and while a name the
// budget denies has another claimant, every decision is one, some 100 ms
// of CPU at 50,000 names under p.mu. A tenant can keep a denied name
// contested for as long as it likes (two ToolSets of its namespace
// offering the same names past its MaxToolsPerNamespace), and then every
// changed offer of every tenant paid for one (BenchmarkOfferContested).
// So after such a decision, the changed offers and withdrawals that come
// within decideGap of it wait, and are decided together, in one decision,
// once the gap has passed: those decisions take at most a tenth of the
// publisher's time whatever tenants send, and each offer still gets the
// verdicts the table will show, once decided. A decision made
// incrementally ends the batching.

// deferredOffer is a changed offer (or a withdrawal) waiting for the next
// batch: what Offer made of it before it took p.mu.
type deferredOffer struct {
	offer    Offer
	tools    []spec.TableTool
	sizes    []int32
	same     []bool
	prev     *claim
	withdraw bool
}

// Bounds of the gap after a decision with Decide (see decideGap).
const (
	minDecideGap = 10 * time.Millisecond
	maxDecideGap = time.Second
)

// decideGap is how long changed offers wait after a decision with Decide
// that took took: nine times that, so that those decisions take at most a
// tenth of the time, within minDecideGap (offers that come together share
// one even in a small cluster) and maxDecideGap (what an offer may wait).
func decideGap(took time.Duration) time.Duration {
	return min(max(9*took, minDecideGap), maxDecideGap)
}

// rebudgetLocked has the index decide the budget again if it may bind
// (see ownership.Index.Rebudget), and writes what changed; it notes
// whether the decision was made with Decide, and when, for deferLocked.
// p.mu is held.
func (p *TablePublisher) rebudgetLocked() {
	inc, full := p.index.Decisions()
	start := time.Now()
	p.index.Rebudget()
	switch inc2, full2 := p.index.Decisions(); {
	case full2 > full:
		p.decidedFully, p.decideAfter = true, time.Now().Add(decideGap(time.Since(start)))
	case inc2 > inc:
		p.decidedFully = false
	}
	p.drainLocked()
}

// deferLocked reports whether a changed offer or a withdrawal waits for
// the next batch: one is waiting already, or the last decision was made
// with Decide less than its gap ago. p.mu is held.
func (p *TablePublisher) deferLocked() bool {
	return len(p.deferred) > 0 || (p.decidedFully && time.Now().Before(p.decideAfter))
}

// awaitBatch queues d as toolSet's change for the next batch, which it
// starts if none is due, and returns toolSet's verdicts once the batch is
// decided, or ctx's error if it is done first (the change is then dropped,
// unless the batch took it). p.mu is held on entry and released.
func (p *TablePublisher) awaitBatch(ctx context.Context, toolSet types.NamespacedName, d *deferredOffer) (map[string]ownership.Verdict, error) {
	if p.deferred == nil {
		p.deferred = map[types.NamespacedName]*deferredOffer{}
	}
	// A later change of the ToolSet replaces the one waiting: the batch
	// decides what it offers last.
	p.deferred[toolSet] = d
	if p.batched == nil {
		p.batched = make(chan struct{})
		time.AfterFunc(time.Until(p.decideAfter), p.decideBatch)
	}
	done := p.batched
	p.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		p.mu.Lock()
		if p.deferred[toolSet] == d {
			delete(p.deferred, toolSet)
		}
		p.mu.Unlock()
		return nil, ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.verdicts(toolSet), nil
}

// decideBatch applies every change waiting, in ToolSet order, and decides
// them in one decision.
func (p *TablePublisher) decideBatch() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ts := range slices.SortedFunc(maps.Keys(p.deferred), compareNamespacedName) {
		d := p.deferred[ts]
		if d.withdraw {
			p.offered(ts)
			p.release(ts, ts)
			continue
		}
		p.applyOfferLocked(d)
	}
	clear(p.deferred)
	p.rebudgetLocked()
	setConflictsMetric(p.index.Conflicts())
	close(p.batched)
	p.batched = nil
}
