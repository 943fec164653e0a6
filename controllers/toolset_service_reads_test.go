package controllers

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// blockingReader answers every Get with NotFound once release is closed,
// and records how many Gets were in flight at most; a Get of namespace
// pass is answered at once, uncounted.
type blockingReader struct {
	client.Reader
	pass     string
	release  chan struct{}
	inFlight atomic.Int64
	most     atomic.Int64
	calls    atomic.Int64
}

func (b *blockingReader) Get(ctx context.Context, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	if key.Namespace == b.pass && b.pass != "" {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "services"}, key.Name)
	}
	n := b.inFlight.Add(1)
	defer b.inFlight.Add(-1)
	b.calls.Add(1)
	for {
		m := b.most.Load()
		if n <= m || b.most.CompareAndSwap(m, n) {
			break
		}
	}
	select {
	case <-b.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return apierrors.NewNotFound(schema.GroupResource{Resource: "services"}, key.Name)
}

// TestServiceReadsAreBounded: a burst of new ToolSets whose Services the
// cache does not hold asks the API server for them maxServiceReads at a
// time, however many rounds want one, and every round gets its answer.
func TestServiceReadsAreBounded(t *testing.T) {
	reader := &blockingReader{release: make(chan struct{})}
	r := &ToolSetReconciler{APIReader: reader}
	r.init()
	defer r.stop()

	const rounds = 10 * maxServiceReads
	reads := make([]serviceRead, rounds)
	var wg sync.WaitGroup
	for i := range rounds {
		wg.Go(func() {
			reads[i] = r.backgroundServiceRead(context.Background(), types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("svc-%d", i)})
		})
	}
	deadline := time.Now().Add(10 * time.Second)
	for reader.calls.Load() < maxServiceReads && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	// Give the others every chance to start a read they must not.
	time.Sleep(100 * time.Millisecond)
	if got := reader.most.Load(); got != maxServiceReads {
		t.Fatalf("%d reads in flight at most while all were held, want %d", got, maxServiceReads)
	}
	close(reader.release)
	wg.Wait()
	if got := reader.most.Load(); got > maxServiceReads {
		t.Fatalf("%d reads in flight at most, want at most %d", got, maxServiceReads)
	}
	for i, read := range reads {
		if read.err != nil || read.svc != nil || read.name != fmt.Sprintf("svc-%d", i) {
			t.Fatalf("round %d: %+v, want the Service missing", i, read)
		}
	}
	if got := reader.calls.Load(); got != rounds {
		t.Fatalf("%d reads, want %d", got, rounds)
	}

	// A round that ends while waiting for a read gets its context's error.
	held := &blockingReader{release: make(chan struct{})}
	r2 := &ToolSetReconciler{APIReader: held}
	r2.init()
	defer r2.stop()
	for range maxServiceReads {
		go r2.backgroundServiceRead(context.Background(), types.NamespacedName{Namespace: "ns", Name: "busy"})
	}
	for held.calls.Load() < maxServiceReads {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if read := r2.backgroundServiceRead(ctx, types.NamespacedName{Namespace: "ns", Name: "late"}); read.err == nil || read.svc != nil {
		t.Fatalf("a read past its context: %+v", read)
	}
	close(held.release)
}

// TestWorkerServiceReadsWaitForNoBackgroundRead: one tenant's burst of new
// ToolSets naming Services the cache lacks fills the background reads'
// slots and queues behind them; a reconcile of another namespace that
// reads its Service on its worker does not wait behind that queue (the red
// team's attack on a first version of the bound, which held every worker).
func TestWorkerServiceReadsWaitForNoBackgroundRead(t *testing.T) {
	reader := &blockingReader{pass: "victim", release: make(chan struct{})}
	defer close(reader.release)
	r := &ToolSetReconciler{APIReader: reader}
	r.init()
	defer r.stop()
	for i := range 4 * maxServiceReads {
		go r.backgroundServiceRead(context.Background(), types.NamespacedName{Namespace: "hostile", Name: fmt.Sprintf("nope-%d", i)})
	}
	for deadline := time.Now().Add(10 * time.Second); reader.calls.Load() < maxServiceReads; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d background reads reached the API reader, want %d", reader.calls.Load(), maxServiceReads)
		}
	}
	done := make(chan serviceRead, 1)
	go func() {
		done <- r.readService(context.Background(), types.NamespacedName{Namespace: "victim", Name: "svc"})
	}()
	select {
	case read := <-done:
		if read.err != nil || read.svc != nil {
			t.Fatalf("the victim's read: %+v, want the Service missing", read)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a worker's Service read waited behind the background reads, which are held")
	}
}

// TestRoundsWaitingForServiceReadsHoldOneGoroutineEach: the rounds of a
// burst of new ToolSets whose Services the cache lacks, their reads held
// at the API server, each wait on their own goroutine, before their
// scrapes, and start none beside it once the slots are taken; a round with
// a free slot reads beside its scrapes; and every round gets its answer
// and scrapes.
func TestRoundsWaitingForServiceReadsHoldOneGoroutineEach(t *testing.T) {
	reader := &blockingReader{release: make(chan struct{})}
	r := &ToolSetReconciler{APIReader: reader}
	r.init()
	defer r.stop()

	// A free slot: the read starts while the scrapes run.
	first := make(chan serviceRead, 1)
	go func() {
		first <- r.roundServiceRead(context.Background(), types.NamespacedName{Namespace: "ns", Name: "svc-first"}, time.Second, func() {
			for deadline := time.Now().Add(10 * time.Second); reader.calls.Load() < 1; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Error("the Service read did not start beside the scrapes though a slot was free")
					return
				}
			}
		})
	}()
	for deadline := time.Now().Add(10 * time.Second); reader.calls.Load() < 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first round's read never reached the API reader")
		}
	}

	before := runtime.NumGoroutine()
	const rounds = 10 * maxServiceReads
	var scraped atomic.Int64
	reads := make([]serviceRead, rounds)
	var wg sync.WaitGroup
	for i := range rounds {
		wg.Go(func() {
			reads[i] = r.roundServiceRead(context.Background(), types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("svc-%d", i)}, time.Second,
				func() { scraped.Add(1) })
		})
	}
	// The first round holds one slot; as many rounds as there are slots
	// left read beside their scrapes, and the others wait to read first.
	beside := int64(maxServiceReads - 1)
	for deadline := time.Now().Add(10 * time.Second); scraped.Load() < beside || reader.calls.Load() < maxServiceReads; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d rounds scraped, %d reads reached the API reader; want %d, and %d", scraped.Load(), reader.calls.Load(), beside, maxServiceReads)
		}
	}
	// Give any extra goroutine or scrape every chance to start.
	time.Sleep(100 * time.Millisecond)
	// One goroutine a round, and one a read in flight beside its round.
	if got, most := runtime.NumGoroutine()-before, rounds+maxServiceReads; got > most {
		t.Fatalf("%d goroutines more for %d rounds whose reads wait, want at most %d", got, rounds, most)
	}
	if got := scraped.Load(); got != beside {
		t.Fatalf("%d rounds scraped while their reads waited for a slot, want %d: a waiting round scrapes after its read", got, beside)
	}
	if got := reader.most.Load(); got != maxServiceReads {
		t.Fatalf("%d reads in flight at most, want %d", got, maxServiceReads)
	}
	close(reader.release)
	wg.Wait()
	if got := scraped.Load(); got != rounds {
		t.Fatalf("%d of %d rounds scraped", got, rounds)
	}
	for i, read := range reads {
		if read.err != nil || read.svc != nil || read.name != fmt.Sprintf("svc-%d", i) {
			t.Fatalf("round %d: %+v, want the Service missing", i, read)
		}
	}
	if read := <-first; read.err != nil || read.svc != nil || read.name != "svc-first" {
		t.Fatalf("the first round: %+v, want the Service missing", read)
	}
}

// TestQueuedRoundKeepsItsScrapesBudget: a round that waits for a read slot
// stops waiting once only its scrapes' share of its time is left, scrapes
// with that share, and then waits for its read.
func TestQueuedRoundKeepsItsScrapesBudget(t *testing.T) {
	r := readSlotsHeld(t)

	const budget, scrapes = 600 * time.Millisecond, 400 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	deadline, _ := ctx.Deadline()
	var left time.Duration
	read := r.roundServiceRead(ctx, types.NamespacedName{Namespace: "ns", Name: "late"}, scrapes, func() {
		left = time.Until(deadline)
	})
	// Not a timing: a round that waits on to its end leaves its scrapes
	// nothing; one that stops in time leaves them about their share, less
	// however late this goroutine runs on a busy machine.
	if left < scrapes/2 || left > scrapes {
		t.Errorf("the scrapes began with %s of the round left, want about their %s", left, scrapes)
	}
	if read.err == nil || read.name != "late" {
		t.Errorf("the read of a round whose slot never came: %+v, want its context's error", read)
	}
}

// TestAForgottenRoundEndsAndTakesNoClient: a ToolSet deleted while its
// round waits for a read slot ends the round at once, and the round, which
// took its client before it began, does not take it again once the
// scraper forgot it (a pool and its transport a deleted ToolSet, each kept
// for good).
func TestAForgottenRoundEndsAndTakesNoClient(t *testing.T) {
	r := readSlotsHeld(t)

	srvs, _ := countingServers(t, 1, false, []byte(`{"tools":[]}`))
	pods := loopbackPods(t, srvs...)
	s := newScraper(4, 0)
	tgt := httpTarget("gone")
	runs := newScrapeRuns(context.Background(), time.Second)
	client := s.clientFor(tgt)
	var scraped []podResult
	var read serviceRead
	_, _, ok := runs.results(context.Background(), tgt.toolSet, "k", time.Hour, true, func(ctx context.Context) runResults {
		read = r.roundServiceRead(ctx, types.NamespacedName{Namespace: "ns", Name: "svc"}, 10*time.Second, func() {
			scraped = s.scrapeAllWith(ctx, client, tgt, pods, nil)
		})
		return runResults{pods: scraped, service: &read}
	})
	if ok {
		t.Fatal("a round that waits for a read slot ended at once")
	}
	time.Sleep(50 * time.Millisecond)
	// As withdraw does.
	runs.mu.Lock()
	run := runs.runs[tgt.toolSet]
	runs.mu.Unlock()
	runs.forget(tgt.toolSet)
	s.forget(tgt.toolSet)
	select {
	case <-run.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the round of a forgotten ToolSet still waits for its read slot")
	}
	if !errors.Is(read.err, context.Canceled) {
		t.Errorf("the forgotten round's read: %+v, want it canceled", read)
	}
	s.mu.Lock()
	clients, pools := len(s.clients), len(s.pools)
	s.mu.Unlock()
	if clients != 0 || pools != 0 {
		t.Errorf("after the forgotten round: %d clients and %d pools kept, want none", clients, pools)
	}
}

// readSlotsHeld returns a reconciler whose every Service read slot is
// taken by a read the API reader holds until the test ends.
func readSlotsHeld(t *testing.T) *ToolSetReconciler {
	t.Helper()
	reader := &blockingReader{release: make(chan struct{})}
	r := &ToolSetReconciler{APIReader: reader}
	r.init()
	t.Cleanup(func() {
		close(reader.release)
		r.stop()
	})
	for i := range maxServiceReads {
		go r.backgroundServiceRead(context.Background(), types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("held-%d", i)})
	}
	for deadline := time.Now().Add(10 * time.Second); reader.calls.Load() < maxServiceReads; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d reads reached the API reader, want %d", reader.calls.Load(), maxServiceReads)
		}
	}
	return r
}
