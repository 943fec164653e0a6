package gateway

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// callOutcomes are the outcomes of toolplane_gateway_calls_total whose
// counts a tool keeps in its toolCalls, in that order.
var callOutcomes = [...]string{
	outcomeOK, outcomeToolError, outcomeUnreachable, outcomeTimeout, outcomeBusy, outcomeBadReply,
	outcomeUnknown, outcomeDenied, outcomeAuthError, outcomeLimited, outcomeCircuitOpen, outcomeCredentials,
	outcomeInputRequired,
}

// toolCalls are one tool's counts of calls, by outcome (callOutcomes).
// It holds no pointer, so the garbage collector never scans it.
type toolCalls [len(callOutcomes)]atomic.Uint64

// outcomeIndex is outcome's place in callOutcomes, or -1.
func outcomeIndex(outcome string) int {
	for i, o := range callOutcomes {
		if o == outcome {
			return i
		}
	}
	return -1
}

// callCounter is toolplane_gateway_calls_total: a collector that keeps
// each tool's counts in one toolCalls, and makes the series as it is
// scraped, for the counts that are not zero.
//
// A CounterVec kept a child per tool and outcome: eleven objects (its
// label pairs, their strings, its description, its place in the vector's
// map), about 510 bytes, which every garbage collection marked
// (BenchmarkCallCounterMemory). A
// replica that had called each of 10,000 tools held 110,000 of them, more
// than half of its live objects; and a caller that names every tool of a
// 25,000-tool table under each outcome it can bring about (denied,
// limited, busy…) would have made 275,000. A toolCalls is one object of
// 104 bytes per tool, which the garbage collector marks but need not
// scan, and only the tools of the table served are kept (setTable).
type callCounter struct {
	desc *prometheus.Desc

	mu sync.Mutex
	// byName are the counts of the tools of the table served, and of
	// the unknown tool "": replaced whole by setTable, read by Collect.
	byName atomic.Pointer[map[string]*toolCalls]
	// other counts outcomes not in callOutcomes, by tool and outcome;
	// the gateway has none today (input_required is in callOutcomes).
	other map[[2]string]*atomic.Uint64
}

func newCallCounter() *callCounter {
	c := &callCounter{
		desc: prometheus.NewDesc("toolplane_gateway_calls_total",
			"tools/call requests by published tool name and outcome (ok, tool_error, timeout, unreachable, busy, bad_reply, unknown, denied, auth_error, limited, circuit_open, credentials, input_required). Unknown names are counted under tool=\"\". A tool that leaves the table leaves the metric.",
			[]string{"tool", "outcome"}, nil),
		other: map[[2]string]*atomic.Uint64{},
	}
	m := map[string]*toolCalls{"": new(toolCalls)}
	c.byName.Store(&m)
	return c
}

// setTable keeps the counts of names, the tools of a new table, and of
// the unknown tool, carrying over those a tool had, and returns them in
// names' order. Tools that left the table leave the metric.
func (c *callCounter) setTable(names []string) []*toolCalls {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := *c.byName.Load()
	m := make(map[string]*toolCalls, len(names)+1)
	m[""] = old[""]
	counts := make([]*toolCalls, len(names))
	for i, n := range names {
		// Each tool's counts are an object of their own: counts carried
		// over must not keep alive an array of tools long gone.
		tc := old[n]
		if tc == nil {
			tc = new(toolCalls)
		}
		m[n], counts[i] = tc, tc
	}
	c.byName.Store(&m)
	for k := range c.other {
		if _, ok := m[k[0]]; !ok {
			delete(c.other, k)
		}
	}
	return counts
}

// inc counts a call of the tool whose counts are tc (nil for a tool the
// table does not hold), named name, with outcome.
func (c *callCounter) inc(tc *toolCalls, name, outcome string) {
	i := outcomeIndex(outcome)
	if tc == nil && name == "" {
		tc = (*c.byName.Load())[""]
	}
	if tc != nil && i >= 0 {
		tc[i].Add(1)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := [2]string{name, outcome}
	n := c.other[k]
	if n == nil {
		n = new(atomic.Uint64)
		c.other[k] = n
	}
	n.Add(1)
}

// Describe implements prometheus.Collector.
func (c *callCounter) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector: a series for each tool and
// outcome counted at least once.
func (c *callCounter) Collect(ch chan<- prometheus.Metric) {
	for name, tc := range *c.byName.Load() {
		for i := range tc {
			if n := tc[i].Load(); n > 0 {
				ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(n), name, callOutcomes[i])
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, n := range c.other {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(n.Load()), k[0], k[1])
	}
}
