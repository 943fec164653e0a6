package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/server"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// The two MCP protocol eras the official Go SDK client speaks: 2026-07-28
// connects with server/discover, 2025-11-25 with initialize.
var protocolVersions = []string{"2026-07-28", "2025-11-25"}

// headerTransport adds headers to every request, as a client's own.
type headerTransport struct{ header http.Header }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.header {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

// connect opens a Go SDK client session at the given protocol version.
// changed, if not nil, receives every tools/list_changed notification.
// Every request carries X-Test: mcp, and the header pairs given.
func connect(t testing.TB, url, version string, changed chan<- struct{}, header ...string) *mcp.ClientSession {
	t.Helper()
	opts := &mcp.ClientOptions{}
	if changed != nil {
		opts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1.0.0"}, opts)
	hdr := http.Header{"X-Test": {"mcp"}}
	for i := 0; i+1 < len(header); i += 2 {
		hdr.Set(header[i], header[i+1])
	}
	transport := &mcp.StreamableClientTransport{
		Endpoint:   url + spec.MCPPath,
		HTTPClient: &http.Client{Transport: headerTransport{header: hdr}},
		MaxRetries: -1,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connecting at %s: %v", version, err)
	}
	t.Cleanup(func() { cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != version {
		t.Fatalf("negotiated %s, want %s", got, version)
	}
	return cs
}

func bounded(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// asSpecTools turns a tools/list result into spec.Tools, for comparison
// with the spec document. The SDK writes readOnlyHint and idempotentHint
// even when false, which is MCP's default for both; so a false hint is
// compared as an absent one.
func asSpecTools(t testing.TB, tools []*mcp.Tool) []spec.Tool {
	t.Helper()
	b, err := json.Marshal(tools)
	if err != nil {
		t.Fatal(err)
	}
	var out []spec.Tool
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	for i := range out {
		out[i] = normaliseHints(out[i])
	}
	return out
}

func normaliseHints(t spec.Tool) spec.Tool {
	a := t.Annotations
	if a == nil {
		return t
	}
	c := *a
	if c.ReadOnlyHint != nil && !*c.ReadOnlyHint {
		c.ReadOnlyHint = nil
	}
	if c.IdempotentHint != nil && !*c.IdempotentHint {
		c.IdempotentHint = nil
	}
	t.Annotations = &c
	if c == (spec.Annotations{}) {
		t.Annotations = nil
	}
	return t
}

func canonical(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	// Through any, so that raw messages and maps compare by content, with
	// numbers kept as their text.
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var x any
	if err := d.Decode(&x); err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(x)
	return string(b)
}

func TestMCPListsTheSpecDocumentTools(t *testing.T) {
	s := newTestServer(t, &server.Options{Name: "crm-tools", Version: "1.4.2"})
	doc, _ := s.document(t)
	want := make([]spec.Tool, len(doc.Tools))
	for i, tool := range doc.Tools {
		want[i] = normaliseHints(tool)
	}
	for _, v := range protocolVersions {
		t.Run(v, func(t *testing.T) {
			cs := connect(t, s.URL, v, nil)
			if info := cs.InitializeResult().ServerInfo; info == nil || info.Name != "crm-tools" || info.Version != "1.4.2" {
				t.Errorf("serverInfo %+v", info)
			}
			if caps := cs.InitializeResult().Capabilities; caps == nil || caps.Tools == nil || !caps.Tools.ListChanged {
				t.Errorf("capabilities %+v", caps)
			}
			res, err := cs.ListTools(bounded(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := canonical(t, asSpecTools(t, res.Tools)), canonical(t, want); got != want {
				t.Errorf("tools/list differs from the spec document:\n got %s\nwant %s", got, want)
			}
		})
	}
}

// callCases are arguments as a model sends them, sloppy ones included; MCP
// must answer each exactly as invoke does.
var callCases = []struct{ tool, args string }{
	{"echo", `{"text":"ab","count":2,"big":1234567890123}`},
	{"echo", `{"text":"x","count":"3","flag":"true","status":"PAID","tags":"[\"a\",\"b\"]"}`},
	{"echo", `{"txt":"x","count":1.5}`},
	{"greet", `{"name":"Changlu"}`},
	{"broken", `{"name":"x"}`},
}

// asCallResult reads an MCP CallToolResult as the invoke reply: the SDK
// adds protocol fields (_meta, resultType) and omits a false isError.
func asCallResult(t testing.TB, res *mcp.CallToolResult) spec.CallResult {
	t.Helper()
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var out spec.CallResult
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMCPCallEqualsInvoke(t *testing.T) {
	s := newTestServer(t, nil)
	for _, v := range protocolVersions {
		t.Run(v, func(t *testing.T) {
			cs := connect(t, s.URL, v, nil)
			for _, c := range callCases {
				got, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: c.tool, Arguments: json.RawMessage(c.args)})
				if err != nil {
					t.Fatalf("%s %s: %v", c.tool, c.args, err)
				}
				want := s.invoke(t, c.tool, c.args)
				// The SDK stamps its own _meta (serverInfo) on every MCP
				// result; the tool's result is what must agree.
				mcpResult := asCallResult(t, got)
				mcpResult.Meta = nil
				if canonical(t, mcpResult) != canonical(t, want) {
					t.Errorf("%s %s:\n  mcp    %s\n  invoke %s", c.tool, c.args, canonical(t, mcpResult), canonical(t, want))
				}
			}
			// Integers are exact on the wire. (The Go SDK client decodes
			// structuredContent into float64, so only the text shows it.)
			res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(`{"text":"x","big":"9007199254740993"}`)})
			if err != nil || res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, `"big":9007199254740993`) {
				t.Errorf("2^53+1 over MCP: %v %+v", err, res)
			}
			// A sloppy call succeeds: it was repaired, not refused.
			res, err = cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(callCases[1].args)})
			if err != nil || res.IsError {
				t.Fatalf("sloppy call: %v %+v", err, res)
			}
			// An unknown tool is a protocol error, as MCP specifies.
			if _, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "nope"}); err == nil {
				t.Error("calling an unknown tool succeeded")
			}
		})
	}
}

// whoamiOver calls whoami over MCP.
func whoamiOver(t *testing.T, cs *mcp.ClientSession) whoamiOut {
	t.Helper()
	res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "whoami"})
	if err != nil || res.IsError {
		t.Fatalf("%v %+v", err, res)
	}
	var got whoamiOut
	if err := json.Unmarshal([]byte(canonical(t, res.StructuredContent)), &got); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestMCPCarriesTheCaller(t *testing.T) {
	s := newTestServer(t, nil)
	for _, v := range protocolVersions {
		t.Run(v, func(t *testing.T) {
			got := whoamiOver(t, connect(t, s.URL, v, nil))
			// Stateless: the tool's context derives from the HTTP request's.
			want := whoamiOut{Subject: "alice", Scopes: []string{"crm:read"}, Header: "mcp", Value: "request-scoped"}
			if canonical(t, got) != canonical(t, want) {
				t.Errorf("caller %+v, want %+v", got, want)
			}
		})
	}
}

func TestMCPSessionCarriesThisRequestsHeader(t *testing.T) {
	s := newTestServer(t, &server.Options{MCPSessions: true})
	cs := connect(t, s.URL, "2025-11-25", nil)
	if cs.ID() == "" {
		t.Fatal("no session with MCPSessions")
	}
	// The session's context belongs to its first request, so its caller is
	// not passed on as this request's; the header is this request's own.
	if got := whoamiOver(t, cs); got.Header != "mcp" || got.Subject != "" {
		t.Errorf("caller in a session %+v", got)
	}
}

// TestBearerTokenIsTheCaller puts the MCP SDK's bearer-token middleware in
// front of the handler: the verified token is the caller on every transport
// and in sessions too, and toolkit's scope check sees it.
func TestBearerTokenIsTheCaller(t *testing.T) {
	reg := testRegistry(t)
	if err := reg.Add(must(toolkit.New("write_note", "Needs crm:write", func(_ context.Context, in nameIn) (string, error) {
		return "written", nil
	}, toolkit.Scopes("crm:write")))); err != nil {
		t.Fatal(err)
	}
	reg.Use(toolkit.RequireScopes())
	h := server.New(reg, &server.Options{MCPSessions: true})
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		scopes := map[string][]string{"bob": {"crm:write"}, "carol": {"crm:read"}}[token]
		if scopes == nil {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: token, Scopes: scopes, Expiration: time.Now().Add(time.Hour)}, nil
	}
	srv := httptest.NewServer(auth.RequireBearerToken(verify, nil)(h))
	t.Cleanup(func() {
		h.Close()
		srv.Close()
	})
	s := &testServer{Server: srv, reg: reg, h: h}

	invokeAs := func(user, tool, args string) spec.CallResult {
		resp, body := s.do(t, http.MethodPost, spec.InvokePrefix+tool, args, "Authorization", "Bearer "+user)
		var res spec.CallResult
		if err := json.Unmarshal(body, &res); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		return res
	}
	var who whoamiOut
	if err := json.Unmarshal(invokeAs("bob", "whoami", `{}`).StructuredContent, &who); err != nil || who.Subject != "bob" {
		t.Errorf("invoke as bob: %+v %v", who, err)
	}
	if res := invokeAs("bob", "write_note", `{"name":"x"}`); res.IsError {
		t.Errorf("bob holds crm:write: %s", res.Text())
	}
	if res := invokeAs("carol", "write_note", `{"name":"x"}`); !res.IsError {
		t.Errorf("carol lacks crm:write but wrote")
	}

	for _, v := range protocolVersions {
		t.Run(v, func(t *testing.T) {
			for user, allowed := range map[string]bool{"bob": true, "carol": false} {
				cs := connect(t, s.URL, v, nil, "Authorization", "Bearer "+user)
				if got := whoamiOver(t, cs); got.Subject != user {
					t.Errorf("whoami as %s: %+v", user, got)
				}
				res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "write_note", Arguments: map[string]any{"name": "x"}})
				if err != nil || res.IsError == allowed {
					t.Errorf("write_note as %s: %v %+v", user, err, res)
				}
			}
		})
	}
}

// waitChanged waits, within a bound, for a list_changed notification.
func waitChanged(t *testing.T, changed <-chan struct{}) {
	t.Helper()
	waitFor(t, changed, "notifications/tools/list_changed")
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(bounded(t), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	return names
}

func TestMCPListChanged(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version string
		opts    *server.Options
	}{
		// subscriptions/listen, stateless.
		{"2026-07-28", "2026-07-28", nil},
		{"2026-07-28 with sessions on", "2026-07-28", &server.Options{MCPSessions: true}},
		// The session's standalone SSE stream.
		{"2025-11-25 with sessions", "2025-11-25", &server.Options{MCPSessions: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestServer(t, tc.opts)
			changed := make(chan struct{}, 1)
			cs := connect(t, s.URL, tc.version, changed)
			waitFor(t, s.streams, "the notification stream to open")

			if err := s.reg.Add(must(toolkit.New("late", "Added at run time", echo))); err != nil {
				t.Fatal(err)
			}
			waitChanged(t, changed)
			if names := toolNames(t, cs); !slices.Contains(names, "late") {
				t.Errorf("after add: %v", names)
			}

			s.reg.Remove("late", "greet")
			waitChanged(t, changed)
			if names := toolNames(t, cs); slices.Contains(names, "late") || slices.Contains(names, "greet") {
				t.Errorf("after remove: %v", names)
			}
		})
	}
}

func waitFor(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatalf("waited 10s for %s", what)
	}
}

func TestMCPStatelessByDefault(t *testing.T) {
	s := newTestServer(t, nil)
	cs := connect(t, s.URL, "2025-11-25", nil)
	if cs.ID() != "" {
		t.Errorf("session id %q without MCPSessions", cs.ID())
	}
	// No standalone stream: GET is 405, which clients take as "none".
	resp, _ := s.do(t, http.MethodGet, spec.MCPPath, "", "Accept", "text/event-stream")
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /mcp: %d", resp.StatusCode)
	}
}

func TestMCPBodyLimit(t *testing.T) {
	s := newTestServer(t, &server.Options{MaxBodyBytes: 1024})
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + strings.Repeat("x", 2048) + `"}}}`
	resp, _ := s.do(t, http.MethodPost, spec.MCPPath, body,
		"Content-Type", "application/json", "Accept", "application/json, text/event-stream",
		"Mcp-Protocol-Version", "2025-11-25")
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized MCP request: %d", resp.StatusCode)
	}
}

// TestCloseEndsStreams checks that http.Server.Shutdown, with the handler's
// Close registered, returns although MCP clients hold streams open.
func TestCloseEndsStreams(t *testing.T) {
	reg := testRegistry(t)
	h := server.New(reg, &server.Options{MCPSessions: true})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	streams := make(chan struct{}, 1)
	srv := &http.Server{Handler: observeStreams(streams, h)}
	srv.RegisterOnShutdown(func() { h.Close() })
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	url := "http://" + ln.Addr().String()

	connect(t, url, "2026-07-28", make(chan struct{}, 1)) // holds subscriptions/listen open
	waitFor(t, streams, "subscriptions/listen to open")
	connect(t, url, "2025-11-25", make(chan struct{}, 1)) // holds its GET stream open
	waitFor(t, streams, "the standalone SSE stream to open")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
}

// TestTraceContextReachesTheTool extracts a W3C trace context from each
// request's header with Options.CallContext, and checks that the tool sees
// it on invoke and on MCP, in a session too.
func TestTraceContextReachesTheTool(t *testing.T) {
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	const traceparent = "00-" + traceID + "-00f067aa0ba902b7-01"
	for _, sessions := range []bool{false, true} {
		reg := testRegistry(t)
		if err := reg.Add(must(toolkit.New("trace_id", "The trace the call belongs to", func(ctx context.Context, _ struct{}) (string, error) {
			return trace.SpanContextFromContext(ctx).TraceID().String(), nil
		}))); err != nil {
			t.Fatal(err)
		}
		h := server.New(reg, &server.Options{
			MCPSessions: sessions,
			CallContext: func(ctx context.Context, h http.Header) context.Context {
				return propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(h))
			},
		})
		srv := httptest.NewServer(h)
		t.Cleanup(func() {
			h.Close()
			srv.Close()
		})
		s := &testServer{Server: srv, reg: reg, h: h}

		resp, body := s.do(t, http.MethodPost, spec.InvokePrefix+"trace_id", `{}`, "Traceparent", traceparent)
		var res spec.CallResult
		if err := json.Unmarshal(body, &res); err != nil || resp.StatusCode != http.StatusOK || res.Text() != traceID {
			t.Errorf("invoke: %d %s", resp.StatusCode, body)
		}
		for _, v := range protocolVersions {
			cs := connect(t, s.URL, v, nil, "Traceparent", traceparent)
			res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "trace_id"})
			if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != traceID {
				t.Errorf("MCP %s (sessions %v): %v %+v", v, sessions, err, res)
			}
		}
	}
}

func TestMCPLoopbackHostCheck(t *testing.T) {
	for _, allow := range []bool{false, true} {
		s := newTestServer(t, &server.Options{AllowAnyHostOnLoopback: allow})
		req, _ := http.NewRequest(http.MethodPost, s.URL+spec.MCPPath, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Host = "crm-tools.crm.svc:8080"
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := s.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if forbidden := resp.StatusCode == http.StatusForbidden; forbidden == allow {
			t.Errorf("AllowAnyHostOnLoopback %v: status %d", allow, resp.StatusCode)
		}
	}
}
