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
	if !h.hold(key, now, bound, expire) {
		t.Fatal("a new hold holds")
	}
	if !h.hold(key, now.Add(bound/2), bound, expire) {
		t.Fatal("a hold within its bound holds")
	}
	deadline := time.Now().Add(10 * time.Second)
	for expired.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if expired.Load() != 1 {
		t.Fatalf("the hold's bound passed, and expire ran %d times, want 1", expired.Load())
	}
	if h.hold(key, now.Add(bound), bound, expire) {
		t.Fatal("a hold past its bound lets the status be written")
	}
	// Released before its bound, a hold never expires.
	if !h.hold(key, time.Now(), bound, expire) {
		t.Fatal("a new hold after one ended holds")
	}
	h.release(key)
	time.Sleep(2 * bound)
	if expired.Load() != 1 {
		t.Fatalf("a released hold expired: %d", expired.Load())
	}
}
