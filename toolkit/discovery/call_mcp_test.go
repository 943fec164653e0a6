package discovery_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/toolkit/discovery"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// richServer is an MCP server that toolkit did not write: its tool "look"
// answers with every content type, annotations and _meta included.
func richServer(t *testing.T, stateless bool) (*httptest.Server, *atomic.Value) {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "rich"}, nil)
	var gotArgs atomic.Value
	mcp.AddTool(s, &mcp.Tool{Name: "look", InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}}}`)},
		func(_ context.Context, req *mcp.CallToolRequest, in map[string]any) (*mcp.CallToolResult, any, error) {
			gotArgs.Store(string(req.Params.Arguments))
			return &mcp.CallToolResult{
				Content: []mcp.Content{
					&mcp.TextContent{Text: "look " + in["id"].(string), Annotations: &mcp.Annotations{Audience: []mcp.Role{"user"}}},
					&mcp.ImageContent{Data: []byte{0x89, 'P', 'N', 'G'}, MIMEType: "image/png", Meta: mcp.Meta{"k": "v"}},
					&mcp.AudioContent{Data: []byte("RIFF"), MIMEType: "audio/wav"},
					&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "mem://a", MIMEType: "text/plain", Text: "note"}},
					&mcp.ResourceLink{URI: "mem://doc", Name: "doc", Title: "Doc"},
				},
			}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "broken"}, func(context.Context, *mcp.CallToolRequest, map[string]any) (*mcp.CallToolResult, any, error) {
		return nil, nil, errors.New("it broke")
	})
	// The calls come in on loopback under the Service's name, as a dialer
	// maps it: no DNS rebinding to protect against.
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: stateless, DisableLocalhostProtection: true})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, &gotArgs
}

func mcpTable(names ...string) *spec.Table {
	var tools []spec.TableTool
	for _, n := range names {
		tools = append(tools, spec.TableTool{
			Name: "rich_" + n, SourceName: n, InputSchema: json.RawMessage(`{"type":"object"}`),
			ToolSet:   spec.ObjectReference{Namespace: "crm", Name: "rich"},
			Protocol:  spec.ProtocolMCP,
			Endpoints: &spec.Endpoints{MCP: crmService + "/mcp"},
		})
	}
	spec.SortTableTools(tools)
	return &spec.Table{SchemaVersion: spec.SchemaVersion, Revision: spec.TableRevision(tools), Tools: tools}
}

func TestCallOverMCP(t *testing.T) {
	for _, stateless := range []bool{false, true} {
		name := "sessions"
		if stateless {
			name = "stateless"
		}
		t.Run(name, func(t *testing.T) {
			srv, gotArgs := richServer(t, stateless)
			c := &discovery.Client{Timeout: 10 * time.Second, HTTPClient: clusterHTTP(srv)}
			if err := c.SetTable(mcpTable("look", "broken", "missing")); err != nil {
				t.Fatal(err)
			}
			res, err := c.Call(t.Context(), "rich_look", `{"id":"42"}`)
			if err != nil {
				t.Fatal(err)
			}
			if gotArgs.Load() != `{"id":"42"}` {
				t.Fatalf("the server got %v, want the arguments under the source name", gotArgs.Load())
			}
			// A 2026-07-28 server says who it is in the result's _meta, and
			// that passes on too; the rest is the same in both eras.
			if stateless && res.Meta["io.modelcontextprotocol/serverInfo"] == nil {
				t.Errorf("the result's _meta was dropped: %v", res.Meta)
			}
			res.Meta = nil
			b, err := json.Marshal(res)
			if err != nil {
				t.Fatal(err)
			}
			want := `{"content":[` +
				`{"annotations":{"audience":["user"]},"text":"look 42","type":"text"},` +
				`{"_meta":{"k":"v"},"data":"iVBORw==","mimeType":"image/png","type":"image"},` +
				`{"data":"UklGRg==","mimeType":"audio/wav","type":"audio"},` +
				`{"type":"resource","resource":{"uri":"mem://a","mimeType":"text/plain","text":"note"}},` +
				`{"name":"doc","title":"Doc","type":"resource_link","uri":"mem://doc"}` +
				`],"isError":false}`
			if !jsonEqual(t, string(b), want) {
				t.Fatalf("result\n%s\nwant\n%s", b, want)
			}

			res, err = c.Call(t.Context(), "rich_broken", nil)
			if err != nil || !res.IsError || !strings.Contains(res.Text(), "it broke") {
				t.Fatalf("a failing tool: %+v, %v; want an IsError result", res, err)
			}
			if _, err := c.Call(t.Context(), "rich_missing", nil); err == nil {
				t.Fatal("a tool the server does not have: want an error")
			}
			if _, err := c.Call(t.Context(), "rich_look", `[1,2]`); !errors.Is(err, discovery.ErrBadRequest) {
				t.Fatalf("arguments that are no object: %v", err)
			}
		})
	}
}

func TestCallOverMCPIsBounded(t *testing.T) {
	t.Run("the reply", func(t *testing.T) {
		s := mcp.NewServer(&mcp.Implementation{Name: "big"}, nil)
		mcp.AddTool(s, &mcp.Tool{Name: "big"}, func(context.Context, *mcp.CallToolRequest, map[string]any) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", 1<<20)}}}, nil, nil
		})
		srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true, DisableLocalhostProtection: true}))
		t.Cleanup(srv.Close)
		c := &discovery.Client{Timeout: 10 * time.Second, MaxResponseBytes: 64 << 10, HTTPClient: clusterHTTP(srv)}
		if err := c.SetTable(mcpTable("big")); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Call(t.Context(), "rich_big", nil); !errors.Is(err, discovery.ErrResponseTooLarge) {
			t.Fatalf("got %v, want ErrResponseTooLarge", err)
		}
	})
	t.Run("the time", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			_, _ = r.Body.Read(make([]byte, 1<<16))
			<-r.Context().Done()
		}))
		t.Cleanup(srv.Close)
		c := &discovery.Client{Timeout: 300 * time.Millisecond, HTTPClient: clusterHTTP(srv)}
		if err := c.SetTable(mcpTable("hung")); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Call(t.Context(), "rich_hung", nil); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want the deadline", err)
		}
	})
	t.Run("redirects", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://elsewhere.invalid/mcp", http.StatusTemporaryRedirect)
		}))
		t.Cleanup(srv.Close)
		c := &discovery.Client{Timeout: 5 * time.Second, HTTPClient: clusterHTTP(srv)}
		if err := c.SetTable(mcpTable("moved")); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Call(t.Context(), "rich_moved", nil); !errors.Is(err, discovery.ErrRedirect) {
			t.Fatalf("got %v, want ErrRedirect", err)
		}
	})
	t.Run("the endpoint's host", func(t *testing.T) {
		table := mcpTable("foreign")
		table.Tools[0].Endpoints.MCP = "http://metadata.internal/mcp"
		c := &discovery.Client{}
		if err := c.SetTable(table); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Call(t.Context(), "rich_foreign", nil); !errors.Is(err, discovery.ErrForeignEndpoint) {
			t.Fatalf("got %v, want ErrForeignEndpoint", err)
		}
	})
}

func jsonEqual(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatal(err)
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

// TestCallOverMCPKeepsStructuredContentExact calls an MCP server whose
// structuredContent holds 2^53 + 1, which the SDK's decoding into any
// rounds to 2^53: the caller hands it on as the server sent it, whether the
// reply is a JSON body or a stream of events.
func TestCallOverMCPKeepsStructuredContentExact(t *testing.T) {
	const structured = `{"id":9007199254740993,"ids":[9007199254740993,1.5e300],"note":"x"}`
	for _, tc := range []struct {
		name string
		opts mcp.StreamableHTTPOptions
	}{
		{"sessions, events", mcp.StreamableHTTPOptions{}},
		{"sessions, JSON", mcp.StreamableHTTPOptions{JSONResponse: true}},
		{"stateless, events", mcp.StreamableHTTPOptions{Stateless: true}},
		{"stateless, JSON", mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mcp.NewServer(&mcp.Implementation{Name: "orders"}, nil)
			mcp.AddTool(s, &mcp.Tool{Name: "order"}, func(context.Context, *mcp.CallToolRequest, map[string]any) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{
					Content:           []mcp.Content{&mcp.TextContent{Text: "order 9007199254740993"}},
					StructuredContent: json.RawMessage(structured),
				}, nil, nil
			})
			tc.opts.DisableLocalhostProtection = true
			srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &tc.opts))
			t.Cleanup(srv.Close)

			res, err := (&discovery.MCPCaller{}).Call(t.Context(), srv.URL, "order", nil)
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(res.StructuredContent)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != structured {
				t.Fatalf("structuredContent %s, want %s", b, structured)
			}

			c := &discovery.Client{Timeout: 10 * time.Second, HTTPClient: clusterHTTP(srv)}
			if err := c.SetTable(mcpTable("order")); err != nil {
				t.Fatal(err)
			}
			got, err := c.Call(t.Context(), "rich_order", nil)
			if err != nil {
				t.Fatal(err)
			}
			if string(got.StructuredContent) != structured {
				t.Fatalf("Client.Call: structuredContent %s, want %s", got.StructuredContent, structured)
			}
		})
	}
}

// TestCallOverMCPReadsStructuredContentByItsExactName calls an MCP server
// whose result carries structuredContent beside members of the same name
// in other cases, as JSON and as an event stream: the caller hands on the
// exact member, the one the SDK reads, whichever comes last.
func TestCallOverMCPReadsStructuredContentByItsExactName(t *testing.T) {
	const result = `{"content":[{"type":"text","text":"x"}],"STRUCTUREDCONTENT":{"b":2},"structuredContent":{"a":1},"StructuredContent":{"c":3}}`
	for _, events := range []bool{false, true} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var msg struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&msg) != nil {
				http.Error(w, "no", http.StatusBadRequest)
				return
			}
			if len(msg.ID) == 0 {
				w.WriteHeader(http.StatusAccepted)
				return
			}
			answer := `{"jsonrpc":"2.0","id":` + string(msg.ID) + `,"result":` + result + `}`
			if msg.Method == "initialize" {
				answer = `{"jsonrpc":"2.0","id":` + string(msg.ID) + `,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"cases","version":"1"}}}`
			}
			if events {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, "event: message\ndata: "+answer+"\n\n")
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, answer)
		}))
		t.Cleanup(srv.Close)
		res, err := (&discovery.MCPCaller{}).Call(t.Context(), srv.URL, "order", nil)
		if err != nil {
			t.Fatalf("events %v: %v", events, err)
		}
		if b, err := json.Marshal(res.StructuredContent); err != nil || string(b) != `{"a":1}` {
			t.Errorf("events %v: structuredContent %s (%v), want {\"a\":1}", events, b, err)
		}
	}
}

// TestCallOverMCPTakesStructuredContentFromTheSDKsMessage: the reply to a
// tools/call holds, before the response the SDK reads, a message it passes
// over with structuredContent of its own. The caller hands on the SDK's.
// (A red team's attacks: each but the last passed the message over
// wrongly before the reader followed the SDK's.)
func TestCallOverMCPTakesStructuredContentFromTheSDKsMessage(t *testing.T) {
	const good = `{"content":[{"type":"text","text":"x"}],"structuredContent":{"sdk":1}}`
	const evil = `{"content":[{"type":"text","text":"x"}],"structuredContent":{"evil":1}}`
	msg := func(id, extra, result string) string {
		return `{"jsonrpc":"2.0","id":` + id + extra + `,"result":` + result + `}`
	}
	for _, tc := range []struct {
		name string
		body func(id string) string
	}{
		{"an event of another name", func(id string) string {
			return "event: other\ndata: " + msg(id, "", evil) + "\n\ndata: " + msg(id, "", good) + "\n\n"
		}},
		{"a fractional id the SDK reads as another", func(id string) string {
			return "data: " + msg(id+".5", "", good) + "\n\ndata: " + msg(id, "", evil) + "\n\n"
		}},
		{"a request that reuses the id", func(id string) string {
			return "data: " + msg(id, `,"method":"ping"`, evil) + "\n\ndata: " + msg(id, "", good) + "\n\n"
		}},
		{"a line with no data field", func(id string) string {
			return msg(id, "", evil) + "\n\ndata: " + msg(id, "", good) + "\n\n"
		}},
		{"data lines with spaces, joined", func(id string) string {
			return "event: message\ndata:   " + `{"jsonrpc":"2.0",` + "  \ndata: " + `"id":` + id + `,"result":` + good + "}\r\n\r\n"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var m struct {
					ID     json.RawMessage `json:"id"`
					Method string          `json:"method"`
				}
				if json.NewDecoder(r.Body).Decode(&m) != nil || len(m.ID) == 0 {
					w.WriteHeader(http.StatusAccepted)
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				if m.Method == "initialize" {
					_, _ = io.WriteString(w, "data: "+msg(string(m.ID), "", `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"c","version":"1"}}`)+"\n\n")
					return
				}
				_, _ = io.WriteString(w, tc.body(string(m.ID)))
			}))
			t.Cleanup(srv.Close)
			res, err := (&discovery.MCPCaller{}).Call(t.Context(), srv.URL, "order", nil)
			if err != nil {
				t.Fatal(err)
			}
			if b, err := json.Marshal(res.StructuredContent); err != nil || string(b) != `{"sdk":1}` {
				t.Errorf("structuredContent %s (%v), want the SDK's {\"sdk\":1}", b, err)
			}
		})
	}
}
