package gateway

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/singleflight"
)

// A caller that waited for another's run, which ended because that caller
// went away, runs fn itself; and a run ends with the last of its callers.
func TestShareRunsAgainWhenTheRunnerGoesAway(t *testing.T) {
	var (
		g    singleflight.Group
		runs atomic.Int32
	)
	started := make(chan struct{}, 2)
	fn := func(ctx context.Context) (any, error) {
		n := runs.Add(1)
		started <- struct{}{}
		if n == 1 {
			<-ctx.Done() // the first run lasts until its caller goes away
			return nil, ctx.Err()
		}
		return "answer", nil
	}
	first, cancel := context.WithCancel(context.Background())
	firstDone := make(chan error, 1)
	go func() {
		_, err, _ := share(first, &g, "k", fn)
		firstDone <- err
	}()
	<-started
	second := make(chan any, 1)
	go func() {
		v, err, _ := share(context.Background(), &g, "k", fn)
		if err != nil {
			t.Errorf("the second caller: %v", err)
		}
		second <- v
	}()
	time.Sleep(20 * time.Millisecond) // the second caller joins the first run
	cancel()
	if err := <-firstDone; err == nil {
		t.Error("the first caller, gone away, got no error")
	}
	select {
	case v := <-second:
		if v != "answer" {
			t.Errorf("the second caller got %v", v)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the second caller never got an answer")
	}
	if n := runs.Load(); n != 2 {
		t.Errorf("%d runs, want 2", n)
	}
}
