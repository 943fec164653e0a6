package controllers

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/toolplane/toolplane/api/v1alpha1"
)

// DefaultScrapeWait is how long a reconcile waits for its ToolSet's scrapes
// before it hands the worker back. Scrapes of healthy Pods end well within
// it, so that one reconcile scrapes and publishes; slower ones finish in
// the background and enqueue the ToolSet when they end. The first round of
// a new ToolSet, whose status waits for the table's write anyway, does not
// wait.
const DefaultScrapeWait = time.Second

// scrapeRuns runs the scrapes of every ToolSet off the reconcile workers,
// so that a ToolSet whose Pods hang holds no worker longer than the scrape
// wait, however long its timeout, and delays only itself. One run per
// ToolSet is in flight at a time.
type scrapeRuns struct {
	// ctx ends every run when the manager stops.
	ctx  context.Context
	wait time.Duration
	// wake enqueues a ToolSet whose run ended after its reconcile returned.
	wake chan event.TypedGenericEvent[*v1alpha1.ToolSet]

	mu   sync.Mutex
	runs map[types.NamespacedName]*scrapeRun
}

// scrapeRun is one round of scrapes of one ToolSet.
type scrapeRun struct {
	// key is what the round scrapes: the generation and the Pods. A
	// reconcile that finds another key waits for a new round.
	key  string
	done chan struct{}
	// deadline is when the round ends at the latest.
	deadline time.Time
	// cancel ends the round early: its ToolSet is gone (forget).
	cancel context.CancelFunc

	// Guarded by scrapeRuns.mu.
	results  runResults
	finished bool
	// abandoned is set when a reconcile stopped waiting for the round,
	// which then enqueues the ToolSet when it ends.
	abandoned bool
}

func newScrapeRuns(ctx context.Context, wait time.Duration) *scrapeRuns {
	if wait <= 0 {
		wait = DefaultScrapeWait
	}
	return &scrapeRuns{
		ctx: ctx, wait: wait,
		wake: make(chan event.TypedGenericEvent[*v1alpha1.ToolSet], 1024),
		runs: map[types.NamespacedName]*scrapeRun{},
	}
}

// waitTimers are the stopped timers of the reconciles waiting for a round,
// reused: one a round cost two allocations.
var waitTimers = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

// runKey identifies a round by the spec's generation and the Pods it
// scrapes, with their addresses.
func runKey(generation int64, pods []*corev1.Pod) string {
	parts := make([]string, 0, len(pods))
	for _, p := range pods {
		parts = append(parts, string(p.UID)+"@"+p.Status.PodIP)
	}
	slices.Sort(parts)
	return strconv.FormatInt(generation, 10) + ";" + strings.Join(parts, ",")
}

// runResults is what a round brings back: each Pod's result and, if the
// reconcile that started the round asked for it, what the API server said
// of the ToolSet's Service (see checkService).
type runResults struct {
	pods    []podResult
	service *serviceRead
}

// results returns the results of a round of scrapes of the ToolSet for
// key, starting one with scrape if none is in flight, and waits for it at
// most the scrape wait, or not at all if noWait. ok is false when the round
// is still running: the ToolSet is enqueued when it ends, and retry is when
// to look again should that enqueue be lost. budget bounds the round:
// waiting for scrape slots and the scrapes themselves.
func (s *scrapeRuns) results(ctx context.Context, name types.NamespacedName, key string, budget time.Duration, noWait bool,
	scrape func(context.Context) runResults) (results runResults, retry time.Duration, ok bool) {
	s.mu.Lock()
	run := s.runs[name]
	switch {
	case run != nil && run.finished && run.key == key:
		// A round that ended after its reconcile returned: use it once.
		delete(s.runs, name)
		s.mu.Unlock()
		return run.results, 0, true
	case run != nil && !run.finished:
		if run.key != key {
			// A round for an older spec or Pod set: let it end, then scrape
			// anew.
			run.abandoned = true
			s.mu.Unlock()
			return runResults{}, time.Until(run.deadline) + time.Second, false
		}
	default:
		ctx, cancel := context.WithTimeout(s.ctx, budget)
		run = &scrapeRun{key: key, done: make(chan struct{}), deadline: time.Now().Add(budget), cancel: cancel}
		s.runs[name] = run
		go s.run(ctx, name, run, scrape)
	}
	s.mu.Unlock()

	if !noWait {
		t := waitTimers.Get().(*time.Timer)
		t.Reset(s.wait)
		defer func() {
			// Stopped, a timer's channel holds nothing (as of Go 1.23): the
			// next Reset starts it afresh.
			t.Stop()
			waitTimers.Put(t)
		}()
		select {
		case <-run.done:
		case <-t.C:
		case <-ctx.Done():
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !run.finished {
		// Hand the worker back; the round enqueues the ToolSet when it ends.
		run.abandoned = true
		return runResults{}, time.Until(run.deadline) + time.Second, false
	}
	if s.runs[name] == run {
		delete(s.runs, name)
	}
	return run.results, 0, true
}

func (s *scrapeRuns) run(ctx context.Context, name types.NamespacedName, run *scrapeRun, scrape func(context.Context) runResults) {
	defer run.cancel()
	results := scrape(ctx)
	s.mu.Lock()
	run.results, run.finished = results, true
	wake := run.abandoned
	s.mu.Unlock()
	close(run.done)
	if !wake || s.ctx.Err() != nil {
		return
	}
	obj := &v1alpha1.ToolSet{ObjectMeta: metav1.ObjectMeta{Namespace: name.Namespace, Name: name.Name}}
	select {
	case s.wake <- event.TypedGenericEvent[*v1alpha1.ToolSet]{Object: obj}:
	default:
		// The queue is full; the reconcile's requeue comes back for it.
	}
}

// forget drops what is kept of a ToolSet that is gone. A round in flight
// is ended, so that it gives up its place in any queue for a slot, and
// enqueues nothing.
func (s *scrapeRuns) forget(name types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if run := s.runs[name]; run != nil {
		run.abandoned = false
		run.cancel()
		delete(s.runs, name)
	}
}
