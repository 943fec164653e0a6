// Package ttlcache is a bounded map whose entries expire: the cache of
// token reviews and access decisions that the gateway's authenticators and
// the metrics servers' filter keep.
package ttlcache

import (
	"sync"
	"time"
)

// Cache is a map whose entries expire, bounded to a number of entries:
// when full it drops the expired ones, and if that leaves it more than
// three quarters full, arbitrary others down to that, so that a full cache
// (many callers of a large table) costs some callers some questions again,
// not every caller all of them at once. It is safe for concurrent use.
type Cache[K comparable, V any] struct {
	mu      sync.Mutex
	max     int
	entries map[K]entry[V]
}

type entry[V any] struct {
	v       V
	expires time.Time
}

// New returns an empty Cache of at most max entries.
func New[K comparable, V any](max int) *Cache[K, V] {
	return &Cache[K, V]{max: max, entries: map[K]entry[V]{}}
}

// Get returns k's value, if it is there and has not expired.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok || time.Now().After(e.expires) {
		var zero V
		return zero, false
	}
	return e.v, true
}

// Put sets k's value, for ttl.
func (c *Cache[K, V]) Put(k K, v V, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if len(c.entries) >= c.max {
		for key, e := range c.entries {
			if now.After(e.expires) {
				delete(c.entries, key)
			}
		}
		for key := range c.entries {
			if len(c.entries) <= c.max*3/4 {
				break
			}
			delete(c.entries, key)
		}
	}
	c.entries[k] = entry[V]{v: v, expires: now.Add(ttl)}
}
