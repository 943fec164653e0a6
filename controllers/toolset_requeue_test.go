package controllers

import (
	"testing"
	"time"
)

// TestRequeueAfterGrid checks the steady requeue: never later than the
// interval, at most a tenth early (as the API says of spec.interval), and
// ending on the step
// grid that every ToolSet of the interval shares, so that their rounds
// come due together.
func TestRequeueAfterGrid(t *testing.T) {
	for _, d := range []time.Duration{5 * time.Second, 30 * time.Second, 10 * time.Minute} {
		grid := d / requeueGrid
		ends := map[time.Time]int{}
		base := time.Now()
		for i := range 2000 {
			// ToolSets reconciled at scattered instants.
			now := base.Add(time.Duration(i) * 7919 * time.Microsecond)
			got := requeueAfter(now, d)
			if got > d {
				t.Fatalf("interval %s: requeue %s is later than the interval", d, got)
			}
			if got <= 0 || got < d-d/10 {
				t.Fatalf("interval %s: requeue %s is more than a tenth early", d, got)
			}
			at := now.Add(got)
			if !at.Equal(at.Truncate(grid)) {
				t.Fatalf("interval %s: the requeue ends at %s, off the grid of %s", d, at.Format(time.StampMicro), grid)
			}
			ends[at]++
		}
		// 2,000 reconciles over about 16s come due on far fewer instants.
		if span := time.Duration(2000)*7919*time.Microsecond + d/10; len(ends) > int(span/grid)+2 {
			t.Errorf("interval %s: %d distinct instants for 2000 requeues over %s, want at most one a step", d, len(ends), span)
		}
	}
	// Too short for a grid: jittered only.
	if got := requeueAfter(time.Now(), 10*time.Millisecond); got > 10*time.Millisecond || got < 9*time.Millisecond {
		t.Errorf("a 10ms requeue became %s", got)
	}
}
