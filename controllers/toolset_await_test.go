package controllers

import (
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/toolplane/toolplane/api/v1alpha1"
)

func TestAwaitsNewWrite(t *testing.T) {
	published := func(name string) v1alpha1.ToolStatus {
		return v1alpha1.ToolStatus{Name: name, State: v1alpha1.ToolPublished}
	}
	awaiting := func(name string) v1alpha1.ToolStatus {
		return v1alpha1.ToolStatus{Name: name, State: v1alpha1.ToolPending, Reason: awaitingWriteReason}
	}
	conflicted := func(name string) v1alpha1.ToolStatus {
		return v1alpha1.ToolStatus{Name: name, State: v1alpha1.ToolConflicted}
	}
	for _, tc := range []struct {
		name          string
		before, after []v1alpha1.ToolStatus
		want          bool
	}{
		{"a new ToolSet", nil, []v1alpha1.ToolStatus{awaiting("a"), awaiting("b")}, true},
		{"a name more", []v1alpha1.ToolStatus{published("a")}, []v1alpha1.ToolStatus{published("a"), awaiting("b")}, true},
		{"a conflict won", []v1alpha1.ToolStatus{conflicted("a")}, []v1alpha1.ToolStatus{awaiting("a")}, true},
		{"already shown awaiting", []v1alpha1.ToolStatus{awaiting("a")}, []v1alpha1.ToolStatus{awaiting("a")}, false},
		{"nothing awaits", nil, []v1alpha1.ToolStatus{published("a")}, false},
		// The status kept would say Published of a name the table lacks.
		{"a published name awaits again", []v1alpha1.ToolStatus{published("a")}, []v1alpha1.ToolStatus{awaiting("a")}, false},
		{"a published name lost", []v1alpha1.ToolStatus{published("a")}, []v1alpha1.ToolStatus{conflicted("a"), awaiting("b")}, false},
		{"a published name dropped", []v1alpha1.ToolStatus{published("a")}, []v1alpha1.ToolStatus{awaiting("b")}, false},
	} {
		if got := awaitsNewWrite(tc.before, tc.after); got != tc.want {
			t.Errorf("%s: awaitsNewWrite = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestWriteHoldsBound(t *testing.T) {
	var h writeHolds
	key := types.NamespacedName{Namespace: "ns", Name: "ts"}
	var expired atomic.Int32
	expire := func() { expired.Add(1) }
	now := time.Now()
	const bound = 50 * time.Millisecond
	if !h.hold(key, now, bound, nil, expire) {
		t.Fatal("a new hold holds")
	}
	if !h.hold(key, now.Add(bound/2), bound, nil, expire) {
		t.Fatal("a hold within its bound holds")
	}
	deadline := time.Now().Add(10 * time.Second)
	for expired.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if expired.Load() != 1 {
		t.Fatalf("the hold's bound passed, and expire ran %d times, want 1", expired.Load())
	}
	if h.hold(key, now.Add(bound), bound, nil, expire) {
		t.Fatal("a hold past its bound lets the status be written")
	}
	// Released before its bound, a hold never expires.
	if !h.hold(key, time.Now(), bound, nil, expire) {
		t.Fatal("a new hold after one ended holds")
	}
	h.release(key)
	time.Sleep(2 * bound)
	if expired.Load() != 1 {
		t.Fatalf("a released hold expired: %d", expired.Load())
	}
}

// A hold goes on while the table's write is under way when it is due to
// end, a bound at a time, and ends once the write is not, or after
// maxAwaitBounds bounds whatever the write does.
func TestWriteHoldsWhileWriteUnderway(t *testing.T) {
	const bound = 50 * time.Millisecond
	waitExpired := func(t *testing.T, expired *atomic.Int32) time.Time {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for expired.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if expired.Load() != 1 {
			t.Fatalf("expire ran %d times, want 1", expired.Load())
		}
		return time.Now()
	}
	t.Run("until the write is no longer under way", func(t *testing.T) {
		var h writeHolds
		key := types.NamespacedName{Namespace: "ns", Name: "ts"}
		var expired atomic.Int32
		var underway atomic.Bool
		underway.Store(true)
		start := time.Now()
		if !h.hold(key, start, bound, underway.Load, func() { expired.Add(1) }) {
			t.Fatal("a new hold holds")
		}
		time.Sleep(3 * bound)
		if expired.Load() != 0 {
			t.Fatal("the hold expired while the write was under way")
		}
		if !h.hold(key, start.Add(bound+bound/2), bound, underway.Load, nil) {
			t.Fatal("a hold extended by a write under way holds past its first bound")
		}
		underway.Store(false)
		if took := waitExpired(t, &expired).Sub(start); took > 6*bound {
			t.Fatalf("the hold ended %s after it began, a write no longer under way; want within a bound of it", took)
		}
	})
	t.Run("at most maxAwaitBounds bounds", func(t *testing.T) {
		var h writeHolds
		key := types.NamespacedName{Namespace: "ns", Name: "ts"}
		var expired atomic.Int32
		start := time.Now()
		h.hold(key, start, bound, func() bool { return true }, func() { expired.Add(1) })
		if took := waitExpired(t, &expired).Sub(start); took < maxAwaitBounds*bound {
			t.Fatalf("the hold ended after %s, want %s at least", took, maxAwaitBounds*bound)
		}
		if h.hold(key, start.Add(maxAwaitBounds*bound), bound, func() bool { return true }, nil) {
			t.Fatal("a hold past its last bound lets the status be written")
		}
	})
}
