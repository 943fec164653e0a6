package gateway_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit/server"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// BenchmarkSearchAtTheGateway answers GET /v1/search over a table of
// 10,000 tools through the gateway's handler (query, index, authorization
// of the candidates, the JSON of ten full entries), without and with
// authorization, and, as the baseline of the same run, encodes the full
// tools/list of the same table, what an agent without search reads:
//
//	go test -run '^$' -bench BenchmarkSearchAtTheGateway -benchtime 2s ./internal/gateway/
//
// The goal is search ≤ 1% of list-encode. Every tool matches "records", so
// the query walks long postings, and the tools rank nearly alike, in table
// order: the worst case for a caller granted only some of them.
func BenchmarkSearchAtTheGateway(b *testing.B) {
	tbl := bigTable(10_000)
	for _, tc := range []struct {
		name string
		auth gateway.Auth
	}{
		{"search", nil},
		// Granted every tool: one question.
		{"search-auth-all", grants{of: map[string][]string{"agent": {"/"}}}},
		// Granted one namespace of 50, whose tools rank below the first
		// thousand candidates: the request's review budget is spent on
		// the tools of other namespaces, and the answer is empty. An
		// authorizer without a decision cache, so every question counts.
		{"search-auth-one-namespace", grants{of: map[string][]string{"agent": {"team-07/"}}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			g := gateway.New(&gateway.Options{Auth: tc.auth})
			defer g.Close()
			if err := g.SetTable(tbl); err != nil {
				b.Fatal(err)
			}
			req := httptest.NewRequest(http.MethodGet, "/v1/search?q=look+up+records+newest+first&limit=10", nil)
			req.Header.Set("Authorization", "Bearer agent")
			var bytes int
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				g.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("%d %s", rec.Code, rec.Body)
				}
				bytes = rec.Body.Len()
			}
			b.ReportMetric(float64(bytes), "bytes/answer")
		})
	}
	b.Run("list-encode", func(b *testing.B) {
		tools := make([]*mcp.Tool, len(tbl.Tools))
		for i, t := range tbl.Tools {
			tools[i] = server.MCPTool(spec.Tool{Name: t.Name, Title: t.Title, Description: t.Description,
				InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Annotations: t.Annotations, Meta: t.Meta})
		}
		var n int
		b.ReportAllocs()
		for b.Loop() {
			out, err := json.Marshal(&mcp.ListToolsResult{Tools: tools})
			if err != nil {
				b.Fatal(err)
			}
			n = len(out)
		}
		b.ReportMetric(float64(n), "bytes/answer")
	})
}
