package gateway

import (
	"testing"
	"time"
)

// A full cache of answers that have not expired loses a quarter of them,
// not all: many callers of a large table fill it, and dropping it whole
// would have every caller ask every question again at once.
func TestFullTTLCacheDropsAQuarterNotAll(t *testing.T) {
	c := newTTLCache[int, bool](1000)
	for i := range 1000 {
		c.put(i, true, time.Hour)
	}
	c.put(1000, true, time.Hour)
	kept := 0
	for i := range 1001 {
		if _, ok := c.get(i); ok {
			kept++
		}
	}
	if kept < 700 || kept > 800 {
		t.Errorf("%d of 1,001 answers kept, want about three quarters", kept)
	}
	if _, ok := c.get(1000); !ok {
		t.Error("the newest answer was dropped")
	}
}

// Expired answers go first.
func TestFullTTLCacheDropsTheExpiredFirst(t *testing.T) {
	c := newTTLCache[int, bool](10)
	for i := range 5 {
		c.put(i, true, -time.Second)
	}
	for i := 5; i < 10; i++ {
		c.put(i, true, time.Hour)
	}
	c.put(10, true, time.Hour)
	for i := 5; i <= 10; i++ {
		if _, ok := c.get(i); !ok {
			t.Errorf("answer %d dropped while expired ones were there", i)
		}
	}
}
