package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/server"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// countingServer serves one tool, "touch", that counts its calls, so that a
// test can tell a refused request from one that ran the tool.
func countingServer(t *testing.T, opts *server.Options) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	reg := new(toolkit.Registry)
	if err := reg.Add(must(toolkit.NewAction("touch", "Count a call", func(context.Context, struct{}) error {
		calls.Add(1)
		return nil
	}))); err != nil {
		t.Fatal(err)
	}
	h := server.New(reg, opts)
	srv := httptest.NewServer(h)
	t.Cleanup(func() { h.Close(); srv.Close() })
	return srv, &calls
}

func post(t *testing.T, srv *httptest.Server, header ...string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+spec.InvokePrefix+"touch", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestInvokeRefusesWhatAWebPageSends(t *testing.T) {
	const json, text = "application/json", "text/plain"
	cases := []struct {
		name   string
		opts   *server.Options
		header []string
		status int
	}{
		{"a cross-origin text/plain POST, as any web page may send", nil,
			[]string{"Content-Type", text, "Origin", "http://evil.example"}, http.StatusForbidden},
		{"a cross-site JSON POST that a browser marks", nil,
			[]string{"Content-Type", json, "Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
		{"a foreign Host on loopback (DNS rebinding)", nil,
			[]string{"Content-Type", json, "Host", "evil.example:8080"}, http.StatusForbidden},
		{"a text/plain body without Origin", nil,
			[]string{"Content-Type", text}, http.StatusUnsupportedMediaType},
		{"a form body", nil,
			[]string{"Content-Type", "application/x-www-form-urlencoded"}, http.StatusUnsupportedMediaType},
		{"no Content-Type", nil, nil, http.StatusUnsupportedMediaType},

		{"JSON from an agent", nil, []string{"Content-Type", json}, http.StatusOK},
		{"JSON with parameters", nil, []string{"Content-Type", "application/json; charset=utf-8"}, http.StatusOK},
		{"JSON from a same-origin page", nil,
			[]string{"Content-Type", json, "Sec-Fetch-Site", "same-origin"}, http.StatusOK},
		{"localhost as Host", nil, []string{"Content-Type", json, "Host", "localhost:8080"}, http.StatusOK},

		{"AllowCrossOrigin lets a cross-site JSON POST in", &server.Options{AllowCrossOrigin: true},
			[]string{"Content-Type", json, "Origin", "http://evil.example"}, http.StatusOK},
		{"a trusted origin passes", &server.Options{CrossOriginProtection: trusting("https://app.example")},
			[]string{"Content-Type", json, "Origin", "https://app.example"}, http.StatusOK},
		{"an origin not trusted is still refused", &server.Options{CrossOriginProtection: trusting("https://app.example")},
			[]string{"Content-Type", json, "Origin", "https://other.example"}, http.StatusForbidden},
		{"AllowAnyContentType takes text/plain", &server.Options{AllowAnyContentType: true},
			[]string{"Content-Type", text}, http.StatusOK},
		{"AllowAnyHostOnLoopback takes a foreign Host", &server.Options{AllowAnyHostOnLoopback: true},
			[]string{"Content-Type", json, "Host", "tools.crm.svc:8080"}, http.StatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, calls := countingServer(t, tc.opts)
			if got := post(t, srv, tc.header...); got != tc.status {
				t.Fatalf("status %d, want %d", got, tc.status)
			}
			ran := calls.Load() == 1
			if ran != (tc.status == http.StatusOK) {
				t.Errorf("the tool ran: %v, with status %d", ran, tc.status)
			}
		})
	}
}

func trusting(origin string) *http.CrossOriginProtection {
	p := http.NewCrossOriginProtection()
	if err := p.AddTrustedOrigin(origin); err != nil {
		panic(err)
	}
	return p
}

func TestNewRefusesNegativeOptions(t *testing.T) {
	for _, o := range []server.Options{{MaxBodyBytes: -1}, {SessionTimeout: -1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("server.New(%+v) accepted a negative value", o)
				}
			}()
			server.New(new(toolkit.Registry), &o)
		}()
	}
}

// A panic in middleware is a panic on the SDK's handler goroutine, which
// has no recover: unless the registry recovers it, it ends the process.
func TestMiddlewarePanicKeepsTheServerServing(t *testing.T) {
	reg := new(toolkit.Registry)
	reg.Use(func(next toolkit.CallHandler) toolkit.CallHandler {
		return func(ctx context.Context, req *toolkit.Request) (*spec.CallResult, error) {
			if strings.Contains(string(req.Arguments), "boom") {
				panic("middleware bug")
			}
			return next(ctx, req)
		}
	})
	if err := reg.Add(must(toolkit.New("say", "Say it", func(_ context.Context, in nameIn) (string, error) {
		if in.Name == "tool-boom" {
			panic("tool bug")
		}
		return "said " + in.Name, nil
	}))); err != nil {
		t.Fatal(err)
	}
	h := server.New(reg, nil)
	srv := httptest.NewServer(h)
	t.Cleanup(func() { h.Close(); srv.Close() })
	s := &testServer{Server: srv, reg: reg, h: h}

	t.Run("invoke", func(t *testing.T) {
		for _, name := range []string{"boom", "tool-boom"} {
			res := s.invoke(t, "say", `{"name":"`+name+`"}`)
			if !res.IsError || !strings.Contains(res.Text(), "internal error") || strings.Contains(res.Text(), "bug") {
				t.Errorf("%s: %+v", name, res)
			}
		}
		if res := s.invoke(t, "say", `{"name":"x"}`); res.IsError || res.Text() != "said x" {
			t.Errorf("after the panics: %+v", res)
		}
	})
	for _, version := range protocolVersions {
		t.Run("mcp "+version, func(t *testing.T) {
			cs := connect(t, srv.URL, version, nil)
			for _, name := range []string{"boom", "tool-boom"} {
				res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "say", Arguments: map[string]any{"name": name}})
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if !res.IsError || !strings.Contains(mcpText(res), "internal error") {
					t.Errorf("%s: %+v", name, res)
				}
			}
			res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "say", Arguments: map[string]any{"name": "x"}})
			if err != nil || res.IsError || mcpText(res) != "said x" {
				t.Errorf("after the panics: %+v, %v", res, err)
			}
		})
	}
}

func mcpText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}
