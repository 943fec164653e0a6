package controllers

import (
	"reflect"
	"testing"
	"time"

	"github.com/toolplane/toolplane/toolkit/spec"
)

func TestNextHold(t *testing.T) {
	const interval = 10 * time.Second
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	old := []spec.TableTool{{Name: "a"}, {Name: "b"}}
	fresh := []spec.TableTool{{Name: "c"}}
	holding := holdState{held: old, heldRevision: "r1", outageSince: t0}
	down := holdObservation{}

	for _, tc := range []struct {
		name     string
		prev     holdState
		obs      holdObservation
		now      time.Time
		interval time.Duration
		next     holdState
		out      holdOutcome
	}{{
		name: "a scraped round offers what it saw and remembers it",
		obs:  holdObservation{scraped: true, tools: fresh, revision: "r2"},
		now:  t0, interval: interval,
		next: holdState{held: fresh, heldRevision: "r2"},
		out:  holdOutcome{offer: fresh, requeue: interval},
	}, {
		name: "a scraped round ends an outage, and a drop with it",
		prev: holdState{outageSince: t0, dropped: true},
		obs:  holdObservation{scraped: true, tools: fresh, revision: "r2"},
		now:  t0.Add(time.Hour), interval: interval,
		next: holdState{held: fresh, heldRevision: "r2"},
		out:  holdOutcome{offer: fresh, requeue: interval},
	}, {
		name: "a scraped round of no tools has nothing to hold later",
		prev: holding,
		obs:  holdObservation{scraped: true, revision: "r3"},
		now:  t0, interval: interval,
		next: holdState{heldRevision: "r3"},
		out:  holdOutcome{requeue: interval},
	}, {
		name: "the first round of an outage starts it and holds the last good tools",
		prev: holdState{held: old, heldRevision: "r1"},
		obs:  down, now: t0, interval: interval,
		next: holding,
		out:  holdOutcome{offer: old, held: true, requeue: interval},
	}, {
		name: "within the last interval of the grace period, the next look is at its end",
		prev: holding,
		obs:  down, now: t0.Add(25 * time.Second), interval: interval,
		next: holding,
		out:  holdOutcome{offer: old, held: true, requeue: 5 * time.Second},
	}, {
		name: "just before the deadline the tools are still held",
		prev: holding,
		obs:  down, now: t0.Add(staleIntervals*interval - time.Nanosecond), interval: interval,
		next: holding,
		out:  holdOutcome{offer: old, held: true, requeue: time.Nanosecond},
	}, {
		name: "at the deadline the held tools are dropped",
		prev: holding,
		obs:  down, now: t0.Add(staleIntervals * interval), interval: interval,
		next: holdState{outageSince: t0, dropped: true},
		out:  holdOutcome{requeue: interval},
	}, {
		name: "after a drop the outage goes on with nothing to offer",
		prev: holdState{outageSince: t0, dropped: true},
		obs:  down, now: t0.Add(time.Hour), interval: interval,
		next: holdState{outageSince: t0, dropped: true},
		out:  holdOutcome{requeue: interval},
	}, {
		name: "an outage with nothing ever scraped holds nothing and drops nothing",
		obs:  down, now: t0, interval: interval,
		next: holdState{outageSince: t0},
		out:  holdOutcome{requeue: interval},
	}, {
		name: "an outage recalled after a restart keeps the start the Stale condition recorded",
		prev: holdState{held: old, heldRevision: "r1", outageSince: t0.Add(-25 * time.Second)},
		obs:  down, now: t0, interval: interval,
		next: holdState{held: old, heldRevision: "r1", outageSince: t0.Add(-25 * time.Second)},
		out:  holdOutcome{offer: old, held: true, requeue: 5 * time.Second},
	}, {
		name: "an interval lowered during an outage brings the deadline forward",
		prev: holding,
		obs:  down, now: t0.Add(16 * time.Second), interval: 5 * time.Second,
		next: holdState{outageSince: t0, dropped: true},
		out:  holdOutcome{requeue: 5 * time.Second},
	}, {
		name: "an interval raised during an outage pushes the deadline back",
		prev: holding,
		obs:  down, now: t0.Add(40 * time.Second), interval: time.Minute,
		next: holding,
		out:  holdOutcome{offer: old, held: true, requeue: time.Minute},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			next, out := nextHold(tc.prev, tc.obs, tc.now, tc.interval)
			if !reflect.DeepEqual(next, tc.next) {
				t.Errorf("next state\n got %+v\nwant %+v", next, tc.next)
			}
			if !reflect.DeepEqual(out, tc.out) {
				t.Errorf("outcome\n got %+v\nwant %+v", out, tc.out)
			}
		})
	}
}

// TestNextHoldBoundsTheHold runs an outage of many rounds, each at its
// requeue or sooner (as jitter and events bring them), and checks the
// rule's promises: tools are held only while the outage is younger than
// staleIntervals intervals, never past that, a requeue never overshoots
// the deadline, and they are dropped on the first round at or after it.
func TestNextHoldBoundsTheHold(t *testing.T) {
	const interval = 10 * time.Second
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	tools := []spec.TableTool{{Name: "a"}}
	st, _ := nextHold(holdState{}, holdObservation{scraped: true, tools: tools, revision: "r"}, t0, interval)
	now := t0
	var start time.Time
	dropped := false
	for round := range 200 {
		var out holdOutcome
		st, out = nextHold(st, holdObservation{}, now, interval)
		if round == 0 {
			start = now
		}
		age := now.Sub(start)
		switch {
		case age < staleIntervals*interval:
			if !out.held || len(out.offer) != 1 {
				t.Fatalf("round %d, %s into the outage: not held", round, age)
			}
			if now.Add(out.requeue).After(start.Add(staleIntervals * interval)) {
				t.Fatalf("round %d: requeue %s overshoots the deadline", round, out.requeue)
			}
		default:
			if out.held || len(out.offer) != 0 || !st.dropped {
				t.Fatalf("round %d, %s into the outage: still held", round, age)
			}
			dropped = true
		}
		// The next round comes at the requeue, or sooner (jitter, events).
		now = now.Add(time.Duration(float64(out.requeue) * (0.5 + 0.5*float64(round%3)/2)))
	}
	if !dropped {
		t.Fatal("the outage never reached its deadline")
	}
}
