package gateway

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// TestCircuitLetsOneProbeThroughAndIgnoresCallersThatGaveUp: a half-open
// circuit lets exactly one call through until it is recorded; a probe that
// says nothing (the caller gave up, the gateway was busy) lets the next call
// probe; failures of calls whose caller gave up do not count.
func TestCircuitLetsOneProbeThroughAndIgnoresCallersThatGaveUp(t *testing.T) {
	now := time.Unix(1000, 0)
	o := Options{BackendFailures: 2, BackendCooldown: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	cs := newCircuits(&o, nil)
	cs.now = func() time.Time { return now }
	ref := spec.ObjectReference{Namespace: "ns", Name: "ts"}
	pass := func() (bool, bool) {
		t.Helper()
		ok, probe, _ := cs.admit(ref)
		return ok, probe
	}

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for range 5 {
		if ok, _ := pass(); !ok {
			t.Fatal("a closed circuit refused a call")
		}
		cs.record(ref, false, callResult(cancelled, outcomeTimeout))
	}
	if len(cs.open()) != 0 {
		t.Fatal("calls whose caller gave up opened the circuit")
	}

	for range 2 {
		pass()
		cs.record(ref, false, callResult(context.Background(), outcomeUnreachable))
	}
	if ok, _ := pass(); ok {
		t.Fatal("an open circuit let a call through")
	}
	now = now.Add(time.Second)
	if ok, probe := pass(); !ok || !probe {
		t.Fatalf("after the cool-down: ok %v, probe %v; want a probe", ok, probe)
	}
	if ok, _ := pass(); ok {
		t.Fatal("a second call went through while the probe is in flight")
	}
	cs.record(ref, true, callNeutral)
	if ok, probe := pass(); !ok || !probe {
		t.Fatal("after a probe that said nothing, the next call does not probe")
	}
	cs.record(ref, true, callResult(context.Background(), outcomeToolError))
	if st := cs.open(); len(st) != 0 {
		t.Fatalf("a probe that got an answer left %+v", st)
	}
	if ok, probe := pass(); !ok || probe {
		t.Fatal("a closed circuit after a good probe")
	}
}
