package gateway

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/server"
	"github.com/toolplane/toolplane/toolkit/spec"
)

type rtEchoIn struct {
	Text string `json:"text"`
}

// rtServe serves an echo workload on loopback as
// echo-tools.apps.svc.cluster.local:8080, a gateway in front of it, and
// the gateway's registry on /metrics; it returns the gateway, its MCP
// endpoint and the metrics URL.
func rtServe(t *testing.T) (*Gateway, string, string) {
	t.Helper()
	reg := &toolkit.Registry{}
	if err := reg.Add(toolkit.MustNew("echo", "Echoes", func(_ context.Context, in rtEchoIn) (string, error) { return in.Text, nil })); err != nil {
		t.Fatal(err)
	}
	h := server.New(reg, &server.Options{Name: "echo-tools", AllowAnyHostOnLoopback: true})
	wl := httptest.NewServer(h)
	t.Cleanup(func() { h.Close(); wl.Close() })
	pr := prometheus.NewRegistry()
	g := New(&Options{Registerer: pr, Logger: slog.New(slog.DiscardHandler),
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, wl.Listener.Addr().String())
		}})
	gs := httptest.NewServer(g)
	ms := httptest.NewServer(promhttp.HandlerFor(pr, promhttp.HandlerOpts{}))
	t.Cleanup(func() { g.Close(); gs.Close(); ms.Close() })
	return g, gs.URL + "/mcp", ms.URL
}

// rtTable is a table of tools named names, each the workload's echo.
func rtTable(names ...string) *spec.Table {
	t := &spec.Table{SchemaVersion: spec.SchemaVersion, Tools: []spec.TableTool{}}
	base := "http://echo-tools.apps.svc.cluster.local:8080"
	for _, n := range names {
		t.Tools = append(t.Tools, spec.TableTool{Name: n, SourceName: "echo",
			InputSchema: []byte(`{"type":"object","properties":{"text":{"type":"string"}}}`),
			ToolSet:     spec.ObjectReference{Namespace: "apps", Name: "echo-tools"},
			Endpoints:   &spec.Endpoints{Invoke: base + spec.InvokePrefix + "echo", MCP: base + spec.MCPPath}})
	}
	spec.SortTableTools(t.Tools)
	t.Revision = spec.TableRevision(t.Tools)
	return t
}

// rtScrape is the value of toolplane_gateway_calls_total{tool,outcome="ok"}
// in a scrape of url, by tool.
func rtScrape(t *testing.T, url string) map[string]string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s: %s", resp.Status, b)
	}
	out := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, `toolplane_gateway_calls_total{outcome="ok",tool="`); ok {
			name, val, _ := strings.Cut(rest, `"} `)
			out[name] = val
		}
	}
	return out
}

// Gateway is "safe for concurrent use": two SetTable calls at once must
// not leave the table of one served with the counts of the other in the
// metric. setTable (under callCounter.mu) and snap.Swap were two steps,
// and the one that set its counts first could swap last; its tools' calls
// then counted in toolCalls that no scrape read, until the next table.
// Gateway.setMu makes the two one.
//
// The schedule is forced, not hoped for: the test holds callCounter.mu
// while the two SetTable calls queue on it, so that the mutex goes into
// starvation mode and hands over from one setTable to the next, with one
// P: the first yields between its setTable and its Swap. (An unforced
// loop of concurrent SetTable calls with tiny tables hit the same state in
// 1 of 26,050 rounds here.)
func TestRedTeamConcurrentSetTablesServeCountsNoScrapeReads(t *testing.T) {
	g, endpoint, metricsURL := rtServe(t)
	withX, withoutX := rtTable("x_echo", "y_echo"), rtTable("y_echo")
	if err := g.SetTable(withoutX); err != nil {
		t.Fatal(err)
	}

	func() {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
		c := g.metrics.calls
		c.mu.Lock()
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); _ = g.SetTable(withX) }()
		time.Sleep(5 * time.Millisecond) // withX's SetTable waits on c.mu
		go func() { defer wg.Done(); _ = g.SetTable(withoutX) }()
		time.Sleep(5 * time.Millisecond) // and withoutX's behind it
		// Wake the first waiter and take the mutex back before it runs:
		// having waited over 1ms, it puts the mutex in starvation mode.
		c.mu.Unlock()
		c.mu.Lock()
		time.Sleep(5 * time.Millisecond)
		c.mu.Unlock()
		wg.Wait()
	}()

	served := g.snapshot()
	t.Logf("the served table has %d tools", len(served.table.Tools))
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "rt", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: modernProtocol})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	before := rtScrape(t, metricsURL)
	for _, tt := range served.table.Tools {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tt.Name, Arguments: map[string]any{"text": "hi"}})
		if err != nil || res.IsError {
			t.Fatalf("calling %s: %v %v", tt.Name, err, res)
		}
	}
	after := rtScrape(t, metricsURL)
	for _, tt := range served.table.Tools {
		if after[tt.Name] == before[tt.Name] {
			t.Errorf("a call of %s, a tool of the table served, did not count: %q before, %q after (scrape %v)", tt.Name, before[tt.Name], after[tt.Name], after)
		}
	}
}
