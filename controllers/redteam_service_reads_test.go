package controllers

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// slowReader answers every Get NotFound after delay: an API server under
// load, every read alike.
type slowReader struct {
	client.Reader
	delay time.Duration
}

func (s slowReader) Get(ctx context.Context, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return ctx.Err()
	}
	return apierrors.NewNotFound(schema.GroupResource{Resource: "services"}, key.Name)
}

// TestRedteamServiceReadHeadOfLine: one tenant's burst of new ToolSets
// naming Services the cache lacks queues their first rounds' background
// reads on the one global FIFO of maxServiceReads slots. A reconcile of
// another namespace that must read its Service inline (Reconcile's
// readService at the !firstRound branch) holds its worker while it waits
// behind the whole queue: with MaxConcurrentReconciles such reconciles,
// every worker stalls, also for ToolSets that read nothing. Unbounded
// before, that read waited only for its own GET; workers are already
// bounded by MaxConcurrentReconciles.
func TestRedteamServiceReadHeadOfLine(t *testing.T) {
	const get = 20 * time.Millisecond
	r := &ToolSetReconciler{APIReader: slowReader{delay: get}}
	r.init()
	defer r.stop()

	// The hostile tenant's first rounds, off the workers.
	const burst = 200
	var wg sync.WaitGroup
	for i := range burst {
		wg.Go(func() {
			r.backgroundServiceRead(context.Background(), types.NamespacedName{Namespace: "hostile", Name: fmt.Sprintf("nope-%d", i)})
		})
	}
	time.Sleep(50 * time.Millisecond) // they are queued

	// A victim's reconcile, on a worker, reads its Service inline.
	start := time.Now()
	read := r.readService(context.Background(), types.NamespacedName{Namespace: "victim", Name: "svc"})
	waited := time.Since(start)
	wg.Wait()
	if read.err != nil {
		t.Fatal(read.err)
	}
	if waited > 5*get {
		t.Fatalf("a worker-held Service read of namespace victim took %s behind namespace hostile's %d queued reads (one GET is %s)", waited.Round(time.Millisecond), burst, get)
	}
}
