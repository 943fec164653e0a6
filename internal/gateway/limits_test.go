package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit/spec"
)

const meta2026 = `"_meta":{"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// post sends one raw MCP POST; version "" sends no Mcp-Protocol-Version.
func post(t *testing.T, ctx context.Context, url, version, method, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if version != "" {
		req.Header.Set("Mcp-Protocol-Version", version)
		req.Header.Set("Mcp-Method", method)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func listen(t *testing.T, ctx context.Context, url string) *http.Response {
	t.Helper()
	return post(t, ctx, url, "2026-07-28", "subscriptions/listen",
		`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{`+meta2026+`,"notifications":{"toolsListChanged":true}}}`)
}

func rpcErrorOf(t *testing.T, resp *http.Response) (int, string) {
	t.Helper()
	defer resp.Body.Close()
	var m struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&m); err != nil {
		t.Fatalf("status %d: not a JSON-RPC error: %v", resp.StatusCode, err)
	}
	return m.Error.Code, m.Error.Message
}

func TestBatchesAreRefusedOnEveryMCPEndpoint(t *testing.T) {
	w := newWorkload(t, "crm", "crm-tools", "", echoTool("crm"))
	g, url := newGateway(t, (&routes{}).add(w), gateway.Options{Sessions: true})
	if err := g.SetTable(table(w.tableTools())); err != nil {
		t.Fatal(err)
	}
	ctx := bounded(t)
	batch := ` 	
[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","id":2,"method":"tools/list"}]`
	for _, path := range []string{"/mcp", "/mcp/namespaces/crm", "/mcp/toolsets/crm/crm-tools", "/mcp/an-endpoint-added-later"} {
		for _, version := range []string{"", "2025-03-26", "2026-07-28"} {
			resp := post(t, ctx, url+path, version, "tools/list", batch)
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("%s at %q: status %d, want 400", path, version, resp.StatusCode)
			}
			if code, msg := rpcErrorOf(t, resp); code != -32600 || !strings.Contains(msg, "batch") {
				t.Errorf("%s at %q: error %d %q", path, version, code, msg)
			}
		}
	}
	// One message is served as before.
	resp := post(t, ctx, url+"/mcp", "2026-07-28", "tools/list", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+meta2026+`}}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"echo"`) {
		t.Errorf("one tools/list: %d %.300s", resp.StatusCode, b)
	}
}

func TestStreamsAreBoundedPerClientAndEndAtTheirLifetime(t *testing.T) {
	g, url := newGateway(t, nil, gateway.Options{MaxStreamsPerClient: 2, StreamLifetime: time.Second})
	if err := g.SetTable(table()); err != nil {
		t.Fatal(err)
	}
	ctx := bounded(t)
	start := time.Now()
	var open []*http.Response
	for range 2 {
		resp := listen(t, ctx, url+"/mcp")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("a stream within the bound: status %d", resp.StatusCode)
		}
		open = append(open, resp)
	}
	resp := listen(t, ctx, url+"/mcp")
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("a third stream from one address: status %d, want 429", resp.StatusCode)
	}
	if code, _ := rpcErrorOf(t, resp); code != -32000 {
		t.Errorf("a third stream: JSON-RPC error %d", code)
	}
	for _, resp := range open {
		_, _ = io.Copy(io.Discard, resp.Body) // until the gateway ends it
		resp.Body.Close()
	}
	if took := time.Since(start); took < time.Second || took > 10*time.Second {
		t.Errorf("the streams ended after %s, want their lifetime of 1s", took)
	}
	// Their slots are free again.
	c, cancel := context.WithCancel(ctx)
	defer cancel()
	if resp := listen(t, c, url+"/mcp"); resp.StatusCode != http.StatusOK {
		t.Errorf("a stream after the first ended: status %d", resp.StatusCode)
	} else {
		resp.Body.Close()
	}
}

func TestSessionsAreBoundedPerClientAndEndAtTheirLifetime(t *testing.T) {
	g, url := newGateway(t, nil, gateway.Options{Sessions: true, MaxSessionsPerClient: 2, SessionLifetime: time.Second})
	if err := g.SetTable(table()); err != nil {
		t.Fatal(err)
	}
	ctx := bounded(t)
	initialize := func() *http.Response {
		return post(t, ctx, url+"/mcp", "", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	}
	for range 2 {
		resp := initialize()
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
			t.Fatalf("a session within the bound: status %d, id %q", resp.StatusCode, resp.Header.Get("Mcp-Session-Id"))
		}
	}
	resp := initialize()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("a third session from one address: status %d, want 429", resp.StatusCode)
	}
	resp.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp := initialize()
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sessions did not end at their lifetime of 1s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestListenerAnswersConnectionsOverThePerClientBound(t *testing.T) {
	g := gateway.New(&gateway.Options{MaxConnsPerClient: 2})
	defer g.Close()
	if err := g.SetTable(table()); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: g, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(g.Listener(l)) }()
	defer srv.Close()
	get := func(c net.Conn) (*http.Response, error) {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "GET /v1/tools HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return resp, err
	}
	var conns []net.Conn
	for i := range 3 {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
		resp, err := get(c)
		switch {
		case err != nil:
			t.Fatalf("connection %d: %v", i, err)
		case i < 2 && resp.StatusCode != http.StatusOK:
			t.Errorf("connection %d within the bound of 2: status %d", i, resp.StatusCode)
		case i == 2 && (resp.StatusCode != http.StatusTooManyRequests || !resp.Close || resp.Header.Get("Retry-After") == ""):
			t.Errorf("connection 3 over the bound of 2: status %d, close %v, Retry-After %q; want 429, close, Retry-After",
				resp.StatusCode, resp.Close, resp.Header.Get("Retry-After"))
		}
	}
	// The refused connection is closed after its answer.
	if _, err := conns[2].Read(make([]byte, 1)); err == nil {
		t.Error("the refused connection is still open")
	}
	// A closed connection frees its slot.
	conns[0].Close()
	conns[1].Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		resp, err := get(c)
		c.Close()
		if err == nil && resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a connection after two closed: %v, %v", resp, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestAClientThatStopsReadingIsDropped(t *testing.T) {
	// A table whose first page is megabytes, which no socket buffer holds.
	tools := make([]spec.TableTool, 500)
	for i := range tools {
		name := fmt.Sprintf("t%03d", i)
		tools[i] = spec.TableTool{Name: name, SourceName: name, Description: strings.Repeat("d", 16<<10),
			InputSchema: json.RawMessage(`{"type":"object"}`), ToolSet: spec.ObjectReference{Namespace: "n", Name: "s"},
			Endpoints: &spec.Endpoints{Invoke: "http://s.n.svc:8080/tools/" + name, MCP: "http://s.n.svc:8080/mcp"}}
	}
	g := gateway.New(&gateway.Options{WriteTimeout: 500 * time.Millisecond})
	defer g.Close()
	if err := g.SetTable(table(tools)); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(g)
	closed := make(chan struct{})
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			close(closed)
		}
	}
	srv.Start()
	defer srv.Close()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.(*net.TCPConn).SetReadBuffer(4 << 10)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta2026 + `}}`
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/list\r\nContent-Length: %d\r\n\r\n%s",
		srv.Listener.Addr(), len(body), body)
	// The client never reads; the page is megabytes, more than the
	// sockets' buffers hold.
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the gateway still holds the connection of a client that has not read for 10s, with a write timeout of 500ms")
	}
}

func TestSlowBodiesThatDeclareMegabytesDoNotSpendTheBodyBudget(t *testing.T) {
	g, url := newGateway(t, nil, gateway.Options{MaxBodyMemory: 2 << 20})
	if err := g.SetTable(table()); err != nil {
		t.Fatal(err)
	}
	ctx := bounded(t)
	host := strings.TrimPrefix(url, "http://")
	for range 4 {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n{", host, 1<<20)
	}
	time.Sleep(200 * time.Millisecond)
	c, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp := post(t, c, url+"/mcp", "2026-07-28", "tools/list", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+meta2026+`}}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a small request while four bodies of a declared 1 MiB trickle in: status %d", resp.StatusCode)
	}
}

func TestAnIdleSessionFreesItsSlotAtTheSessionTimeout(t *testing.T) {
	g, url := newGateway(t, nil, gateway.Options{Sessions: true, MaxSessionsPerClient: 1, SessionTimeout: 500 * time.Millisecond})
	if err := g.SetTable(table()); err != nil {
		t.Fatal(err)
	}
	ctx := bounded(t)
	initialize := func() int {
		resp := post(t, ctx, url+"/mcp", "", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := initialize(); st != http.StatusOK {
		t.Fatalf("the first session: status %d", st)
	}
	if st := initialize(); st != http.StatusTooManyRequests {
		t.Fatalf("a second session from one address: status %d, want 429", st)
	}
	deadline := time.Now().Add(10 * time.Second)
	for initialize() != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("the idle session kept its slot past its timeout of 500ms")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tokenAuth takes a bearer token for the name of its caller, who may call
// everything.
type tokenAuth struct{}

func (tokenAuth) Authenticate(_ context.Context, token string) (*gateway.Caller, error) {
	return &gateway.Caller{User: token}, nil
}

func (tokenAuth) Allowed(context.Context, *gateway.Caller, string, string) (bool, error) {
	return true, nil
}

func TestStreamsAreBoundedPerCallerWhateverTheAddress(t *testing.T) {
	g, url := newGateway(t, nil, gateway.Options{Auth: tokenAuth{}, MaxStreamsPerClient: 2})
	if err := g.SetTable(table()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bounded(t))
	defer cancel()
	from := func(ip string) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	}
	listenAs := func(hc *http.Client, user string) int {
		body := `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{` + meta2026 + `,"notifications":{"toolsListChanged":true}}}`
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "subscriptions/listen")
		req.Header.Set("Authorization", "Bearer "+user)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp.StatusCode
	}
	a, b := from("127.0.0.1"), from("127.0.0.2")
	for i, c := range []*http.Client{a, b} {
		if st := listenAs(c, "alice"); st != http.StatusOK {
			t.Fatalf("alice's stream %d: status %d", i, st)
		}
	}
	if st := listenAs(b, "alice"); st != http.StatusTooManyRequests {
		t.Errorf("alice's third stream, from a second address: status %d, want 429", st)
	}
	if st := listenAs(b, "bob"); st != http.StatusOK {
		t.Errorf("bob's first stream from that address: status %d", st)
	}
}
