package gateway_test

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolplane/toolplane/internal/gateway"
)

// metaRecorder is an MCP server whose tool "meta_seen" records the _meta
// and the header of each call it gets.
type metaRecorder struct {
	mu     sync.Mutex
	meta   []mcp.Meta
	header []http.Header
}

func (m *metaRecorder) server() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "meta-seen"}, nil)
	s.AddTool(&mcp.Tool{Name: "meta_seen", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.meta = append(m.meta, req.Params.Meta)
		var h http.Header
		if req.Extra != nil {
			h = req.Extra.Header.Clone()
		}
		m.header = append(m.header, h)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "seen"}}}, nil
	})
	return s
}

func (m *metaRecorder) last(t *testing.T) (mcp.Meta, http.Header) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.meta) == 0 {
		t.Fatal("the backend got no call")
	}
	return m.meta[len(m.meta)-1], m.header[len(m.header)-1]
}

// TestTraceContextInTheBackendsMeta: a call to an MCP server carries the
// gateway's own span (its call span, the child of the client's trace) in
// _meta.traceparent as well as in the traceparent header, with the
// client's tracestate and baggage, for backends of either era; the
// client's other _meta keys (a vendor's, the client's own progress token
// and protocol fields) do not pass on: _meta is addressed to the server it
// is sent to, here the gateway, and what a backend needs of it the gateway
// sends of its own.
func TestTraceContextInTheBackendsMeta(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	backends := map[string]*metaRecorder{"stateless": {}, "sessions": {}}
	r := new(routes)
	r.set("stateless.apps.svc.cluster.local:8080", mcpBackend(t, backends["stateless"].server(), true))
	r.set("sessions.apps.svc.cluster.local:8080", mcpBackend(t, backends["sessions"].server(), false))
	g, url := newGateway(t, r, gateway.Options{TracerProvider: tp})
	tbl := table(mcpTableTools("apps", "stateless", "/mcp", "meta_seen"))
	tbl.Tools[0].Name = "stateless_meta_seen"
	more := mcpTableTools("apps", "sessions", "/mcp", "meta_seen")
	more[0].Name = "sessions_meta_seen"
	tbl.Tools = append(tbl.Tools, more...)
	if err := g.SetTable(tbl); err != nil {
		t.Fatal(err)
	}

	for _, era := range eras {
		for backend, seen := range backends {
			t.Run(era+"/"+backend, func(t *testing.T) {
				ctx, root := tp.Tracer("agent").Start(context.Background(), "agent turn")
				defer root.End()
				ts, err := trace.ParseTraceState("vendor=opaque")
				if err != nil {
					t.Fatal(err)
				}
				ctx = trace.ContextWithSpanContext(ctx, root.SpanContext().WithTraceState(ts))
				carrier := propagation.MapCarrier{}
				propagation.TraceContext{}.Inject(ctx, carrier)
				params := &mcp.CallToolParams{Name: backend + "_meta_seen", Arguments: map[string]any{}, Meta: mcp.Meta{
					"traceparent": carrier["traceparent"], "tracestate": carrier["tracestate"], "baggage": "tenant=blue",
					"com.example/secret": "not for the backend",
				}}
				params.SetProgressToken("client-token")
				cs := connect(t, url+"/mcp", era, nil, nil)
				res, err := cs.CallTool(bounded(t), params)
				if err != nil || res.IsError {
					t.Fatalf("%v %+v", err, res)
				}
				meta, header := seen.last(t)

				// The gateway's call span, in the client's trace.
				var call sdktrace.ReadOnlySpan
				for deadline := time.Now().Add(10 * time.Second); call == nil && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
					for _, s := range rec.Ended() {
						if s.Name() == "call "+params.Name && s.SpanContext().TraceID() == root.SpanContext().TraceID() {
							call = s
						}
					}
				}
				if call == nil {
					t.Fatal("no call span in the client's trace")
				}
				want := propagation.MapCarrier{}
				propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), call.SpanContext()), want)
				if meta["traceparent"] != want["traceparent"] {
					t.Errorf("_meta.traceparent %v, want the gateway's call span %s", meta["traceparent"], want["traceparent"])
				}
				if got := header.Get("Traceparent"); got != want["traceparent"] {
					t.Errorf("traceparent header %q, want %s", got, want["traceparent"])
				}
				if meta["tracestate"] != "vendor=opaque" || header.Get("Tracestate") != "vendor=opaque" {
					t.Errorf("tracestate: _meta %v, header %q", meta["tracestate"], header.Get("Tracestate"))
				}
				if meta["baggage"] != "tenant=blue" {
					t.Errorf("_meta.baggage %v", meta["baggage"])
				}
				if _, ok := meta["com.example/secret"]; ok {
					t.Errorf("a client's own _meta key reached the backend: %v", meta)
				}
				if tok := meta["progressToken"]; tok != nil && tok == "client-token" {
					t.Errorf("the client's progress token reached the backend: %v", meta)
				}
			})
		}
	}
}

// TestListCacheFieldsPerViewAndGrant: the 2026-07-28 cache fields of a
// tools/list are true to what the list depends on. Without auth a list is
// the same for everyone who asks at its URL, a view's included: public,
// for --list-ttl (0 when it is negative). Under auth it is the caller's,
// by their grants: private, at every URL.
func TestListCacheFieldsPerViewAndGrant(t *testing.T) {
	crm := newWorkload(t, "crm", "crm-tools", "crm_", echoTool("crm"))
	obs := newWorkload(t, "obs", "obs-tools", "obs_", echoTool("obs"))
	rt := new(routes).add(crm).add(obs)
	tbl := table(crm.tableTools(), obs.tableTools())
	list := func(t *testing.T, endpoint string, hc *http.Client) *mcp.ListToolsResult {
		t.Helper()
		res, err := connect(t, endpoint, "2026-07-28", nil, hc).ListTools(bounded(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	names := func(res *mcp.ListToolsResult) []string {
		var out []string
		for _, tl := range res.Tools {
			out = append(out, tl.Name)
		}
		slices.Sort(out)
		return out
	}

	t.Run("no auth", func(t *testing.T) {
		for _, tc := range []struct {
			ttl  time.Duration
			want int
		}{{30 * time.Second, 30000}, {-time.Second, 0}} {
			g, url := newGateway(t, rt, gateway.Options{ListTTL: tc.ttl})
			if err := g.SetTable(tbl); err != nil {
				t.Fatal(err)
			}
			for endpoint, want := range map[string][]string{
				url + "/mcp": {"crm_echo", "obs_echo"},
				url + gateway.NamespaceViewPrefix + "crm":         {"crm_echo"},
				url + gateway.ToolSetViewPrefix + "obs/obs-tools": {"obs_echo"},
			} {
				res := list(t, endpoint, nil)
				if got := names(res); !slices.Equal(got, want) || res.CacheScope != "public" || res.TTLMs != tc.want {
					t.Errorf("--list-ttl %s, %s: %v cacheScope %q ttlMs %d, want %v public %d", tc.ttl, endpoint, got, res.CacheScope, res.TTLMs, want, tc.want)
				}
			}
		}
	})

	t.Run("auth", func(t *testing.T) {
		f := newFakeAPI()
		f.grant("crm-agent", "crm", "crm_echo")
		f.grant("obs-agent", "obs", "obs_echo")
		g, url := newGateway(t, rt, gateway.Options{ListTTL: 30 * time.Second, Auth: &gateway.KubernetesAuth{Client: f}})
		if err := g.SetTable(tbl); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			agent, endpoint string
			want            []string
		}{
			{"crm-agent", url + "/mcp", []string{"crm_echo"}},
			{"obs-agent", url + "/mcp", []string{"obs_echo"}},
			{"obs-agent", url + gateway.NamespaceViewPrefix + "obs", []string{"obs_echo"}},
			{"obs-agent", url + gateway.NamespaceViewPrefix + "crm", nil},
		} {
			hc := &http.Client{Transport: headerTransport{"Authorization": "Bearer " + f.token(tc.agent)}}
			res := list(t, tc.endpoint, hc)
			if got := names(res); !slices.Equal(got, tc.want) || res.CacheScope != "private" || res.TTLMs != 30000 {
				t.Errorf("%s at %s: %v cacheScope %q ttlMs %d, want %v private 30000", tc.agent, tc.endpoint, got, res.CacheScope, res.TTLMs, tc.want)
			}
		}
	})
}
