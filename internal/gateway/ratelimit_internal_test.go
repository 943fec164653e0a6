package gateway

import (
	"strconv"
	"testing"
	"time"
)

func TestCallBucketsStayBoundedWhateverKeysACallerRotates(t *testing.T) {
	l := newCallLimits(64)
	now := time.Now()
	for i := range 10_000 {
		if r, _ := l.reserve(keyOf("caller", "tool-"+strconv.Itoa(i)), 1, now); r == nil {
			t.Fatalf("the first call of key %d was limited", i)
		}
	}
	if n := l.len(); n > 64 {
		t.Fatalf("%d buckets kept, want at most 64", n)
	}
}

func TestCallBucketsEvictIdleOnesFirst(t *testing.T) {
	l := newCallLimits(2)
	now := time.Now()
	l.reserve(keyOf("busy"), 60, now) // spent one of 60: not full for a second
	l.reserve(keyOf("idle"), 60, now.Add(-time.Hour))
	// "idle" was used first (its timestamp is an hour old, so it is full
	// again by now); "busy" is the least recently used but not full.
	l.reserve(keyOf("idle"), 60, now.Add(-time.Hour))
	l.mu.Lock()
	l.lru.MoveToBack(l.buckets[keyOf("busy")])
	l.mu.Unlock()
	// Now "busy" is at the back: evicting must skip it for the idle one.
	l.reserve(keyOf("new"), 60, now)
	l.mu.Lock()
	_, busy := l.buckets[keyOf("busy")]
	_, idle := l.buckets[keyOf("idle")]
	l.mu.Unlock()
	if !busy || idle {
		t.Fatalf("after a new bucket: busy kept %v, idle kept %v; want the idle one evicted", busy, idle)
	}
}

func TestCallBucketRefusesOverItsRateAndSaysWhen(t *testing.T) {
	l := newCallLimits(8)
	now := time.Now()
	for i := range 3 {
		if r, _ := l.reserve(keyOf("k"), 3, now); r == nil {
			t.Fatalf("call %d of 3 a minute was limited", i)
		}
	}
	r, after := l.reserve(keyOf("k"), 3, now)
	if r != nil || after < 19*time.Second || after > 20*time.Second {
		t.Fatalf("4th call: reservation %v, retry after %s; want limited for 20s (one call per 20s)", r, after)
	}
	if r, _ := l.reserve(keyOf("k"), 3, now.Add(20*time.Second)); r == nil {
		t.Fatal("a call 20s later was limited")
	}
}

func TestCallBucketKeysTellPartsApart(t *testing.T) {
	if keyOf("a\x00b", "c") == keyOf("a", "b\x00c") || keyOf("ab", "") == keyOf("a", "b") {
		t.Fatal("two different callers and tools share a bucket key")
	}
}
