package controllers

import (
	"time"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// The outage hold: when no Pod of a ToolSet can be scraped, the tools of
// its last good round stay in the table, marked Stale, for staleIntervals
// intervals from the start of the outage, and are then dropped. A round in
// which some Pod is scraped ends the outage. nextHold is the whole rule, a
// pure function of what was held, what the round observed, the time and the
// interval; Reconcile gathers its inputs (recall reads the held tools back
// from the table after a restart) and acts on its outcome.

// holdState is what a ToolSet carries from round to round for the hold.
type holdState struct {
	// held are the tools of the last round in which some Pod was scraped,
	// held through an outage and marked Stale.
	held         []spec.TableTool
	heldRevision string
	// outageSince is when the ToolSet last had no scrapable Pod, zero while
	// it has one.
	outageSince time.Time
	// dropped is set when the grace period ended and the held tools went.
	dropped bool
}

// deadline is when the tools held through the current outage go.
func (h holdState) deadline(interval time.Duration) time.Time {
	return h.outageSince.Add(staleIntervals * interval)
}

// holdObservation is what one round saw of the ToolSet's Pods.
type holdObservation struct {
	// scraped is set when some Pod was scraped; tools and revision are
	// then what the round assembled.
	scraped  bool
	tools    []spec.TableTool
	revision string
}

// holdOutcome is what the round does.
type holdOutcome struct {
	// offer are the tools to offer: the observed ones, the held ones, or
	// none.
	offer []spec.TableTool
	// held is set when offer are tools held through an outage (Stale).
	held bool
	// requeue is how soon to look again: the interval, or sooner when held
	// tools are due to be dropped before it ends.
	requeue time.Duration
}

// nextHold applies the hold rule to one round observed at now, under the
// ToolSet's interval (after the ceilings) as of this round.
func nextHold(prev holdState, obs holdObservation, now time.Time, interval time.Duration) (holdState, holdOutcome) {
	if obs.scraped {
		return holdState{held: obs.tools, heldRevision: obs.revision},
			holdOutcome{offer: obs.tools, requeue: interval}
	}
	next := prev
	if next.outageSince.IsZero() {
		next.outageSince = now
	}
	out := holdOutcome{requeue: interval}
	if len(next.held) == 0 {
		return next, out
	}
	if deadline := next.deadline(interval); now.Before(deadline) {
		out.offer, out.held = next.held, true
		out.requeue = min(interval, deadline.Sub(now))
		return next, out
	}
	next.held, next.heldRevision, next.dropped = nil, "", true
	return next, out
}
