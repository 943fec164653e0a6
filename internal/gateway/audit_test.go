package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit"
)

// syncBuffer is an audit sink that tests read while the gateway writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// auditLine is what the tests read of an audit line.
type auditLine struct {
	Time      string `json:"time"`
	RequestID string `json:"requestId"`
	TraceID   string `json:"traceId"`
	Caller    *struct {
		User           string   `json:"user"`
		Groups         []string `json:"groups"`
		ServiceAccount string   `json:"serviceAccount"`
		AuthMode       string   `json:"authMode"`
	} `json:"caller"`
	Method            string          `json:"method"`
	View              string          `json:"view"`
	Tool              string          `json:"tool"`
	ToolSet           string          `json:"toolSet"`
	Decision          string          `json:"decision"`
	Reason            string          `json:"reason"`
	RetryAfterSeconds int             `json:"retryAfterSeconds"`
	Outcome           string          `json:"outcome"`
	DurationMs        *float64        `json:"durationMs"`
	ArgumentBytes     int             `json:"argumentBytes"`
	ResultBytes       int64           `json:"resultBytes"`
	Arguments         json.RawMessage `json:"arguments"`
}

func auditLines(t *testing.T, s string) []auditLine {
	t.Helper()
	var out []auditLine
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		var l auditLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("audit line %q is not JSON: %v", sc.Text(), err)
		}
		out = append(out, l)
	}
	return out
}

type loginIn struct {
	User     string `json:"user"`
	Password string `json:"password" tool:"sensitive"`
}

func loginTool() *toolkit.Tool {
	return toolkit.MustNew("login", "Logs in", func(_ context.Context, in loginIn) (string, error) {
		return "welcome " + in.User, nil
	})
}

const (
	visibleArg = "visible-argument-7f3a"
	secretArg  = "hunter2-secret-91c4"
)

// auditGateway serves the tools echo and login of ToolSet team/tools (the
// latter with a sensitive password), behind KubernetesAuth over f, with
// the audit log in buf.
func auditGateway(t *testing.T, f *fakeAPI, buf *syncBuffer, opts gateway.Options, callsPerMinute int) (*gateway.Gateway, string) {
	t.Helper()
	w := newWorkload(t, "team", "tools", "", echoTool("a"), loginTool())
	tools := w.tableTools()
	for i := range tools {
		tools[i].CallsPerMinute = callsPerMinute
	}
	opts.Auth = &gateway.KubernetesAuth{Client: f}
	opts.AuditLog = buf
	g, url := newGateway(t, (&routes{}).add(w), opts)
	if err := g.SetTable(table(tools)); err != nil {
		t.Fatal(err)
	}
	return g, url
}

func callAs(t *testing.T, url, path, tok string, extra map[string]string, name string, args any) (*mcp.CallToolResult, error) {
	t.Helper()
	h := headerTransport{"Authorization": "Bearer " + tok}
	for k, v := range extra {
		h[k] = v
	}
	cs := connect(t, url+path, "2026-07-28", nil, &http.Client{Transport: h})
	return cs.CallTool(bounded(t), &mcp.CallToolParams{Name: name, Arguments: args})
}

func argsOf(tool string) map[string]any {
	if tool == "login" {
		return map[string]any{"user": "u", "password": "p"}
	}
	return map[string]any{"text": "x"}
}

func TestAuditLogHasEveryCallExactlyOnceWithItsDecisionAndNoArguments(t *testing.T) {
	f := newFakeAPI()
	f.grant("alice", "team", "echo")
	f.grant("alice", "team", "login")
	var buf syncBuffer
	g, url := auditGateway(t, f, &buf, gateway.Options{MaxCallsPerCallerPerMinute: 2}, 0)
	alice, bob := f.token("alice"), f.token("bob")
	trace := map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}

	if res, err := callAs(t, url, "/mcp", alice, trace, "echo", map[string]any{"text": visibleArg}); err != nil || res.IsError {
		t.Fatalf("echo: %v %v", err, res)
	}
	if res, err := callAs(t, url, "/mcp/namespaces/team", alice, nil, "login", map[string]any{"user": visibleArg, "password": secretArg}); err != nil || res.IsError {
		t.Fatalf("login: %v %v", err, res)
	}
	if _, err := callAs(t, url, "/mcp", bob, nil, "echo", map[string]any{"text": visibleArg}); err == nil {
		t.Fatal("bob may not call echo, yet the call went through")
	}
	if _, err := callAs(t, url, "/mcp", alice, nil, "no_such_tool", map[string]any{"text": visibleArg}); err == nil {
		t.Fatal("an unknown tool was called")
	}
	if res, err := callAs(t, url, "/mcp", alice, nil, "echo", map[string]any{"text": visibleArg}); err != nil || res.IsError {
		t.Fatalf("second echo: %v %v", err, res)
	}
	res, err := callAs(t, url, "/mcp", alice, nil, "echo", map[string]any{"text": visibleArg})
	if err != nil || !res.IsError || !strings.Contains(text(res), "Retry in") {
		t.Fatalf("third echo within a minute: want a rate-limited isError result that says when to retry, got %v %v", err, res)
	}
	g.Close() // writes out the buffered lines

	log := buf.String()
	if strings.Contains(log, visibleArg) || strings.Contains(log, secretArg) {
		t.Fatalf("the audit log holds an argument value:\n%s", log)
	}
	lines := auditLines(t, log)
	if len(lines) != 6 {
		t.Fatalf("want 6 audit lines, one per call, got %d:\n%s", len(lines), log)
	}
	type key struct{ user, tool, decision, reason, outcome string }
	got := map[key]int{}
	ids := map[string]bool{}
	for _, l := range lines {
		user := ""
		if l.Caller != nil {
			user = l.Caller.User
			if l.Caller.AuthMode != "kubernetes" || !strings.HasPrefix(l.Caller.ServiceAccount, "agents/") || len(l.Caller.Groups) == 0 {
				t.Errorf("caller of %+v: want auth mode, ServiceAccount and groups", l.Caller)
			}
		}
		got[key{user, l.Tool, l.Decision, l.Reason, l.Outcome}]++
		if l.RequestID == "" || ids[l.RequestID] {
			t.Errorf("request id %q missing or not unique", l.RequestID)
		}
		ids[l.RequestID] = true
		if l.Time == "" || l.Method != "tools/call" || l.DurationMs == nil || l.ArgumentBytes == 0 {
			t.Errorf("line %+v lacks time, method, duration or argument bytes", l)
		}
		if l.Arguments != nil {
			t.Errorf("line %+v has arguments without AuditArguments", l)
		}
		switch l.Decision {
		case "allowed":
			if l.ToolSet != "team/tools" || l.ResultBytes == 0 {
				t.Errorf("allowed line %+v: want the owner ToolSet and the result's bytes", l)
			}
		case "rate_limited":
			if l.RetryAfterSeconds < 1 {
				t.Errorf("limited line %+v: want when to retry", l)
			}
		}
		if l.Tool == "login" && l.View != "namespaces/team" {
			t.Errorf("login's view = %q, want namespaces/team", l.View)
		}
		if l.Tool == "echo" && l.TraceID != "" && l.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("trace id %q, want the caller's", l.TraceID)
		}
	}
	a, b := saUser("alice"), saUser("bob")
	want := map[key]int{
		{a, "echo", "allowed", "", "ok"}:                         2,
		{a, "login", "allowed", "", "ok"}:                        1,
		{b, "echo", "denied", "not_permitted", "denied"}:         1,
		{a, "no_such_tool", "denied", "unknown_tool", "unknown"}: 1,
		{a, "echo", "rate_limited", "caller", "limited"}:         1,
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("lines %+v: %d, want %d (all: %v)", k, got[k], n, got)
		}
	}
	if !strings.Contains(log, `"traceId":"4bf92f3577b34da6a3ce929d0e0e4736"`) {
		t.Errorf("no line carries the caller's trace id:\n%s", log)
	}
}

func TestAuditArgumentsRedactEverySensitiveValue(t *testing.T) {
	f := newFakeAPI()
	f.grant("alice", "team", "")
	var buf syncBuffer
	g, url := auditGateway(t, f, &buf, gateway.Options{AuditArguments: true}, 0)
	alice := f.token("alice")
	for _, args := range []any{
		map[string]any{"user": visibleArg, "password": secretArg},
		map[string]any{"user": visibleArg, "Password": secretArg},                              // repaired to password
		map[string]any{"arguments": map[string]any{"user": visibleArg, "password": secretArg}}, // unwrapped
	} {
		if res, err := callAs(t, url, "/mcp", alice, nil, "login", args); err != nil || res.IsError {
			t.Fatalf("login %v: %v %v", args, err, res)
		}
	}
	// Through call_tool too.
	if res, err := callAs(t, url, "/mcp/search", alice, nil, "call_tool", map[string]any{"name": "login", "arguments": map[string]any{"user": visibleArg, "password": secretArg}}); err != nil || res.IsError {
		t.Fatalf("call_tool login: %v %v", err, res)
	}
	g.Close()
	log := buf.String()
	if strings.Contains(log, secretArg) {
		t.Fatalf("the audit log holds a sensitive value:\n%s", log)
	}
	lines := auditLines(t, log)
	if len(lines) != 4 {
		t.Fatalf("want 4 lines, got %d:\n%s", len(lines), log)
	}
	for _, l := range lines {
		if !strings.Contains(string(l.Arguments), visibleArg) || !strings.Contains(string(l.Arguments), toolkit.Redacted) {
			t.Errorf("arguments %s: want the user shown and the password redacted", l.Arguments)
		}
	}
}

func TestAuditLogStallsNoCall(t *testing.T) {
	// A sink that never returns: calls go on, and the lines that do not
	// fit the buffer are dropped (and counted), not waited for.
	stuck := make(chan struct{})
	w := newWorkload(t, "team", "tools", "", echoTool("a"))
	reg := prometheus.NewRegistry()
	g, url := newGateway(t, (&routes{}).add(w), gateway.Options{AuditLog: blockingWriter(stuck), AuditBuffer: 2, Registerer: reg})
	t.Cleanup(func() { close(stuck) }) // before the gateway's Close, which writes out the buffer
	if err := g.SetTable(table(w.tableTools())); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, url+"/mcp", "2026-07-28", nil, nil)
	for i := range 10 {
		if res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}); err != nil || res.IsError {
			t.Fatalf("call %d with a stuck audit sink: %v %v", i, err, res)
		}
	}
	// Two lines are buffered and at most one is being written: the other
	// seven or eight are dropped and counted.
	if n := testutil.ToFloat64(counterOf(t, reg, "toolplane_gateway_audit_dropped_total")); n < 7 || n > 8 {
		t.Errorf("toolplane_gateway_audit_dropped_total = %v, want 7 or 8", n)
	}
}

// counterOf finds the counter name in reg.
func counterOf(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: "copy"}, func() float64 { return mf.GetMetric()[0].GetCounter().GetValue() })
		}
	}
	t.Fatalf("no metric %s", name)
	return nil
}

type blockingWriter chan struct{}

func (b blockingWriter) Write(p []byte) (int, error) { <-b; return len(p), nil }

func TestCallerLimitLeavesOtherCallersAlone(t *testing.T) {
	f := newFakeAPI()
	f.grant("alice", "", "")
	f.grant("bob", "", "")
	_, url := auditGateway(t, f, &syncBuffer{}, gateway.Options{MaxCallsPerCallerPerMinute: 3}, 0)
	alice, bob := f.token("alice"), f.token("bob")
	results := func(tok, tool string, n int) (ok, limited int) {
		for range n {
			res, err := callAs(t, url, "/mcp", tok, nil, tool, argsOf(tool))
			switch {
			case err != nil:
				t.Fatalf("call: %v", err)
			case res.IsError && strings.Contains(text(res), "Rate limited"):
				limited++
			case res.IsError:
				t.Fatalf("call: %s", text(res))
			default:
				ok++
			}
		}
		return ok, limited
	}
	if ok, lim := results(alice, "echo", 5); ok != 3 || lim != 2 {
		t.Errorf("alice's 5 calls of echo: %d ok and %d limited, want 3 and 2", ok, lim)
	}
	// Another token of alice is the same caller.
	if ok, lim := results(f.token("alice"), "echo", 1); ok != 0 || lim != 1 {
		t.Errorf("alice's call with a second token: %d ok, %d limited, want it limited", ok, lim)
	}
	// Another tool has a budget of its own.
	if ok, lim := results(alice, "login", 1); ok != 1 || lim != 0 {
		t.Errorf("alice's call of login: %d ok, %d limited, want it through", ok, lim)
	}
	if ok, lim := results(bob, "echo", 3); ok != 3 || lim != 0 {
		t.Errorf("bob's 3 calls of echo: %d ok and %d limited, want all through", ok, lim)
	}
}

func TestToolSetCallsPerMinuteHoldAcrossCallersAndTools(t *testing.T) {
	f := newFakeAPI()
	f.grant("alice", "", "")
	f.grant("bob", "", "")
	var buf syncBuffer
	g, url := auditGateway(t, f, &buf, gateway.Options{}, 3)
	alice, bob := f.token("alice"), f.token("bob")
	var ok, limited int
	for _, c := range []struct{ tok, tool string }{{alice, "echo"}, {bob, "echo"}, {alice, "login"}, {bob, "login"}, {alice, "echo"}} {
		res, err := callAs(t, url, "/mcp", c.tok, nil, c.tool, argsOf(c.tool))
		switch {
		case err != nil:
			t.Fatal(err)
		case res.IsError && strings.Contains(text(res), "ToolSet team/tools") && strings.Contains(text(res), "Retry in"):
			limited++
		case res.IsError:
			t.Fatalf("call: %s", text(res))
		default:
			ok++
		}
	}
	if ok != 3 || limited != 2 {
		t.Errorf("5 calls of a ToolSet taking 3 a minute: %d ok and %d limited, want 3 and 2", ok, limited)
	}
	g.Close()
	n := 0
	for _, l := range auditLines(t, buf.String()) {
		if l.Decision == "rate_limited" && l.Reason == "toolset" && l.ToolSet == "team/tools" {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d audit lines of calls limited by the ToolSet, want 2:\n%s", n, buf.String())
	}
}

func TestCallerLimitWithoutAuthIsPerAddress(t *testing.T) {
	w := newWorkload(t, "team", "tools", "", echoTool("a"))
	g, url := newGateway(t, (&routes{}).add(w), gateway.Options{MaxCallsPerCallerPerMinute: 1})
	if err := g.SetTable(table(w.tableTools())); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, url+"/mcp", "2026-07-28", nil, nil)
	for i, limited := range []bool{false, true} {
		res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.IsError && strings.Contains(text(res), "Rate limited"); got != limited {
			t.Fatalf("call %d from one address: limited %v, want %v (%s)", i, got, limited, text(res))
		}
	}
}

func TestAuditArgumentsOfAHugeCallAreCutToANote(t *testing.T) {
	f := newFakeAPI()
	f.grant("alice", "", "")
	var buf syncBuffer
	g, url := auditGateway(t, f, &buf, gateway.Options{AuditArguments: true}, 0)
	big := strings.Repeat("x", 200<<10)
	if res, err := callAs(t, url, "/mcp", f.token("alice"), nil, "echo", map[string]any{"text": big}); err != nil || res.IsError {
		t.Fatalf("echo: %v %v", err, res)
	}
	g.Close()
	lines := auditLines(t, buf.String())
	if len(lines) != 1 || len(buf.String()) > 4<<10 || !strings.Contains(string(lines[0].Arguments), "over the audit log's limit") {
		t.Fatalf("a call of 200 KiB of arguments: %d lines, %d bytes, arguments %.200s", len(lines), len(buf.String()), lines[0].Arguments)
	}
}

func TestAuditLineOfAnMCPServersCall(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "go-mcp"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "hello"}, func(_ context.Context, _ *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello there"}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "fail"}, func(_ context.Context, _ *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no"}}}, nil, nil
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, DisableLocalhostProtection: true}))
	t.Cleanup(hs.Close)
	r := new(routes)
	r.set("gomcp.apps.svc.cluster.local:8080", hs.Listener.Addr().String())
	var buf syncBuffer
	g, url := newGateway(t, r, gateway.Options{AuditLog: &buf})
	if err := g.SetTable(table(mcpTableTools("apps", "gomcp", "/mcp", "hello", "fail"))); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, url+"/mcp", "2026-07-28", nil, nil)
	for _, name := range []string{"hello", "fail"} {
		if _, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	g.Close()
	got := map[string]auditLine{}
	for _, l := range auditLines(t, buf.String()) {
		got[l.Tool] = l
	}
	if l := got["hello"]; l.Decision != "allowed" || l.Outcome != "ok" || l.ToolSet != "apps/gomcp" || l.ResultBytes == 0 || l.Caller != nil {
		t.Errorf("hello's line: %+v", l)
	}
	if l := got["fail"]; l.Outcome != "tool_error" {
		t.Errorf("fail's line: %+v, want outcome tool_error", l)
	}
}
