package gateway

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// The states of a ToolSet's circuit, as toolplane_gateway_backend_circuit_state
// reports them.
const (
	circuitClosed   = 0 // calls go to the workload
	circuitHalfOpen = 1 // the cool-down is over: one call probes the workload
	circuitOpen     = 2 // calls fail at once until the cool-down is over
)

// outcomeCircuitOpen is a call failed at once because its ToolSet's circuit
// is open; outcomeCredentials one refused because its ToolSet's
// credentials could not be read, or could not be sent to its endpoint.
const (
	outcomeCircuitOpen = "circuit_open"
	outcomeCredentials = "credentials"
)

// circuits keep the health of each ToolSet's workload, as seen by the calls
// to it: threshold consecutive transport failures open its circuit for
// cooldown, and then the first call probes it. Only ToolSets of the table
// that have been called have one, so the metric's labels are bounded by
// the table.
type circuits struct {
	threshold int // <= 0: never open
	cooldown  time.Duration
	now       func() time.Time
	logger    *slog.Logger

	state  *prometheus.GaugeVec
	opened *prometheus.CounterVec

	mu sync.Mutex
	m  map[spec.ObjectReference]*circuit
}

type circuit struct {
	state    int
	failures int
	until    time.Time // the end of the cool-down, when open
	probing  bool      // a half-open probe is in flight
}

func newCircuits(o *Options, reg prometheus.Registerer) *circuits {
	c := &circuits{
		threshold: o.BackendFailures,
		cooldown:  o.BackendCooldown,
		now:       time.Now,
		logger:    o.Logger,
		m:         map[spec.ObjectReference]*circuit{},
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "toolplane_gateway_backend_circuit_state",
			Help: "The circuit of each ToolSet of the table that has been called: 0 closed (calls go through), 1 half-open (one call probes the workload), 2 open (calls fail at once, --backend-cooldown).",
		}, []string{"toolset"}),
		opened: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolplane_gateway_backend_circuit_opened_total",
			Help: "Times a ToolSet's circuit opened after --backend-failures consecutive transport failures of its workload, or a failed probe.",
		}, []string{"toolset"}),
	}
	if reg != nil {
		reg.MustRegister(c.state, c.opened)
	}
	return c
}

// admit says whether a call to toolSet may go now. probe is true for the one
// call that probes a half-open circuit; it must be followed by record. When
// the call may not go, why says so, for the caller.
func (cs *circuits) admit(toolSet spec.ObjectReference) (ok, probe bool, why string) {
	if cs.threshold <= 0 {
		return true, false, ""
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c := cs.m[toolSet]
	if c == nil {
		c = &circuit{}
		cs.m[toolSet] = c
		cs.state.WithLabelValues(toolSet.String()).Set(circuitClosed)
	}
	switch c.state {
	case circuitClosed:
		return true, false, ""
	case circuitOpen:
		if cs.now().Before(c.until) {
			return false, false, cs.openDetail(c)
		}
		cs.setLocked(toolSet, c, circuitHalfOpen)
	}
	if c.probing {
		return false, false, fmt.Sprintf("its ToolSet's workload failed %d calls in a row (unreachable or timed out), and a call probing it is in flight; retry shortly", c.failures)
	}
	c.probing = true
	return true, true, ""
}

func (cs *circuits) openDetail(c *circuit) string {
	return fmt.Sprintf("its ToolSet's workload failed %d calls in a row (unreachable or timed out): the gateway fails its calls at once for %s, then tries it again (retry in %s)",
		c.failures, cs.cooldown, max(c.until.Sub(cs.now()), 0).Round(time.Millisecond))
}

// Results of a call, as the circuit counts them.
const (
	callAnswered = iota // the workload answered, isError or not
	callFailed          // no connection, or no answer within the call timeout
	callNeutral         // says nothing of the workload: the caller gave up, the gateway was busy
)

// record counts the result of a call that admit let go.
func (cs *circuits) record(toolSet spec.ObjectReference, probe bool, result int) {
	if cs.threshold <= 0 {
		return
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c := cs.m[toolSet]
	if c == nil {
		return // the ToolSet left the table meanwhile
	}
	if probe {
		c.probing = false
	}
	switch result {
	case callAnswered:
		if c.state != circuitClosed {
			cs.logger.Info("Closed the circuit of a ToolSet: its workload answered", "toolSet", toolSet.String())
		}
		c.failures = 0
		cs.setLocked(toolSet, c, circuitClosed)
	case callFailed:
		c.failures++
		if (c.state == circuitClosed && c.failures >= cs.threshold) || (c.state == circuitHalfOpen && probe) {
			c.until = cs.now().Add(cs.cooldown)
			cs.setLocked(toolSet, c, circuitOpen)
			cs.opened.WithLabelValues(toolSet.String()).Inc()
			cs.logger.Warn("Opened the circuit of a ToolSet: its calls fail at once for the cool-down", "toolSet", toolSet.String(),
				"failures", c.failures, "cooldown", cs.cooldown)
		}
	}
}

func (cs *circuits) setLocked(toolSet spec.ObjectReference, c *circuit, state int) {
	if c.state != state {
		c.state = state
		cs.state.WithLabelValues(toolSet.String()).Set(float64(state))
	}
}

// open returns the ToolSets whose circuit is not closed, sorted, with their
// state.
func (cs *circuits) open() []CircuitStatus {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	var out []CircuitStatus
	for ref, c := range cs.m {
		if c.state != circuitClosed {
			st := CircuitStatus{ToolSet: ref, State: "open", Failures: c.failures}
			if c.state == circuitHalfOpen || !cs.now().Before(c.until) {
				st.State = "half-open"
			}
			out = append(out, st)
		}
	}
	slices.SortFunc(out, func(a, b CircuitStatus) int {
		return cmp.Or(cmp.Compare(a.ToolSet.Namespace, b.ToolSet.Namespace), cmp.Compare(a.ToolSet.Name, b.ToolSet.Name))
	})
	return out
}

// retain forgets the circuits, and their series, of ToolSets not in keep.
func (cs *circuits) retain(keep map[spec.ObjectReference][]int) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for ref := range cs.m {
		if _, ok := keep[ref]; !ok {
			delete(cs.m, ref)
			cs.state.DeleteLabelValues(ref.String())
			cs.opened.DeleteLabelValues(ref.String())
		}
	}
}

// CircuitStatus is a ToolSet whose circuit is not closed.
type CircuitStatus struct {
	ToolSet spec.ObjectReference
	// State is "open" (calls fail at once) or "half-open" (the next call
	// probes the workload).
	State string
	// Failures is the number of consecutive transport failures seen.
	Failures int
}

// OpenCircuits returns the ToolSets whose circuit is open or half-open,
// sorted by namespace and name: their calls fail at once. A readiness
// probe shows them as detail; they do not make the gateway unready, since
// one bad workload must not take every other tool away.
func (g *Gateway) OpenCircuits() []CircuitStatus { return g.circuits.open() }

// callResult classifies a call's outcome for its ToolSet's circuit. parent
// is the caller's context, without the call timeout: a call whose caller
// gave up (cancelled, or its own deadline passed) tells nothing of the
// workload.
func callResult(parent context.Context, outcome string) int {
	switch outcome {
	case outcomeOK, outcomeToolError, outcomeBadReply:
		return callAnswered
	case outcomeUnreachable, outcomeTimeout:
		if parent.Err() != nil {
			return callNeutral
		}
		return callFailed
	}
	return callNeutral
}
