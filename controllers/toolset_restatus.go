package controllers

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/toolplane/toolplane/api/v1alpha1"
)

// This file holds what lets a ToolSet's status follow an ownership change
// made by another ToolSet (its owner deleted, a policy changed, a budget
// freed) without a scrape: the publisher tells the ToolSet through Changed,
// and the reconcile asks the publisher's verdicts again on the last round's
// offer instead of scraping its Pods once more before their interval.

// lastRound is what a ToolSet's last full round offered and found: enough
// to recompute its status when only the verdicts may have changed.
type lastRound struct {
	// key is the round's spec generation and Pods (runKey).
	key string
	// at is when it was made; due is when the next scrape is.
	at, due time.Time
	// serviceRefused is why the Service was refused then, if it was.
	serviceRefused string
	offer          Offer
	rd             round
	a              assembly
	held           bool
}

// restatusMarks records why each ToolSet was enqueued, as far as a
// restatus cares: the publisher told it of an ownership change, or a Pod
// event asks for a scrape. The work queue coalesces requests, so a
// reconcile that finds both scrapes.
type restatusMarks struct {
	mu     sync.Mutex
	marks  map[types.NamespacedName]uint8
	events chan event.TypedGenericEvent[*v1alpha1.ToolSet]
}

const (
	markOwnership uint8 = 1 << iota
	markScrape
)

func (m *restatusMarks) mark(key types.NamespacedName, bit uint8) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.marks == nil {
		m.marks = map[types.NamespacedName]uint8{}
	}
	m.marks[key] |= bit
}

// take returns the marks of key and clears them.
func (m *restatusMarks) take(key types.NamespacedName) uint8 {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.marks[key]
	delete(m.marks, key)
	return b
}

// relayChanged marks every ToolSet the publisher tells of an ownership
// change and hands it on to the work queue, until ctx is done.
func (r *ToolSetReconciler) relayChanged(ctx context.Context) error {
	from := r.Publisher.Changed()
	for {
		select {
		case ev := <-from:
			r.restatus.mark(client.ObjectKeyFromObject(ev.Object), markOwnership)
			select {
			case r.restatus.events <- ev:
			case <-ctx.Done():
				return nil
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// scrapeFor marks the ToolSets a Pod event enqueues as wanting a scrape.
func (r *ToolSetReconciler) scrapeFor(fn handler.MapFunc) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		reqs := fn(ctx, obj)
		for _, req := range reqs {
			r.restatus.mark(req.NamespacedName, markScrape)
		}
		return reqs
	}
}

// restatusable returns the last round of a ToolSet enqueued only because
// its ownership changed, if that round still stands: the same spec and
// Pods, the same Service verdict, and its next scrape not yet due. Else
// nil, and the reconcile scrapes.
func (r *ToolSetReconciler) restatusable(key types.NamespacedName, mem *toolSetMemory, runKey, serviceRefused string, now time.Time) *lastRound {
	marks := r.restatus.take(key)
	last := mem.last
	if marks != markOwnership || last == nil || last.key != runKey || last.serviceRefused != serviceRefused || !now.Before(last.due) {
		return nil
	}
	return last
}
