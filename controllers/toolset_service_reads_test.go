package controllers

import (
	"context"
	"fmt"
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
