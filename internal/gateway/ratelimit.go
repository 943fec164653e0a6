package gateway

import (
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Call limits: two token buckets in front of every routed call, both per
// replica (with N replicas the cluster-wide budget is N times each).
//
//   - The owner's: a ToolSet's spec.limits.callsPerMinute, carried in its
//     table entries, is what its workload can take from every caller and
//     for every tool of the ToolSet together. One bucket per ToolSet.
//   - The caller's: Options.MaxCallsPerCallerPerMinute, an admin ceiling
//     on what one caller may call of one tool. One bucket per caller and
//     tool; the caller is its user name under auth (every token and Pod of
//     one ServiceAccount share it, as the stream and session bounds do),
//     and its address without.
//
// Each bucket holds a minute's worth of calls (burst = the per-minute
// rate) and refills continuously. The caller's bucket is asked first, and
// its token handed back when the owner's bucket refuses, so that a call
// the owner refused costs the caller nothing.

// maxCallBuckets bounds the buckets kept, caller buckets and ToolSet
// buckets each: about 250 bytes apiece (keys are SHA-256 digests, so a
// caller's user name, however long its IdP made it, costs 32 bytes), so
// 64k of them is about 16 MiB.
// Only idle buckets are evicted first (a full bucket is the same as a new
// one); past the bound, the least recently used one goes, which at worst
// forgets the spending of the caller who has been idle longest.
const maxCallBuckets = 1 << 16

// Limits that refused a call, as the limited metric and the audit log
// name them.
const (
	limitCaller  = "caller"
	limitToolSet = "toolset"
)

// callLimits keeps the buckets of one kind.
type callLimits struct {
	mu      sync.Mutex
	max     int
	lru     *list.List // of *bucket, most recently used first
	buckets map[bucketKey]*list.Element
}

// bucketKey is the SHA-256 of what a bucket counts: the caller and the
// tool, or the ToolSet. Hashing bounds a key's memory whatever the length
// of the names in it.
type bucketKey [sha256.Size]byte

func keyOf(parts ...string) bucketKey {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, p := range parts {
		// Each part length-prefixed, so that no two lists of parts hash
		// the same bytes, whatever the parts hold.
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(p)))])
		h.Write([]byte(p))
	}
	var k bucketKey
	h.Sum(k[:0])
	return k
}

type bucket struct {
	key bucketKey
	lim *rate.Limiter
	per int // calls per minute it was made for
}

func newCallLimits(max int) *callLimits {
	return &callLimits{max: max, lru: list.New(), buckets: map[bucketKey]*list.Element{}}
}

// reserve takes one call from key's bucket of perMinute calls per minute
// (made if it is new, or changed if the rate did). It returns the
// reservation, to cancel if the call does not go ahead, or how long until
// a call would be allowed.
func (l *callLimits) reserve(key bucketKey, perMinute int, now time.Time) (*rate.Reservation, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b *bucket
	if e, ok := l.buckets[key]; ok {
		l.lru.MoveToFront(e)
		b = e.Value.(*bucket)
		if b.per != perMinute {
			b.lim.SetLimitAt(now, perMinuteLimit(perMinute))
			b.lim.SetBurstAt(now, perMinute)
			b.per = perMinute
		}
	} else {
		l.evict(now)
		b = &bucket{key: key, lim: rate.NewLimiter(perMinuteLimit(perMinute), perMinute), per: perMinute}
		l.buckets[key] = l.lru.PushFront(b)
	}
	r := b.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return nil, d
	}
	return r, 0
}

// evict makes room for one more bucket: idle ones first (from the least
// recently used end, a bounded look), then the least recently used.
func (l *callLimits) evict(now time.Time) {
	if l.lru.Len() < l.max {
		return
	}
	const look = 16
	e := l.lru.Back()
	for range look {
		if e == nil {
			break
		}
		b := e.Value.(*bucket)
		prev := e.Prev()
		if b.lim.TokensAt(now) >= float64(b.lim.Burst()) {
			l.remove(e)
			return
		}
		e = prev
	}
	l.remove(l.lru.Back())
}

func (l *callLimits) remove(e *list.Element) {
	l.lru.Remove(e)
	delete(l.buckets, e.Value.(*bucket).key)
}

func (l *callLimits) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lru.Len()
}

func perMinuteLimit(n int) rate.Limit { return rate.Limit(float64(n) / 60) }

// limited is why a call was not let through, and when to retry.
type limited struct {
	limit string // limitCaller or limitToolSet
	after time.Duration
	per   int
}

// limitCall takes the call of the tool i of s by the caller of key from
// both buckets, or says which refused it. key is "" when no caller limit
// applies.
func (g *Gateway) limitCall(key string, s *snapshot, i int) *limited {
	tool := &s.table.Tools[i]
	now := time.Now()
	var mine *rate.Reservation
	if n := g.opts.MaxCallsPerCallerPerMinute; n > 0 && key != "" {
		r, after := g.callerLimits.reserve(keyOf(key, tool.Name), n, now)
		if r == nil {
			return &limited{limit: limitCaller, after: after, per: n}
		}
		mine = r
	}
	if n := tool.CallsPerMinute; n > 0 {
		owner := keyOf(tool.ToolSet.String(), tool.ToolSetUID)
		if r, after := g.toolSetLimits.reserve(owner, n, now); r == nil {
			if mine != nil {
				mine.CancelAt(now)
			}
			return &limited{limit: limitToolSet, after: after, per: n}
		}
	}
	return nil
}

// retryAfter is l.after in whole seconds, at least one.
func (l *limited) retryAfter() int { return max(1, int(math.Ceil(l.after.Seconds()))) }

// message is the isError text of a limited call: what limited it, and when
// to retry.
func (l *limited) message(tool string, owner string) string {
	switch l.limit {
	case limitCaller:
		return fmt.Sprintf("Rate limited: you may call %s at most %d times a minute through this gateway. Retry in %d s.", tool, l.per, l.retryAfter())
	default:
		return fmt.Sprintf("Rate limited: the tools of ToolSet %s take at most %d calls a minute, from every caller together. Retry in %d s.", owner, l.per, l.retryAfter())
	}
}
