package gateway_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit/discovery"
	"github.com/toolplane/toolplane/toolkit/spec"
)

func TestListAndCallThroughTheGateway(t *testing.T) {
	crm := newWorkload(t, "crm", "crm-tools", "crm_", echoTool("crm"), headerTool("headers"))
	weather := newWorkload(t, "weather", "weather-tools", "", echoTool("weather"))
	tbl := table(crm.tableTools(), weather.tableTools())
	g, url := newGateway(t, new(routes).add(crm, weather), gateway.Options{})
	if err := g.SetTable(tbl); err != nil {
		t.Fatal(err)
	}
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			cs := connect(t, url+"/mcp", era, nil, nil)
			got, _ := listAll(t, cs)
			if want := names(tbl); !slices.Equal(got, want) {
				t.Errorf("tools/list gives %v, want the table's %v", got, want)
			}

			// The prefixed name reaches the crm workload as echo, with
			// sloppy arguments repaired by the workload, and an int64
			// beyond float64's exact range intact.
			res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "crm_echo", Arguments: json.RawMessage(`{"text":"ab","count":"2","big":"9007199254740993"}`)})
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError {
				t.Fatalf("crm_echo: %s", text(res))
			}
			if !strings.Contains(text(res), "9007199254740993") {
				t.Errorf("text %s", text(res))
			}
			direct := invoke(t, crm, "echo", `{"text":"ab","count":"2","big":"9007199254740993",}`)
			if text(res) != direct.Text() {
				t.Errorf("through the gateway %q, straight %q", text(res), direct.Text())
			}

			res, err = cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}})
			if err != nil || res.IsError || !strings.Contains(text(res), `"server":"weather"`) {
				t.Errorf("echo: %v %s", err, text(res))
			}

			// A tool's own error comes back as the workload's isError result.
			res, err = cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"count": "many"}})
			if err != nil || !res.IsError || !strings.Contains(text(res), "count") {
				t.Errorf("bad arguments: %v %+v", err, res)
			}

			if _, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "nope"}); err == nil {
				t.Error("calling an unknown tool did not fail")
			}
		})
	}
}

// TestStructuredContentPassesExactly reads the gateway's reply as bytes: a
// Go client would decode the numbers of structuredContent as float64.
func TestStructuredContentPassesExactly(t *testing.T) {
	wl := newWorkload(t, "crm", "crm-tools", "", echoTool("crm"))
	g, url := newGateway(t, new(routes).add(wl), gateway.Options{})
	if err := g.SetTable(table(wl.tableTools())); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(bounded(t), http.MethodPost, url+"/mcp",
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a","big":9007199254740993}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `"structuredContent":{"echo":"a","big":9007199254740993,"server":"crm"}`) {
		t.Errorf("reply %d %s", resp.StatusCode, body)
	}
}

func TestCallerAuthorizationIsNeverForwarded(t *testing.T) {
	wl := newWorkload(t, "crm", "crm-tools", "", headerTool("headers"))
	g, url := newGateway(t, new(routes).add(wl), gateway.Options{})
	if err := g.SetTable(table(wl.tableTools())); err != nil {
		t.Fatal(err)
	}
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	hc := &http.Client{Transport: headerTransport{"Authorization": "Bearer secret-token", "Traceparent": traceparent, "X-Custom": "x"}}
	cs := connect(t, url+"/mcp", "2026-07-28", nil, hc)
	res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "headers"})
	if err != nil || res.IsError {
		t.Fatalf("%v %s", err, text(res))
	}
	got := text(res)
	if strings.Contains(got, "secret-token") || strings.Contains(got, "Authorization") || strings.Contains(got, "X-Custom") {
		t.Errorf("the workload got the caller's header:\n%s", got)
	}
	// The trace is the caller's; the span id is the caller's too, since
	// the gateway creates no span of its own without a tracer provider.
	if !strings.Contains(got, "4bf92f3577b34da6a3ce929d0e0e4736") {
		t.Errorf("the workload got no trace context:\n%s", got)
	}
}

func TestDeadAndHungWorkloadsGiveErrorResultsWithinTheTimeout(t *testing.T) {
	hung := newWorkload(t, "slow", "slow-tools", "", hangTool())
	dead := newWorkload(t, "gone", "gone-tools", "", echoTool("gone"))
	r := new(routes).add(hung, dead)
	dead.srv.Close()
	g, url := newGateway(t, r, gateway.Options{CallTimeout: 2 * time.Second})
	if err := g.SetTable(table(hung.tableTools(), dead.tableTools())); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, url+"/mcp", "2026-07-28", nil, nil)
	for _, tc := range []struct{ tool, owner, why string }{
		{"hang", "slow/slow-tools", "did not answer within the gateway's call timeout of 2s"},
		{"echo", "gone/gone-tools", "unreachable"},
	} {
		res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: tc.tool, Arguments: map[string]any{}})
		if err != nil {
			t.Fatalf("%s: %v", tc.tool, err)
		}
		if !res.IsError || !strings.Contains(text(res), tc.tool) || !strings.Contains(text(res), tc.owner) || !strings.Contains(text(res), tc.why) {
			t.Errorf("%s: %+v %q", tc.tool, res.IsError, text(res))
		}
	}
}

func TestTenThousandToolsListCompletely(t *testing.T) {
	tools := make([]spec.TableTool, 10_000)
	for i := range tools {
		name := fmt.Sprintf("tool_%05d", i)
		ns := fmt.Sprintf("team-%d", i%7)
		tools[i] = spec.TableTool{
			Name: name, SourceName: name, Description: "A tool", InputSchema: json.RawMessage(`{"type":"object"}`),
			ToolSet:   spec.ObjectReference{Namespace: ns, Name: "tools"},
			Endpoints: &spec.Endpoints{Invoke: "http://tools." + ns + ".svc:8080/tools/" + name, MCP: "http://tools." + ns + ".svc:8080/mcp"},
		}
	}
	tbl := table(tools)
	g, url := newGateway(t, nil, gateway.Options{PageSize: 250})
	if err := g.SetTable(tbl); err != nil {
		t.Fatal(err)
	}
	for _, era := range eras {
		cs := connect(t, url+"/mcp", era, nil, nil)
		got, pages := listAll(t, cs)
		if !slices.Equal(got, names(tbl)) {
			t.Errorf("%s: listed %d tools in %d pages, want the table's %d in order", era, len(got), pages, len(tbl.Tools))
		}
		if pages != 40 {
			t.Errorf("%s: %d pages of 250, want 40", era, pages)
		}
	}
	// The 2026 cache fields: without authentication the list is the same
	// for everyone.
	cs := connect(t, url+"/mcp", "2026-07-28", nil, nil)
	res, err := cs.ListTools(bounded(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.CacheScope != "public" || res.TTLMs != int(gateway.DefaultListTTL.Milliseconds()) {
		t.Errorf("cacheScope %q ttlMs %d", res.CacheScope, res.TTLMs)
	}
	if _, err := cs.ListTools(bounded(t), &mcp.ListToolsParams{Cursor: "!!"}); err == nil {
		t.Error("a malformed cursor was accepted")
	}
}

func TestViews(t *testing.T) {
	a := newWorkload(t, "crm", "crm-tools", "crm_", echoTool("crm"))
	b := newWorkload(t, "crm", "assistant", "", headerTool("headers"))
	c := newWorkload(t, "weather", "weather-tools", "", echoTool("weather"))
	g, url := newGateway(t, new(routes).add(a, b, c), gateway.Options{})
	if err := g.SetTable(table(a.tableTools(), b.tableTools(), c.tableTools())); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want []string
	}{
		{"/mcp", []string{"crm_echo", "echo", "headers"}},
		{"/mcp/namespaces/crm", []string{"crm_echo", "headers"}},
		{"/mcp/namespaces/nobody", nil},
		{"/mcp/toolsets/crm/assistant", []string{"headers"}},
		{"/mcp/toolsets/weather/weather-tools", []string{"echo"}},
	} {
		cs := connect(t, url+tc.path, "2026-07-28", nil, nil)
		if got, _ := listAll(t, cs); !slices.Equal(got, tc.want) {
			t.Errorf("%s lists %v, want %v", tc.path, got, tc.want)
		}
	}
	cs := connect(t, url+"/mcp/namespaces/crm", "2025-11-25", nil, nil)
	if _, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}); err == nil {
		t.Error("a tool outside the view was called")
	}
	if res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "crm_echo", Arguments: map[string]any{"text": "x"}}); err != nil || res.IsError {
		t.Errorf("a tool of the view: %v %+v", err, res)
	}
}

func TestListChangedAndOwnerChange(t *testing.T) {
	first := newWorkload(t, "team-a", "tools", "", echoTool("first"))
	second := newWorkload(t, "team-b", "tools", "", echoTool("second"))
	tables := []*spec.Table{table(first.tableTools()), table(second.tableTools())}
	servers := []string{`"server":"first"`, `"server":"second"`}
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			g, url := newGateway(t, new(routes).add(first, second), gateway.Options{Sessions: true})
			if err := g.SetTable(tables[0]); err != nil {
				t.Fatal(err)
			}
			changed := make(chan struct{}, 1)
			cs := connect(t, url+"/mcp", era, changed, nil)
			if res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}); err != nil || !strings.Contains(text(res), servers[0]) {
				t.Fatalf("before: %v %s", err, text(res))
			}
			// The client's stream may not be open yet when the table
			// changes: change it back and forth until a notification comes.
			cur := 0
			deadline := time.Now().Add(60 * time.Second)
			for got := false; !got; {
				cur = 1 - cur
				if err := g.SetTable(tables[cur]); err != nil {
					t.Fatal(err)
				}
				select {
				case <-changed:
					got = true
				case <-time.After(time.Second):
					if time.Now().After(deadline) {
						t.Fatal("no list_changed within 60s")
					}
				}
			}
			// The owner changed with the table: the route moved with it.
			if res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}); err != nil || !strings.Contains(text(res), servers[cur]) {
				t.Errorf("after the change: %v %s, want %s", err, text(res), servers[cur])
			}
		})
	}
}

func TestInvalidTableIsRefusedAndTheLastGoodKept(t *testing.T) {
	wl := newWorkload(t, "crm", "crm-tools", "", echoTool("crm"))
	g, _ := newGateway(t, new(routes).add(wl), gateway.Options{})
	if g.Ready() {
		t.Error("ready without a table")
	}
	good := table(wl.tableTools())
	if err := g.SetTable(good); err != nil {
		t.Fatal(err)
	}
	bad := table(wl.tableTools(), wl.tableTools())
	if err := g.SetTable(bad); err == nil {
		t.Error("a table with a duplicate name was accepted")
	}
	if g.Revision() != good.Revision || !g.Ready() {
		t.Errorf("revision %s after a bad update, want %s", g.Revision(), good.Revision)
	}
}

func TestEndpointsOutsideTheOwnersNamespaceAreNotRouted(t *testing.T) {
	wl := newWorkload(t, "crm", "crm-tools", "", echoTool("crm"))
	tools := wl.tableTools()
	evil := tools[0]
	evil.Name = "evil"
	evil.Endpoints = &spec.Endpoints{Invoke: "http://crm-tools.crm.svc:8080/tools/echo"}
	evil.ToolSet = spec.ObjectReference{Namespace: "elsewhere", Name: "x"}
	g, url := newGateway(t, new(routes).add(wl), gateway.Options{})
	if err := g.SetTable(table(tools, []spec.TableTool{evil})); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, url+"/mcp", "2026-07-28", nil, nil)
	if got, _ := listAll(t, cs); !slices.Equal(got, []string{"echo"}) {
		t.Errorf("listed %v", got)
	}
	if _, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "evil"}); err == nil {
		t.Error("a tool routed outside its namespace was called")
	}
}

// The gateway refuses exactly what toolkit/discovery refuses: a name with
// more labels after ".svc", or another cluster domain, is no Service of
// the tool's namespace, however the dialer would resolve it. Both the
// gateway and a discovery client are given the same table.
func TestTheGatewayRoutesOnlyWhatDiscoveryWouldCall(t *testing.T) {
	wl := newWorkload(t, "crm", "tools", "", echoTool("echo"))
	base := wl.tableTools()[0]
	endpoints := map[string]bool{
		"http://tools.crm.svc.cluster.local:8080/tools/echo":                  true,
		"http://tools.crm.svc:8080/tools/echo":                                true, // an older table's name, dialed fully qualified
		"http://tools.crm.svc.attacker.example:8080/tools/echo":               false,
		"http://tools.crm.svc.cluster.local.attacker.example:8080/tools/echo": false,
		"http://tools.crm.svc.corp.example:8080/tools/echo":                   false,
		"http://x.tools.crm.svc.cluster.local:8080/tools/echo":                false,
	}
	r := new(routes).add(wl)
	var tools []spec.TableTool
	i := 0
	for e := range endpoints {
		tt := base
		tt.Name = fmt.Sprintf("t%d", i)
		tt.Endpoints = &spec.Endpoints{Invoke: e, MCP: e}
		tools = append(tools, tt)
		// Whatever the dialer would reach for the name, the gateway must
		// not ask for it.
		if u, err := url.Parse(e); err == nil {
			r.set(u.Host, wl.srv.Listener.Addr().String())
		}
		i++
	}
	g, gwURL := newGateway(t, r, gateway.Options{})
	tbl := table(tools)
	if err := g.SetTable(tbl); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, gwURL+"/mcp", "2026-07-28", nil, nil)
	// The client's transport never connects: only its refusal counts.
	dc := discovery.Client{HTTPClient: &http.Client{Transport: &http.Transport{
		DialContext: func(context.Context, string, string) (net.Conn, error) { return nil, errors.New("not dialed") },
	}}}
	if err := dc.SetTable(tbl); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tbl.Tools {
		want := endpoints[tt.Endpoints.Invoke]
		res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: tt.Name, Arguments: map[string]any{"text": "a", "count": 1}})
		routed := err == nil && !res.IsError
		_, derr := dc.Call(bounded(t), tt.Name, nil)
		if routed != want || errors.Is(derr, discovery.ErrForeignEndpoint) == want {
			t.Errorf("%s: routed by the gateway %v (%v), refused by discovery %v; want routed %v", tt.Endpoints.Invoke, routed, err, derr, want)
		}
	}
}

func TestTableEndpoint(t *testing.T) {
	wl := newWorkload(t, "crm", "crm-tools", "crm_", echoTool("crm"), headerTool("headers"))
	g, url := newGateway(t, new(routes).add(wl), gateway.Options{})
	resp := get(t, url+"/v1/tools", nil)
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("before a table: %d", resp.StatusCode)
	}
	tbl := table(wl.tableTools())
	if err := g.SetTable(tbl); err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(tbl)

	resp = get(t, url+"/v1/tools", http.Header{"Accept-Encoding": {"identity"}})
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, want) {
		t.Errorf("GET /v1/tools: %d %s", resp.StatusCode, body)
	}
	etag := resp.Header.Get("ETag")
	if etag != spec.ETag(tbl.Revision) {
		t.Errorf("ETag %s, want %s", etag, spec.ETag(tbl.Revision))
	}
	if resp := get(t, url+"/v1/tools", http.Header{"If-None-Match": {etag}}); resp.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match: %d", resp.StatusCode)
	}
	resp = get(t, url+"/v1/tools", http.Header{"Accept-Encoding": {"gzip"}})
	if resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("Content-Encoding %q", resp.Header.Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if body, _ := io.ReadAll(zr); !bytes.Equal(body, want) {
		t.Errorf("gzipped body differs")
	}
}

func get(t *testing.T, url string, h http.Header) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(bounded(t), http.MethodGet, url, nil)
	for k, v := range h {
		req.Header[k] = v
	}
	// A transport of its own, so that it does not add or undo gzip.
	resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func invoke(t *testing.T, w *workload, tool, args string) *spec.CallResult {
	t.Helper()
	resp, err := http.Post(w.srv.URL+spec.InvokePrefix+tool, "application/json", strings.NewReader(args))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res spec.CallResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		t.Fatal(err)
	}
	return &res
}

// headerTransport adds headers to every request, as a client's own.
type headerTransport map[string]string

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}
