package gateway

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A namespace's share bounds its calls in flight, and only its own: a
// share kept as the spare for the next namespace starts empty, and the
// map holds the namespaces of the calls in flight alone.
func TestCallSharesBoundEachNamespaceAlone(t *testing.T) {
	var s callShares
	ctx := context.Background()
	a, err := s.acquire(ctx, "a", 1)
	if err != nil {
		t.Fatal(err)
	}
	a.release() // a's share is now the spare
	b, err := s.acquire(ctx, "b", 1)
	if err != nil {
		t.Fatalf("b after a's share became the spare: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := s.acquire(short, "b", 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a second call of b, whose share is one: %v, want it to wait out its deadline", err)
	}
	a2, err := s.acquire(ctx, "a", 1)
	if err != nil {
		t.Fatalf("a while b holds its share: %v", err)
	}
	if a2 == b {
		t.Error("a and b hold one share")
	}
	b.release()
	a2.release()
	if len(s.m) != 0 {
		t.Errorf("%d shares left with no call in flight", len(s.m))
	}
	if s.spare == nil {
		t.Error("no spare kept")
	}
	var none *callShare
	none.release() // a call without a backend holds no share
}
