package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/server"
	"github.com/toolplane/toolplane/toolkit/tracing"
)

// TestOneTraceFromTheClientThroughTheGatewayToTheWorkload: an agent's span,
// the gateway's spans (tools/call, route, call) and the workload's own
// execute_tool span, recorded by one in-process exporter, are one trace,
// each span the child of the one before, whether the client sends its
// trace context in the traceparent header or in _meta.traceparent.
func TestOneTraceFromTheClientThroughTheGatewayToTheWorkload(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	// The workload: a real toolkit server with its tracing on, taking the
	// trace context from the request's header.
	reg := &toolkit.Registry{}
	reg.Use(tracing.Middleware(tracing.WithTracerProvider(tp)))
	if err := reg.Add(echoTool("traced")); err != nil {
		t.Fatal(err)
	}
	h := server.New(reg, &server.Options{Name: "traced", AllowAnyHostOnLoopback: true,
		CallContext: func(ctx context.Context, h http.Header) context.Context {
			return propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(h))
		}})
	srv := httptest.NewServer(h)
	t.Cleanup(func() { h.Close(); srv.Close() })
	wl := &workload{namespace: "obs", service: "traced-tools", reg: reg, srv: srv}

	g, url := newGateway(t, new(routes).add(wl), gateway.Options{TracerProvider: tp})
	if err := g.SetTable(table(wl.tableTools())); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, era string
		inMeta    bool
	}{
		{"header/" + eras[0], eras[0], false},
		{"header/" + eras[1], eras[1], false},
		{"meta/" + eras[0], eras[0], true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, root := tp.Tracer("agent").Start(context.Background(), "agent turn")
			carrier := propagation.MapCarrier{}
			propagation.TraceContext{}.Inject(ctx, carrier)
			var hc *http.Client
			params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}}
			if tc.inMeta {
				params.Meta = mcp.Meta{"traceparent": carrier["traceparent"]}
			} else {
				hc = &http.Client{Transport: headerTransport{"Traceparent": carrier["traceparent"]}}
			}
			cs := connect(t, url+"/mcp", tc.era, nil, hc)
			if !tc.inMeta {
				if _, err := cs.ListTools(bounded(t), nil); err != nil {
					t.Fatal(err)
				}
			}
			res, err := cs.CallTool(bounded(t), params)
			if err != nil || res.IsError {
				t.Fatalf("%v %+v", err, res)
			}
			root.End()

			want := []string{"agent turn", "tools/call echo", "route echo", "call echo", "execute_tool echo"}
			if !tc.inMeta {
				want = append(want, "tools/list")
			}
			var byName map[string]sdktrace.ReadOnlySpan
			deadline := time.Now().Add(10 * time.Second)
			for {
				byName = spansOf(rec, root.SpanContext().TraceID())
				if len(byName) >= len(want) || time.Now().After(deadline) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			for _, n := range want {
				if byName[n] == nil {
					t.Fatalf("no span %q in the agent's trace; it has %v", n, keys(byName))
				}
			}
			parentOf := func(child, parent string) {
				t.Helper()
				if got, want := byName[child].Parent().SpanID(), byName[parent].SpanContext().SpanID(); got != want {
					t.Errorf("the parent of %q is %s, want %q (%s)", child, got, parent, want)
				}
			}
			parentOf("tools/call echo", "agent turn")
			parentOf("route echo", "tools/call echo")
			parentOf("call echo", "tools/call echo")
			parentOf("execute_tool echo", "call echo")
			if !tc.inMeta {
				parentOf("tools/list", "agent turn")
			}
			if k := byName["call echo"].SpanKind(); k != trace.SpanKindClient {
				t.Errorf("the gateway's call span is of kind %s", k)
			}
		})
	}
}

// TestAuthorizationIsASpanOfTheCall: under Auth, the questions a call asks
// are an authorize span inside the call's server span, in the client's
// trace.
func TestAuthorizationIsASpanOfTheCall(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	wl := newWorkload(t, "obs", "obs-tools", "", echoTool("obs"))
	f := newFakeAPI()
	tok := f.token("agent")
	f.grant("agent", "obs", "echo")
	g, url := newGateway(t, new(routes).add(wl), gateway.Options{TracerProvider: tp, Auth: &gateway.KubernetesAuth{Client: f}})
	if err := g.SetTable(table(wl.tableTools())); err != nil {
		t.Fatal(err)
	}
	ctx, root := tp.Tracer("agent").Start(context.Background(), "agent turn")
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	hc := &http.Client{Transport: headerTransport{"Authorization": "Bearer " + tok, "Traceparent": carrier["traceparent"]}}
	cs := connect(t, url+"/mcp", eras[0], nil, hc)
	res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil || res.IsError {
		t.Fatalf("%v %+v", err, res)
	}
	root.End()
	byName := spansOf(rec, root.SpanContext().TraceID())
	if byName["authorize"] == nil || byName["tools/call echo"] == nil {
		t.Fatalf("no authorize or tools/call span in the agent's trace; it has %v", keys(byName))
	}
	if got, want := byName["authorize"].Parent().SpanID(), byName["tools/call echo"].SpanContext().SpanID(); got != want {
		t.Errorf("the parent of authorize is %s, want the call's %s", got, want)
	}
}

// spansOf returns the ended spans of trace id by name.
func spansOf(rec *tracetest.SpanRecorder, id trace.TraceID) map[string]sdktrace.ReadOnlySpan {
	out := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		if s.SpanContext().TraceID() == id {
			out[s.Name()] = s
		}
	}
	return out
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestWithoutSpansTheCallersTraceContextPassesAsItCame: a gateway whose
// provider is the no-op one (cmd/gateway's without an OTLP endpoint)
// builds no spans, and the workload still gets the caller's trace context,
// trace and span id alike, as with the global provider, whether the caller
// sent it in its header or in _meta.traceparent.
func TestWithoutSpansTheCallersTraceContextPassesAsItCame(t *testing.T) {
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tc := range []struct {
		name string
		tp   trace.TracerProvider
	}{{"global", nil}, {"no-op", noop.NewTracerProvider()}} {
		for _, inMeta := range []bool{false, true} {
			wl := newWorkload(t, "crm", "crm-tools", "", headerTool("headers"))
			g, url := newGateway(t, new(routes).add(wl), gateway.Options{TracerProvider: tc.tp})
			if err := g.SetTable(table(wl.tableTools())); err != nil {
				t.Fatal(err)
			}
			var hc *http.Client
			params := &mcp.CallToolParams{Name: "headers"}
			if inMeta {
				params.Meta = mcp.Meta{"traceparent": traceparent}
			} else {
				hc = &http.Client{Transport: headerTransport{"Traceparent": traceparent}}
			}
			for _, era := range []string{"2026-07-28", "2025-11-25"} {
				cs := connect(t, url+"/mcp", era, nil, hc)
				res, err := cs.CallTool(bounded(t), params)
				if err != nil || res.IsError {
					t.Fatalf("%s, %s: %v %s", tc.name, era, err, text(res))
				}
				if got := text(res); !strings.Contains(got, "Traceparent="+traceparent+"\n") {
					t.Errorf("%s provider, %s, in _meta %v: the workload got\n%s", tc.name, era, inMeta, got)
				}
			}
		}
	}
}
