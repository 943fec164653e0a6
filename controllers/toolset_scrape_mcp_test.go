package controllers

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/internal/credentials"
	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/server"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// requireInterop skips a test without the npm servers, and fails it in CI.
func requireInterop(t *testing.T) {
	t.Helper()
	if err := interopInstalled(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

func mcpTarget(maxTools int32, timeout time.Duration) scrapeTarget {
	return scrapeTarget{
		spec:    &v1alpha1.ToolSetSpec{Protocol: v1alpha1.ProtocolMCP, Scheme: "http", Limits: v1alpha1.Limits{MaxTools: maxTools}},
		timeout: timeout,
		creds:   &credentials.Credentials{BearerToken: "t0ken"},
	}
}

func listMCPOnce(s *scraper, tgt scrapeTarget, url string, prev *spec.Document) (*spec.Document, error) {
	c := tgt.httpClient()
	defer c.CloseIdleConnections()
	return s.listMCP(context.Background(), c, tgt, url, prev)
}

func toolNames(doc *spec.Document) []string {
	names := []string{}
	for _, t := range doc.Tools {
		names = append(names, t.Name)
	}
	return names
}

func TestListMCPFromTheTypeScriptSDK(t *testing.T) {
	requireInterop(t)
	for _, mode := range []string{"sessions", "stateless"} {
		t.Run(mode, func(t *testing.T) {
			args := []string{"--page-size", "2"}
			if mode == "stateless" {
				args = append(args, "--stateless")
			}
			srv, err := startTSServer(context.Background(), args...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(srv.stop)
			var tools []spec.Tool
			for _, n := range []string{"e", "d", "c", "b", "a"} {
				tools = append(tools, tool(n))
			}
			if err := srv.setTools(tools...); err != nil {
				t.Fatal(err)
			}
			url := srv.base() + "/mcp"
			doc, err := listMCPOnce(newScraper(1, 0), mcpTarget(5, 10*time.Second), url, nil)
			if err != nil {
				t.Fatalf("listMCP: %v; server: %s", err, srv.log.String())
			}
			if got := strings.Join(toolNames(doc), ","); got != "a,b,c,d,e" {
				t.Fatalf("tools = %s, want every page, sorted", got)
			}
			if doc.Server.Name != "toolplane-ts-interop" || !strings.HasPrefix(doc.Revision, "sha256:") {
				t.Fatalf("server %+v, revision %q", doc.Server, doc.Revision)
			}
			if string(doc.Tools[0].InputSchema) != `{"properties":{"q":{"type":"string"}},"type":"object"}` {
				t.Fatalf("input schema = %s", doc.Tools[0].InputSchema)
			}
			again, err := listMCPOnce(newScraper(1, 0), mcpTarget(5, 10*time.Second), url, doc)
			if err != nil || again != doc {
				t.Fatalf("an unchanged list gives the previous document itself: %p %v", again, err)
			}
			st, err := srv.stats()
			if err != nil {
				t.Fatal(err)
			}
			if st.Lists != 6 {
				t.Errorf("tools/list calls = %d, want 3 pages twice", st.Lists)
			}
			if mode == "sessions" && (st.Sessions != 2 || st.Deletes != 2 || st.Open != 0) {
				t.Errorf("sessions %+v: want each scrape's session ended with a DELETE", st)
			}

			_, err = listMCPOnce(newScraper(1, 0), mcpTarget(4, 10*time.Second), url, nil)
			if scrapeReason(err) != scrapeErrTooMany || !strings.Contains(err.Error(), "limits.maxTools 4") {
				t.Fatalf("five tools over maxTools 4: %v", err)
			}
		})
	}
}

func TestListMCPFromServerEverything(t *testing.T) {
	requireInterop(t)
	srv, err := startEverythingServer(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.stop)
	doc, err := listMCPOnce(newScraper(1, 0), mcpTarget(256, 10*time.Second), srv.base()+"/mcp", nil)
	if err != nil {
		t.Fatalf("listMCP: %v; server: %s", err, srv.log.String())
	}
	names := toolNames(doc)
	for _, want := range []string{"echo", "get-sum", "get-tiny-image"} {
		found := false
		for _, n := range names {
			found = found || n == want
		}
		if !found {
			t.Errorf("tools %v lack %q", names, want)
		}
	}
	for _, tl := range doc.Tools {
		if err := validateTool(tl.Name, tl, v1alpha1.Limits{MaxSchemaBytes: 65536}, defaultToolBounds); err != nil {
			t.Errorf("tool %s: %v", tl.Name, err)
		}
	}
}

func TestListMCPFromAGoSDKServerOfTheNewEra(t *testing.T) {
	reg := new(toolkit.Registry)
	if err := reg.Add(toolkit.MustNewDynamic("go_tool", "A tool.", json.RawMessage(`{"type":"object"}`),
		func(context.Context, map[string]any) (any, error) { return "ok", nil })); err != nil {
		t.Fatal(err)
	}
	h := server.New(reg, &server.Options{Name: "go-tools"})
	t.Cleanup(func() { _ = h.Close() })
	var auth atomic.Value
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	tgt := mcpTarget(0, 10*time.Second)
	tgt.spec.Scheme = "https"
	tgt.creds.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	doc, err := listMCPOnce(newScraper(1, 0), tgt, srv.URL+spec.MCPPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(toolNames(doc), ","); got != "go_tool" || doc.Server.Name != "go-tools" {
		t.Fatalf("tools %s of server %+v", got, doc.Server)
	}
	if auth.Load() != "Bearer t0ken" {
		t.Fatalf("Authorization %q, want the ToolSet's token over https", auth.Load())
	}

	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(plain.Close)
	if _, err := listMCPOnce(newScraper(1, 0), mcpTarget(0, 10*time.Second), plain.URL+spec.MCPPath, nil); err != nil {
		t.Fatal(err)
	}
	if auth.Load() != "" {
		t.Fatalf("Authorization %q over http, want none", auth.Load())
	}
}

// hostileMCP is a Go SDK server whose tools/list a test replaces.
func hostileMCP(t *testing.T, list func(ctx context.Context, req *mcp.ListToolsRequest) (*mcp.ListToolsResult, error)) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "hostile"}, nil)
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" {
				return list(ctx, req.(*mcp.ListToolsRequest))
			}
			return next(ctx, method, req)
		}
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

func TestListMCPFromHostileServers(t *testing.T) {
	t.Run("endless pagination ends at the page bound", func(t *testing.T) {
		var pages atomic.Int64
		url := hostileMCP(t, func(_ context.Context, req *mcp.ListToolsRequest) (*mcp.ListToolsResult, error) {
			return &mcp.ListToolsResult{Tools: []*mcp.Tool{}, NextCursor: fmt.Sprint("p", pages.Add(1))}, nil
		})
		_, err := listMCPOnce(newScraper(1, 0), mcpTarget(10, time.Minute), url, nil)
		if scrapeReason(err) != scrapeErrTooMany || !strings.Contains(err.Error(), "pages") {
			t.Fatalf("got %v", err)
		}
		if n := pages.Load(); n != 11 {
			t.Fatalf("%d pages asked for, want maxTools 10 and the last", n)
		}
		pages.Store(0)
		_, err = listMCPOnce(newScraper(1, 0), mcpTarget(0, time.Minute), url, nil)
		if scrapeReason(err) != scrapeErrTooMany || pages.Load() != maxMCPPages {
			t.Fatalf("with no maxTools: %v after %d pages, want %d", err, pages.Load(), maxMCPPages)
		}
	})
	t.Run("a list past the response size fails as too large", func(t *testing.T) {
		big := strings.Repeat("x", 1<<20)
		url := hostileMCP(t, func(context.Context, *mcp.ListToolsRequest) (*mcp.ListToolsResult, error) {
			return &mcp.ListToolsResult{Tools: []*mcp.Tool{{Name: "big", Description: big, InputSchema: map[string]any{"type": "object"}}}}, nil
		})
		_, err := listMCPOnce(newScraper(1, 64<<10), mcpTarget(10, 10*time.Second), url, nil)
		if scrapeReason(err) != scrapeErrTooLarge || !errors.Is(err, errTooLarge) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("a page of maps within the response size fails before the SDK decodes it", func(t *testing.T) {
		// 4 MiB of {"a":0} objects: within --max-response-bytes, and some
		// 180 MiB once decoded into maps. It is refused after its first
		// hundred KiB or so, as too large.
		const limit = 4 << 20
		var served atomic.Int64
		srv := rawMCPServer(t, "2025-06-18", "maps", func(w http.ResponseWriter, id json.RawMessage) {
			head := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"t","inputSchema":{"type":"object","x":[`, id)
			item := `{"a":0},`
			n, _ := io.WriteString(w, head)
			for i := 0; i < (limit-len(head)-4096)/len(item); i++ {
				k, err := io.WriteString(w, item)
				n += k
				if err != nil {
					break
				}
			}
			m, _ := io.WriteString(w, `{}]}}]}}`)
			served.Add(int64(n + m))
		})
		_, err := listMCPOnce(newScraper(1, limit), mcpTarget(10, 10*time.Second), srv.URL+"/mcp", nil)
		if scrapeReason(err) != scrapeErrTooLarge || !strings.Contains(err.Error(), "decode") {
			t.Fatalf("got %v (%s)", err, scrapeReason(err))
		}
	})
	t.Run("a server that never answers ends at the timeout", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			// Read the request, so that the server notices the client go.
			_, _ = io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
		}))
		t.Cleanup(srv.Close)
		start := time.Now()
		_, err := listMCPOnce(newScraper(1, 0), mcpTarget(10, 500*time.Millisecond), srv.URL+"/mcp", nil)
		if scrapeReason(err) != scrapeErrTimeout {
			t.Fatalf("got %v", err)
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Fatalf("took %v", d)
		}
	})
	t.Run("an invalid JSON-RPC reply is an invalid reply", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"jsonrpc":"1.0","id":"x","result":[`))
		}))
		t.Cleanup(srv.Close)
		_, err := listMCPOnce(newScraper(1, 0), mcpTarget(10, 5*time.Second), srv.URL+"/mcp", nil)
		if scrapeReason(err) != scrapeErrReply {
			t.Fatalf("got %v (%s)", err, scrapeReason(err))
		}
	})
	t.Run("an HTTP error is an http_status", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "nope", http.StatusForbidden)
		}))
		t.Cleanup(srv.Close)
		_, err := listMCPOnce(newScraper(1, 0), mcpTarget(10, 5*time.Second), srv.URL+"/mcp", nil)
		if scrapeReason(err) != scrapeErrHTTPStatus || !strings.Contains(err.Error(), "403") {
			t.Fatalf("got %v (%s)", err, scrapeReason(err))
		}
	})
}

// rawMCPServer is an MCP server written by hand, for replies no SDK sends:
// it answers initialize (and server/discover) as serverName at protocol
// version, tools/list with what list writes for the request's id, and
// anything else with 202 Accepted. The test closes it.
func rawMCPServer(t testing.TB, version, serverName string, list func(w http.ResponseWriter, id json.RawMessage)) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", "application/json")
		switch req.Method {
		case "server/discover", "initialize":
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":%q,"capabilities":{"tools":{}},"serverInfo":{"name":%q,"version":"1"}}}`, req.ID, version, serverName)
		case "tools/list":
			list(w, req.ID)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}
