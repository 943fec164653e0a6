package ttlcache

import (
	"testing"
	"time"
)

// A full cache of answers that have not expired loses a quarter of them,
// not all: many callers of a large table fill it, and dropping it whole
// would have every caller ask every question again at once.
func TestFullCacheDropsAQuarterNotAll(t *testing.T) {
	c := New[int, bool](1000)
	for i := range 1000 {
		c.Put(i, true, time.Hour)
	}
	c.Put(1000, true, time.Hour)
	kept := 0
	for i := range 1001 {
		if _, ok := c.Get(i); ok {
			kept++
		}
	}
	if kept < 700 || kept > 800 {
		t.Errorf("%d of 1,001 answers kept, want about three quarters", kept)
	}
	if _, ok := c.Get(1000); !ok {
		t.Error("the newest answer was dropped")
	}
}

// Expired answers go first.
func TestFullCacheDropsTheExpiredFirst(t *testing.T) {
	c := New[int, bool](10)
	for i := range 5 {
		c.Put(i, true, -time.Second)
	}
	for i := 5; i < 10; i++ {
		c.Put(i, true, time.Hour)
	}
	c.Put(10, true, time.Hour)
	for i := 5; i <= 10; i++ {
		if _, ok := c.Get(i); !ok {
			t.Errorf("answer %d dropped while expired ones were there", i)
		}
	}
}
