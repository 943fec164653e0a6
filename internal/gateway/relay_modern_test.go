package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/internal/gateway"
)

// replyOf reads the JSON-RPC reply of a POST answered with JSON or with
// server-sent events, the last message with an id.
func replyOf(t *testing.T, resp *http.Response) map[string]any {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	msgs := [][]byte{b}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		msgs = nil
		for _, line := range bytes.Split(b, []byte("\n")) {
			if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
				msgs = append(msgs, d)
			}
		}
	}
	var last map[string]any
	for _, m := range msgs {
		var v map[string]any
		if json.Unmarshal(m, &v) == nil && v["id"] != nil {
			last = v
		}
	}
	if last == nil {
		t.Fatalf("no reply in %d %s", resp.StatusCode, b)
	}
	return last
}

// headerRecorder keeps the header and body of every tools/call request an
// MCP server gets.
type headerRecorder struct {
	mu     sync.Mutex
	header []http.Header
	bodies []string
}

func (h *headerRecorder) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		if bytes.Contains(b, []byte(`"tools/call"`)) {
			h.mu.Lock()
			h.header = append(h.header, r.Header.Clone())
			h.bodies = append(h.bodies, string(b))
			h.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

// TestModernProtocolDetails: 2026-07-28's resultType on every tools/call
// result, and nowhere in 2025; Mcp-Method and Mcp-Name on the calls to MCP
// servers, and checked on the client's; and a traceparent sent in _meta
// reaching the backend in its header and, for an MCP server, its _meta.
func TestModernProtocolDetails(t *testing.T) {
	wl := newWorkload(t, "crm", "crm-tools", "crm_", echoTool("crm"), headerTool("headers"))
	rec := &headerRecorder{}
	s := mcp.NewServer(&mcp.Implementation{Name: "go-meta"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "go_meta"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		tp, _ := req.Params.Meta["traceparent"].(string)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "traceparent=" + tp}}}, nil, nil
	})
	srv := httptest.NewServer(rec.wrap(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true, DisableLocalhostProtection: true})))
	t.Cleanup(srv.Close)
	r := new(routes).add(wl)
	r.set("gometa.apps.svc.cluster.local:8080", srv.Listener.Addr().String())
	g, url := newGateway(t, r, gateway.Options{})
	if err := g.SetTable(table(wl.tableTools(), mcpTableTools("apps", "gometa", "/mcp", "go_meta"))); err != nil {
		t.Fatal(err)
	}
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	call := func(name, mcpName, extraMeta string) *http.Response {
		args := `{}`
		if name == "crm_echo" {
			args = `{"text":"x"}`
		}
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + name + `","arguments":` + args + `,` +
			strings.Replace(meta2026, `"_meta":{`, `"_meta":{`+extraMeta, 1) + `}}`
		req, _ := http.NewRequestWithContext(bounded(t), http.MethodPost, url+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		if mcpName != "" {
			req.Header.Set("Mcp-Name", mcpName)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	result := func(reply map[string]any) map[string]any {
		res, _ := reply["result"].(map[string]any)
		if res == nil {
			t.Fatalf("no result: %v", reply)
		}
		return res
	}

	t.Run("resultType", func(t *testing.T) {
		for _, name := range []string{"crm_echo", "go_meta"} {
			res := result(replyOf(t, call(name, name, "")))
			if res["resultType"] != "complete" {
				t.Errorf("%s: resultType %v, want complete: %v", name, res["resultType"], res)
			}
		}
		// The gateway's own isError result too: a tool whose workload is gone.
		r.set("gone.apps.svc.cluster.local:8080", "127.0.0.1:1")
		tbl := table(wl.tableTools(), mcpTableTools("apps", "gometa", "/mcp", "go_meta"), mcpTableTools("apps", "gone", "/mcp", "gone_tool"))
		if err := g.SetTable(tbl); err != nil {
			t.Fatal(err)
		}
		if res := result(replyOf(t, call("gone_tool", "gone_tool", ""))); res["resultType"] != "complete" || res["isError"] != true {
			t.Errorf("the gateway's isError result: %v", res)
		}
		// A 2025 client gets none.
		reply := replyOf(t, post(t, bounded(t), url+"/mcp", "2025-11-25", "tools/call",
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"crm_echo","arguments":{"text":"x"}}}`))
		if res := result(reply); res["isError"] == true || res["resultType"] != nil {
			t.Errorf("a 2025 result: %v", res)
		}
	})

	t.Run("Mcp-Method and Mcp-Name", func(t *testing.T) {
		rec.mu.Lock()
		rec.header, rec.bodies = nil, nil
		rec.mu.Unlock()
		replyOf(t, call("go_meta", "go_meta", ""))
		rec.mu.Lock()
		if len(rec.header) != 1 || rec.header[0].Get("Mcp-Method") != "tools/call" || rec.header[0].Get("Mcp-Name") != "go_meta" {
			t.Errorf("the MCP server got %v", rec.header)
		}
		rec.mu.Unlock()
		// A client's Mcp-Name that is not the body's is refused, and so is
		// none.
		for _, name := range []string{"crm_headers", ""} {
			resp := call("crm_echo", name, "")
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "Mcp-Name") {
				t.Errorf("Mcp-Name %q: %d %s", name, resp.StatusCode, b)
			}
		}
	})

	t.Run("traceparent in _meta", func(t *testing.T) {
		res := result(replyOf(t, call("crm_headers", "crm_headers", `"traceparent":"`+traceparent+`",`)))
		b, _ := json.Marshal(res["content"])
		if !strings.Contains(string(b), "Traceparent="+traceparent) {
			t.Errorf("the toolkit workload's header: %s", b)
		}
		res = result(replyOf(t, call("go_meta", "go_meta", `"traceparent":"`+traceparent+`",`)))
		b, _ = json.Marshal(res["content"])
		if !strings.Contains(string(b), "traceparent="+traceparent) {
			t.Errorf("the MCP server's _meta: %s", b)
		}
		rec.mu.Lock()
		last := rec.header[len(rec.header)-1]
		rec.mu.Unlock()
		if last.Get("Traceparent") != traceparent {
			t.Errorf("the MCP server's header: %v", last)
		}
	})
}

// postCall posts a 2026-07-28 tools/call of name with body.
func postCall(t *testing.T, url, name, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(bounded(t), http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", name)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
