package gateway_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit"
)

// TestACircuitOpensAfterConsecutiveFailuresFailsFastAndClosesAfterAProbe:
// a ToolSet whose workload stops answering gets its circuit opened after
// BackendFailures transport failures in a row; its calls then fail at once
// with an error naming it, without a dial, while another ToolSet's calls go
// on; after the cool-down one call probes it (and opens it again while it
// is still down), and once it is back a probe closes it. A tool's own
// isError never counts. The state gauge follows, the gateway stays ready
// and lists the open circuit, and a ToolSet that leaves the table leaves
// the metric.
func TestACircuitOpensAfterConsecutiveFailuresFailsFastAndClosesAfterAProbe(t *testing.T) {
	failing := toolkit.MustNew("fail", "Fails as asked", func(context.Context, echoIn) (string, error) {
		return "", errors.New("failed as asked")
	})
	flaky := newWorkload(t, "flaky", "flaky-tools", "", echoTool("flaky"), failing)
	healthy := newWorkload(t, "fine", "fine-tools", "fine_", echoTool("fine"))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	_ = l.Close()

	r := new(routes).add(flaky, healthy)
	var dials atomic.Int64
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == flaky.host() {
			dials.Add(1)
		}
		return r.dial(ctx, network, addr)
	}
	reg := prometheus.NewRegistry()
	const cooldown = 300 * time.Millisecond
	g := gateway.New(&gateway.Options{DialContext: dial, BackendFailures: 3, BackendCooldown: cooldown, Registerer: reg, CallTimeout: 5 * time.Second})
	srv := httptest.NewServer(g)
	t.Cleanup(func() { g.Close(); srv.Close() })
	if err := g.SetTable(table(flaky.tableTools(), healthy.tableTools())); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, srv.URL+"/mcp", eras[0], nil, nil)
	call := func(name string) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: name, Arguments: map[string]any{"text": "x"}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}
	state := func() float64 {
		t.Helper()
		return gaugeOf(t, reg, "toolplane_gateway_backend_circuit_state", "flaky/flaky-tools")
	}

	for range 5 {
		if res := call("fail"); !res.IsError || text(res) != "failed as asked" {
			t.Fatalf("the tool's own error: %s", text(res))
		}
	}
	if s := state(); s != 0 || len(g.OpenCircuits()) != 0 {
		t.Fatalf("a tool's own isError moved the circuit: state %v, open %v", s, g.OpenCircuits())
	}

	r.set(flaky.host(), dead)
	flaky.srv.CloseClientConnections() // no idle connection to reuse
	for i := range 3 {
		if res := call("echo"); !res.IsError || !strings.Contains(text(res), "unreachable") {
			t.Fatalf("failure %d: %s", i+1, text(res))
		}
	}
	if s := state(); s != 2 {
		t.Fatalf("after 3 failures the circuit's state is %v, want 2 (open)", s)
	}
	before := dials.Load()
	res := call("echo")
	if !res.IsError || !strings.Contains(text(res), "flaky/flaky-tools") || !strings.Contains(text(res), "fails its calls at once") {
		t.Fatalf("a call while the circuit is open: %s", text(res))
	}
	if dials.Load() != before {
		t.Error("a call while the circuit is open dialed the workload")
	}
	if res := call("fine_echo"); res.IsError {
		t.Fatalf("another ToolSet's call while one circuit is open: %s", text(res))
	}
	if open := g.OpenCircuits(); len(open) != 1 || open[0].ToolSet.String() != "flaky/flaky-tools" || !g.Ready() {
		t.Fatalf("open circuits %+v, ready %v", open, g.Ready())
	}

	// After the cool-down one call probes the workload, still down: the
	// circuit opens again.
	eventually(t, func() bool { call("echo"); return dials.Load() > before })
	if s, n := state(), toolSetCounter(t, reg, "toolplane_gateway_backend_circuit_opened_total", "flaky/flaky-tools"); s != 2 || n != 2 {
		t.Fatalf("after a failed probe: state %v, opened %v times; want 2 and 2", s, n)
	}

	// Back: a probe closes it.
	r.add(flaky)
	eventually(t, func() bool { return !call("echo").IsError })
	if s := state(); s != 0 || len(g.OpenCircuits()) != 0 {
		t.Fatalf("after a good probe: state %v, open %v", s, g.OpenCircuits())
	}

	if err := g.SetTable(table(healthy.tableTools())); err != nil {
		t.Fatal(err)
	}
	if has(t, reg, "toolplane_gateway_backend_circuit_state", "flaky/flaky-tools") {
		t.Error("a ToolSet that left the table keeps its circuit's series")
	}
}

// eventually polls cond every few milliseconds, for at most 10 seconds.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("the condition did not hold within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func gaugeOf(t *testing.T, reg *prometheus.Registry, name, toolSet string) float64 {
	t.Helper()
	v, ok := metricOf(t, reg, name, toolSet)
	if !ok {
		t.Fatalf("no %s{toolset=%q}", name, toolSet)
	}
	return v
}

func toolSetCounter(t *testing.T, reg *prometheus.Registry, name, toolSet string) float64 {
	t.Helper()
	return gaugeOf(t, reg, name, toolSet)
}

func has(t *testing.T, reg *prometheus.Registry, name, toolSet string) bool {
	t.Helper()
	_, ok := metricOf(t, reg, name, toolSet)
	return ok
}

func metricOf(t *testing.T, reg *prometheus.Registry, name, toolSet string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "toolset" && l.GetValue() == toolSet {
					if g := m.GetGauge(); g != nil {
						return g.GetValue(), true
					}
					return m.GetCounter().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

// TestAServerThatRefusesCallsKeepsItsCircuitClosed: an MCP server that
// answers every request with 401 is reachable: its calls fail with the
// status it gave, never as unreachable, and never open its circuit.
func TestAServerThatRefusesCallsKeepsItsCircuitClosed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	r := new(routes)
	r.set("refusing.apps.svc.cluster.local:8080", srv.Listener.Addr().String())
	g, url := newGateway(t, r, gateway.Options{BackendFailures: 2, BackendCooldown: time.Hour})
	if err := g.SetTable(table(mcpTableTools("apps", "refusing", "/mcp", "refused"))); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, url+"/mcp", eras[0], nil, nil)
	for i := range 4 {
		res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "refused"})
		if err != nil {
			t.Fatal(err)
		}
		if !res.IsError || !strings.Contains(text(res), "answered HTTP 401") {
			t.Fatalf("call %d: %s", i+1, text(res))
		}
	}
	if open := g.OpenCircuits(); len(open) != 0 {
		t.Fatalf("a server that answers opened its circuit: %+v", open)
	}
}
