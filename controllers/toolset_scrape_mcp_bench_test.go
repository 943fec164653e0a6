package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/server"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// BenchmarkScrapeOnePod measures one steady-state scrape of one Pod serving
// 100 tools: the Toolkit baseline (a conditional GET answered 304) against
// tools/list over MCP from a stateless 2026-07-28 server and from a 2025
// server with sessions (initialize, tools/list, DELETE), in the same run.
//
//	go test ./controllers -run '^$' -bench BenchmarkScrapeOnePod -benchmem
func BenchmarkScrapeOnePod(b *testing.B) {
	const n = 100
	reg := new(toolkit.Registry)
	for i := range n {
		if err := reg.Add(toolkit.MustNewDynamic(fmt.Sprintf("tool_%03d", i), "A tool.",
			json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`),
			func(context.Context, map[string]any) (any, error) { return "ok", nil })); err != nil {
			b.Fatal(err)
		}
	}
	h := server.New(reg, &server.Options{Name: "bench"})
	b.Cleanup(func() { _ = h.Close() })
	toolkitSrv := httptest.NewServer(h)
	b.Cleanup(toolkitSrv.Close)

	sessions := mcp.NewServer(&mcp.Implementation{Name: "bench-2025"}, nil)
	for i := range n {
		sessions.AddTool(&mcp.Tool{Name: fmt.Sprintf("tool_%03d", i), Description: "A tool.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
	}
	sessionSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return sessions }, nil))
	b.Cleanup(sessionSrv.Close)

	run := func(b *testing.B, protocol v1alpha1.Protocol, url string) {
		tgt := scrapeTarget{
			toolSet: types.NamespacedName{Namespace: "ns", Name: "bench"},
			spec:    &v1alpha1.ToolSetSpec{Protocol: protocol, Scheme: "http", Limits: v1alpha1.Limits{MaxTools: 256}},
			timeout: 10 * time.Second, interval: 30 * time.Second,
		}
		s := newScraper(1, 0)
		// The ToolSet's keep-alive client, as every round uses it.
		c := s.clientFor(tgt)
		var prev *spec.Document
		for b.Loop() {
			var (
				doc *spec.Document
				err error
			)
			if protocol == v1alpha1.ProtocolMCP {
				doc, err = s.listMCP(context.Background(), c, tgt, url, prev)
			} else {
				doc, err = s.fetch(context.Background(), c, tgt, url, prev)
			}
			if err != nil || len(doc.Tools) != n {
				b.Fatalf("%v, %d tools", err, len(doc.Tools))
			}
			prev = doc
		}
	}
	b.Run("toolkit-304", func(b *testing.B) { run(b, v1alpha1.ProtocolToolkit, toolkitSrv.URL+spec.DefaultPath) })
	b.Run("mcp-2026-stateless", func(b *testing.B) { run(b, v1alpha1.ProtocolMCP, toolkitSrv.URL+spec.MCPPath) })
	b.Run("mcp-2025-sessions", func(b *testing.B) { run(b, v1alpha1.ProtocolMCP, sessionSrv.URL) })
}
