package gateway_test

import (
	"context"
	"io"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/internal/gateway"
)

// BenchmarkCallAudited compares, in one run, a call to the workload
// directly, through the gateway as it was, and through a gateway that
// writes the audit log (with the arguments, redacted) and keeps both call
// limits:
//
//	go test -run '^$' -bench BenchmarkCallAudited -benchtime 2000x ./internal/gateway/
func BenchmarkCallAudited(b *testing.B) {
	wl := newWorkload(b, "crm", "crm-tools", "crm_", echoTool("crm"), loginTool())
	tools := wl.tableTools()
	for i := range tools {
		tools[i].CallsPerMinute = 1_000_000
	}
	r := new(routes).add(wl)
	plain, plainURL := newGateway(b, r, gateway.Options{})
	audited, auditedURL := newGateway(b, r, gateway.Options{AuditLog: io.Discard, AuditArguments: true, MaxCallsPerCallerPerMinute: 100_000_000})
	for _, g := range []*gateway.Gateway{plain, audited} {
		if err := g.SetTable(table(tools)); err != nil {
			b.Fatal(err)
		}
	}
	args := map[string]any{"user": "ada", "password": "hunter2"}
	for _, tc := range []struct{ name, endpoint, tool string }{
		{"direct", wl.srv.URL + "/mcp", "login"},
		{"gateway", plainURL + "/mcp", "crm_login"},
		{"audited+limited", auditedURL + "/mcp", "crm_login"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cs := connect(b, tc.endpoint, "2026-07-28", nil, nil)
			ctx := context.Background()
			call := func() {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: args})
				if err != nil || res.IsError {
					b.Fatalf("%v %+v", err, res)
				}
			}
			call()
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			for b.Loop() {
				call()
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}
