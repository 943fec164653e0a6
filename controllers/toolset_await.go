package controllers

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/toolplane/toolplane/api/v1alpha1"
)

// This file holds what spares a ToolSet the interim status write of a name
// it owns while the table's write that adds it is due: status says
// Published only of what the table readers see has (Publisher.Written), so
// a new name would cost two writes, Pending (AwaitingWrite) and then
// Published. Instead, the status that says AwaitingWrite is held back for
// a bound; the table's write tells the ToolSet through Changed, and its
// status is written once, Published. A write that does not land within
// the bound (failing, or held) lets the status say AwaitingWrite, so that
// users see why the tool is not published yet.

// DefaultAwaitWrite is how long a status that only a table write would
// make Published is held back: twice the publisher's longest delay of a
// write (DefaultTableMaxDelay), so that a write that starts as another
// ends still lands within it. While a write of the table is under way when
// it ends (see writeAwaiter), the hold goes on, a bound at a time, up to
// maxAwaitBounds of them: a table slow to write (the API server busy, the
// table large) still costs each new ToolSet one status write.
const DefaultAwaitWrite = 2 * DefaultTableMaxDelay

// maxAwaitBounds bounds how many AwaitWrite bounds a hold lasts while the
// table's write is under way.
const maxAwaitBounds = 8

// writeAwaiter is a Publisher that can tell whether a write of the table
// is due or in flight, and has not failed, as TablePublisher can.
type writeAwaiter interface {
	WriteUnderway() bool
}

// writeHolds are the ToolSets whose status is held back until the table's
// write, each with when its hold began.
type writeHolds struct {
	mu    sync.Mutex
	holds map[types.NamespacedName]*writeHold
}

type writeHold struct {
	// since is when the hold began, until when it ends.
	since, until time.Time
	timer        *time.Timer
}

// hold reports whether key's status may be held back at now, before its
// hold ends; a new hold ends bound after now, or, while extend says so
// when it is due to end, a bound later, up to maxAwaitBounds bounds from
// its start. A hold that ends calls expire, unless it was released by
// then. A hold past its end is released: the status is written.
func (h *writeHolds) hold(key types.NamespacedName, now time.Time, bound time.Duration, extend func() bool, expire func()) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w := h.holds[key]; w != nil {
		if now.Before(w.until) {
			return true
		}
		w.timer.Stop()
		delete(h.holds, key)
		return false
	}
	if h.holds == nil {
		h.holds = map[types.NamespacedName]*writeHold{}
	}
	w := &writeHold{since: now, until: now.Add(bound)}
	var end func()
	end = func() {
		h.mu.Lock()
		if h.holds[key] != w {
			h.mu.Unlock()
			return
		}
		if next := w.until.Add(bound); extend != nil && !next.After(w.since.Add(maxAwaitBounds*bound)) && extend() {
			w.until = next
			w.timer = time.AfterFunc(bound, end)
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
		expire()
	}
	w.timer = time.AfterFunc(bound, end)
	h.holds[key] = w
	return true
}

// release ends key's hold, if it has one.
func (h *writeHolds) release(key types.NamespacedName) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w := h.holds[key]; w != nil {
		w.timer.Stop()
		delete(h.holds, key)
	}
}

// holdForWrite reports whether the status ts now has waits for the table's
// write instead of being written: it shows some name the ToolSet owns as
// awaiting the write, which before did not, and the status kept (before)
// claims Published of nothing that the new one does not. The hold lasts
// AwaitWrite from the first reconcile that held, longer while the table's
// write is under way (see DefaultAwaitWrite); then the ToolSet is
// re-statused (as by an ownership change, without a scrape) and its status
// says AwaitingWrite.
func (r *ToolSetReconciler) holdForWrite(key types.NamespacedName, before, ts *v1alpha1.ToolSet, now time.Time) bool {
	bound := r.AwaitWrite
	if bound == 0 {
		bound = DefaultAwaitWrite
	}
	if bound < 0 || !awaitsNewWrite(before.Status.Tools, ts.Status.Tools) {
		r.holds.release(key)
		return false
	}
	var extend func() bool
	if wa, ok := r.Publisher.(writeAwaiter); ok {
		extend = wa.WriteUnderway
	}
	return r.holds.hold(key, now, bound, extend, func() { r.restatusNow(key) })
}

// restatusNow enqueues key as the publisher's Changed does: its status is
// recomputed from its last round, without a scrape.
func (r *ToolSetReconciler) restatusNow(key types.NamespacedName) {
	r.restatus.mark(key, markOwnership)
	ev := event.TypedGenericEvent[*v1alpha1.ToolSet]{Object: &v1alpha1.ToolSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
	}}
	select {
	case r.restatus.events <- ev:
	case <-r.runs.ctx.Done():
	}
}

// awaitsNewWrite reports whether after shows a tool as awaiting the
// table's write that before does not, while every tool Published in
// before is Published in after: before may then stand until the write.
func awaitsNewWrite(before, after []v1alpha1.ToolStatus) bool {
	if awaitingWrites(after) == 0 {
		// The steady state: nothing awaits a write, so nothing new does.
		return false
	}
	prev := make(map[string]v1alpha1.ToolStatus, len(before))
	for _, t := range before {
		prev[t.Name] = t
	}
	news := false
	published := make(map[string]bool, len(after))
	for _, t := range after {
		if awaitsWrite(t) && !awaitsWrite(prev[t.Name]) {
			news = true
		}
		if t.State == v1alpha1.ToolPublished {
			published[t.Name] = true
		}
	}
	if !news {
		return false
	}
	for _, t := range before {
		if t.State == v1alpha1.ToolPublished && !published[t.Name] {
			return false
		}
	}
	return true
}
