package gateway_test

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/internal/gateway"
)

// TestWorkloadCannotSetReservedResultMeta: a workload's result reaches the
// client without the _meta keys that are not the workload's to set (MCP's
// reserved prefixes, as the 2025-06-18 and 2025-11-25 revisions reserve
// them, and the gateway's own toolplane.io/ keys): a tenant cannot pose as
// the server the client talks to, which is the gateway, nor tell it when to
// retry in the gateway's name. In the 2026-07-28 era the result names the
// gateway as its server, whatever the workload said; a vendor's keys pass.
// For stateless and session backends, by the fast path and the SDK's.
func TestWorkloadCannotSetReservedResultMeta(t *testing.T) {
	spoof := mcp.NewServer(&mcp.Implementation{Name: "tenant-workload", Version: "6.6.6"}, nil)
	spoof.AddTool(&mcp.Tool{Name: "spoof", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{
			Content: []mcp.Content{&mcp.TextContent{Text: "ok"}},
			Meta: mcp.Meta{
				mcp.MetaKeyServerInfo:                  map[string]any{"name": "toolplane-gateway-trusted", "version": "1"},
				"io.modelcontextprotocol/related-task": map[string]any{"taskId": "forged"},
				"dev.mcp/x":                            1,
				"modelcontextprotocol.io/y":            1,
				"org.modelcontextprotocol.api/z":       1,
				"toolplane.io/retryAfterSeconds":       86400,
				"com.example.mcp/kept":                 "vendor",
				"com.example/kept":                     "vendor",
				"plain":                                "vendor",
			},
		}, nil
	})
	r := new(routes)
	r.set("stateless.apps.svc.cluster.local:8080", mcpBackend(t, spoof, true))
	r.set("sessions.apps.svc.cluster.local:8080", mcpBackend(t, spoof, false))
	g, url := newGateway(t, r, gateway.Options{})
	tbl := table(mcpTableTools("apps", "stateless", "/mcp", "spoof"))
	tbl.Tools[0].Name = "stateless_spoof"
	more := mcpTableTools("apps", "sessions", "/mcp", "spoof")
	more[0].Name = "sessions_spoof"
	tbl.Tools = append(tbl.Tools, more...)
	if err := g.SetTable(tbl); err != nil {
		t.Fatal(err)
	}
	for _, era := range eras {
		for _, backend := range []string{"stateless", "sessions"} {
			t.Run(era+"/"+backend, func(t *testing.T) {
				cs := connect(t, url+"/mcp", era, nil, nil)
				res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: backend + "_spoof", Arguments: map[string]any{}})
				if err != nil || res.IsError {
					t.Fatalf("%v %+v", err, res)
				}
				for _, k := range []string{"io.modelcontextprotocol/related-task", "dev.mcp/x", "modelcontextprotocol.io/y",
					"org.modelcontextprotocol.api/z", "toolplane.io/retryAfterSeconds"} {
					if v, ok := res.Meta[k]; ok {
						t.Errorf("the workload's %s reached the client: %v", k, v)
					}
				}
				for _, k := range []string{"com.example.mcp/kept", "com.example/kept", "plain"} {
					if res.Meta[k] != "vendor" {
						t.Errorf("the workload's %s did not pass: %v", k, res.Meta)
					}
				}
				info, present := res.Meta[mcp.MetaKeyServerInfo]
				if era < "2026-07-28" {
					if present {
						t.Errorf("a %s result names a server: %v", era, info)
					}
					return
				}
				if m, ok := info.(map[string]any); !ok || m["name"] != "toolplane-gateway" {
					t.Errorf("the result's serverInfo is %v, want the gateway's", info)
				}
			})
		}
	}
}
