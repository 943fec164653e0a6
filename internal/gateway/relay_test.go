//nolint:staticcheck // MCP's logging and sampling are deprecated in 2026-07-28 and still served: relaying them is the point here.
package gateway_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit"
)

type stepsIn struct {
	Steps int `json:"steps,omitempty" default:"3"`
	// Size is the length of each progress message.
	Size int `json:"size,omitempty"`
}

// stepsTool reports its progress after every step and logs each, as
// build_report does.
func stepsTool() *toolkit.Tool {
	return toolkit.MustNew("steps", "Reports progress step by step", func(ctx context.Context, in stepsIn) (string, error) {
		for i := 1; i <= in.Steps; i++ {
			toolkit.Log(ctx, slog.LevelInfo, fmt.Sprintf("step %d", i))
			msg := fmt.Sprintf("step %d of %d", i, in.Steps)
			if in.Size > 0 {
				msg += strings.Repeat(".", in.Size)
			}
			toolkit.Progress(ctx, float64(i), float64(in.Steps), msg)
		}
		return "done", nil
	})
}

// heard is what a client heard during calls.
type heard struct {
	mu       sync.Mutex
	progress []*mcp.ProgressNotificationParams
	logs     []*mcp.LoggingMessageParams
}

func (h *heard) options(o *mcp.ClientOptions) *mcp.ClientOptions {
	if o == nil {
		o = &mcp.ClientOptions{}
	}
	o.ProgressNotificationHandler = func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		h.mu.Lock()
		h.progress = append(h.progress, r.Params)
		h.mu.Unlock()
	}
	o.LoggingMessageHandler = func(_ context.Context, r *mcp.LoggingMessageRequest) {
		h.mu.Lock()
		h.logs = append(h.logs, r.Params)
		h.mu.Unlock()
	}
	return o
}

// await waits, bounded, until the client heard at least progress and logs
// notifications: the SDK delivers them on a goroutine of its own, and they
// can come after the result.
func (h *heard) await(t *testing.T, progress, logs int) ([]*mcp.ProgressNotificationParams, []*mcp.LoggingMessageParams) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		h.mu.Lock()
		p, l := append([]*mcp.ProgressNotificationParams(nil), h.progress...), append([]*mcp.LoggingMessageParams(nil), h.logs...)
		h.mu.Unlock()
		if (len(p) >= progress && len(l) >= logs) || time.Now().After(deadline) {
			return p, l
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// settled waits until the counts stop growing for a while, for a test that
// checks that no more than some number arrive.
func (h *heard) settled(t *testing.T) ([]*mcp.ProgressNotificationParams, []*mcp.LoggingMessageParams) {
	t.Helper()
	last, stable := -1, 0
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && stable < 20; time.Sleep(10 * time.Millisecond) {
		h.mu.Lock()
		n := len(h.progress) + len(h.logs)
		h.mu.Unlock()
		if n == last {
			stable++
		} else {
			last, stable = n, 0
		}
	}
	return h.await(t, 0, 0)
}

// connectWith opens a client session with opts at endpoint in era.
func connectWith(t testing.TB, endpoint, era string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1.0.0"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: era})
	if err != nil {
		t.Fatalf("connecting at %s: %v", era, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callWithProgress calls name with a progress token, asking for logs at
// info: in _meta for 2026-07-28, with logging/setLevel for 2025.
func callWithProgress(t *testing.T, cs *mcp.ClientSession, era, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	params := &mcp.CallToolParams{Name: name, Arguments: args}
	params.SetProgressToken("client-token-7")
	if era >= "2026-07-28" {
		params.Meta[mcp.MetaKeyLogLevel] = "info"
	} else if err := cs.SetLoggingLevel(bounded(t), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(bounded(t), params)
	if err != nil {
		t.Fatalf("calling %s: %v", name, err)
	}
	return res
}

// mcpBackend serves s over Streamable HTTP on loopback, stateless or with
// sessions.
func mcpBackend(t testing.TB, s *mcp.Server, stateless bool) string {
	t.Helper()
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: stateless, DisableLocalhostProtection: true}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// goStepsServer is an MCP server of the Go SDK whose tool "go_steps" sends
// n progress notifications and n log messages.
func goStepsServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "go-steps"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "go_steps"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct {
		Steps int `json:"steps"`
		Size  int `json:"size,omitempty"`
	}) (*mcp.CallToolResult, any, error) {
		token := req.Params.GetProgressToken()
		for i := 1; i <= in.Steps; i++ {
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "go_steps", Data: fmt.Sprintf("step %d", i)})
			if token != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token,
					Progress: float64(i), Total: float64(in.Steps), Message: fmt.Sprintf("step %d of %d", i, in.Steps) + strings.Repeat(".", in.Size)})
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	return s
}

// TestProgressAndLogsAreRelayed: a toolkit workload's and MCP servers'
// progress and log messages reach a Go SDK client through the gateway as
// they were sent, in order and under the client's own progress token, in
// both eras, and from MCP servers of both kinds (stateless, and with
// sessions).
func TestProgressAndLogsAreRelayed(t *testing.T) {
	wl := newWorkload(t, "crm", "crm-tools", "", stepsTool())
	r := new(routes).add(wl)
	r.set("gosteps.apps.svc.cluster.local:8080", mcpBackend(t, goStepsServer(), true))
	r.set("gostate.apps.svc.cluster.local:8080", mcpBackend(t, goStepsServer(), false))
	tbl := table(wl.tableTools(), mcpTableTools("apps", "gosteps", "/mcp", "go_steps"))
	state := mcpTableTools("apps", "gostate", "/mcp", "go_steps")
	state[0].Name = "go_steps_sessions"
	tbl = table(tbl.Tools, state)
	g, url := newGateway(t, r, gateway.Options{Sessions: true})
	if err := g.SetTable(tbl); err != nil {
		t.Fatal(err)
	}
	// A 2025 client of a stateless gateway gets progress too (on the
	// call's stream), and no logs: it has nowhere to keep a level.
	gs, stateless := newGateway(t, r, gateway.Options{})
	if err := gs.SetTable(tbl); err != nil {
		t.Fatal(err)
	}
	t.Run("2025-11-25/stateless", func(t *testing.T) {
		h := &heard{}
		cs := connectWith(t, stateless+"/mcp", "2025-11-25", h.options(nil))
		params := &mcp.CallToolParams{Name: "steps", Arguments: map[string]any{"steps": 3}}
		params.SetProgressToken(7)
		if res, err := cs.CallTool(bounded(t), params); err != nil || res.IsError {
			t.Fatalf("%v %+v", err, res)
		}
		progress, _ := h.await(t, 3, 0)
		if len(progress) != 3 || progress[2].ProgressToken != float64(7) {
			t.Errorf("progress %+v", progress)
		}
	})
	for _, era := range eras {
		for _, tool := range []string{"steps", "go_steps", "go_steps_sessions"} {
			t.Run(era+"/"+tool, func(t *testing.T) {
				h := &heard{}
				cs := connectWith(t, url+"/mcp", era, h.options(nil))
				res := callWithProgress(t, cs, era, tool, map[string]any{"steps": 5})
				if res.IsError || text(res) != "done" {
					t.Fatalf("result %+v", res)
				}
				progress, logs := h.await(t, 5, 5)
				if len(progress) != 5 || len(logs) != 5 {
					t.Fatalf("heard %d progress and %d logs, want 5 of each", len(progress), len(logs))
				}
				for i, p := range progress {
					if p.ProgressToken != "client-token-7" || p.Progress != float64(i+1) || p.Total != 5 || p.Message != fmt.Sprintf("step %d of 5", i+1) {
						t.Errorf("progress %d: %+v", i, p)
					}
				}
				for i, l := range logs {
					if l.Level != "info" || l.Data != fmt.Sprintf("step %d", i+1) {
						t.Errorf("log %d: %+v", i, l)
					}
				}
			})
		}
	}
}

// floodServer is an MCP server whose tool "flood" sends n progress
// notifications, each with a message of size bytes, as fast as it can, and
// notes when its call ended.
func floodServer(ended chan<- error) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "flood"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "flood"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct {
		N    int `json:"n"`
		Size int `json:"size"`
	}) (*mcp.CallToolResult, any, error) {
		token := req.Params.GetProgressToken()
		msg := strings.Repeat("x", in.Size)
		var err error
		for i := 1; i <= in.N && err == nil; i++ {
			err = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(i), Message: msg})
		}
		if ended != nil {
			ended <- err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "flooded"}}}, nil, nil
	})
	return s
}

// TestRelayIsBounded: what a backend sends during a call is bounded in
// number and in size, and a client that stops reading does not hold the
// call or the gateway: each bound drops what is past it, and the call ends.
func TestRelayIsBounded(t *testing.T) {
	ended := make(chan error, 4)
	r := new(routes)
	r.set("flood.apps.svc.cluster.local:8080", mcpBackend(t, floodServer(ended), true))
	tbl := table(mcpTableTools("apps", "flood", "/mcp", "flood"))
	reg := prometheus.NewRegistry()
	g, url := newGateway(t, r, gateway.Options{MaxNotificationsPerCall: 50, MaxNotificationBytes: 1024, Registerer: reg,
		MaxResultBytes: 64 << 20, MaxResultMemory: 64 << 20, WriteTimeout: 500 * time.Millisecond})
	if err := g.SetTable(tbl); err != nil {
		t.Fatal(err)
	}
	backendEnded := func() {
		t.Helper()
		if err := <-ended; err != nil {
			t.Errorf("the backend's call: %v", err)
		}
	}
	dropped := func(outcome string) float64 {
		return counterValue(t, reg, "toolplane_gateway_notifications_total", map[string]string{"kind": "progress", "outcome": outcome})
	}

	t.Run("a backend that floods", func(t *testing.T) {
		h := &heard{}
		cs := connectWith(t, url+"/mcp", eras[0], h.options(nil))
		res := callWithProgress(t, cs, eras[0], "flood", map[string]any{"n": 5000, "size": 10})
		if res.IsError || text(res) != "flooded" {
			t.Fatalf("result %+v", res)
		}
		backendEnded()
		progress, _ := h.settled(t)
		if len(progress) != 50 {
			t.Errorf("the client heard %d progress notifications, want the bound of 50", len(progress))
		}
		if n := dropped("dropped_count"); n != 5000-50 {
			t.Errorf("dropped_count = %v, want %d", n, 5000-50)
		}
	})

	t.Run("a huge notification", func(t *testing.T) {
		h := &heard{}
		cs := connectWith(t, url+"/mcp", eras[0], h.options(nil))
		res := callWithProgress(t, cs, eras[0], "flood", map[string]any{"n": 3, "size": 1025})
		if res.IsError || text(res) != "flooded" {
			t.Fatalf("result %+v", res)
		}
		backendEnded()
		if progress, _ := h.settled(t); len(progress) != 0 {
			t.Errorf("the client heard %d notifications over the size bound", len(progress))
		}
		if n := dropped("dropped_size"); n != 3 {
			t.Errorf("dropped_size = %v, want 3", n)
		}
		res = callWithProgress(t, cs, eras[0], "flood", map[string]any{"n": 3, "size": 1024})
		backendEnded()
		if progress, _ := h.await(t, 3, 0); len(progress) != 3 || res.IsError {
			t.Errorf("the client heard %d notifications at the size bound, want 3", len(progress))
		}
	})

	t.Run("a client that stops reading", func(t *testing.T) {
		// A raw client that sends the call and never reads its stream: the
		// gateway's writes of 1 KiB notifications fill the connection's
		// buffers, the next one fails at the write timeout, the connection
		// is closed and the call with it: the backend's call ends (its
		// sends fail once the gateway has cancelled it).
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"flood","arguments":{"n":40000,"size":1000},` +
			`"_meta":{"progressToken":"p","io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
			`"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
		g2, url2 := newGateway(t, r, gateway.Options{MaxNotificationsPerCall: 1_000_000, MaxNotificationBytes: 4096, Registerer: prometheus.NewRegistry(),
			MaxResultBytes: 256 << 20, MaxResultMemory: 256 << 20, WriteTimeout: 300 * time.Millisecond})
		if err := g2.SetTable(tbl); err != nil {
			t.Fatal(err)
		}
		conn, err := net.Dial("tcp", strings.TrimPrefix(url2, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"+
			"Mcp-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: flood\r\nContent-Length: %d\r\n\r\n%s",
			strings.TrimPrefix(url2, "http://"), len(body), body)
		select {
		case err := <-ended:
			t.Logf("the backend's call ended: %v", err)
		case <-time.After(60 * time.Second):
			t.Fatal("the backend's call did not end while the client did not read")
		}
		// The gateway is free for the next call.
		cs := connectWith(t, url2+"/mcp", eras[0], nil)
		if res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "flood", Arguments: map[string]any{"n": 1, "size": 1}}); err != nil || res.IsError {
			t.Fatalf("the next call: %v %s", err, text(res))
		}
		backendEnded()
	})
}

// counterValue is the value of the counter of name with labels in reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue metric
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
