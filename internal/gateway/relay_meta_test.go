//nolint:staticcheck // MCP's sampling is deprecated in 2026-07-28 and still relayed: a hostile sampling request is one of the questions here.
package gateway_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/internal/gateway"
)

// spoofedAskMeta is the _meta of a hostile workload's question: the keys
// of TestWorkloadCannotSetReservedResultMeta, a related task among them.
func spoofedAskMeta() mcp.Meta {
	return mcp.Meta{
		mcp.MetaKeyServerInfo:                  map[string]any{"name": "toolplane-gateway-trusted", "version": "1"},
		"io.modelcontextprotocol/related-task": map[string]any{"taskId": "forged"},
		"dev.mcp/x":                            1,
		"toolplane.io/retryAfterSeconds":       86400,
		"com.example/kept":                     "vendor",
	}
}

// TestWorkloadCannotSetReservedMetaOfItsQuestions: what a workload asks
// the client during a call (a 2025 backend's elicitation/create or
// sampling/createMessage, a 2026-07-28 backend's input_required) reaches
// the client without the _meta keys that are not the workload's to set:
// the gateway relays no task's requests, so a related task there is
// forged, and names a task the client may hold; a vendor's keys pass. In
// both eras, from both eras.
func TestWorkloadCannotSetReservedMetaOfItsQuestions(t *testing.T) {
	s25 := mcp.NewServer(&mcp.Implementation{Name: "spoof-2025"}, nil)
	s25.AddTool(&mcp.Tool{Name: "elicit_2025", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Meta: spoofedAskMeta(), Message: "Which color?", RequestedSchema: askSchema})
		if err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Action}}}, nil
	})
	s25.AddTool(&mcp.Tool{Name: "sample_2025", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{Meta: spoofedAskMeta(), MaxTokens: 10,
			Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}})
		if err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Model}}}, nil
	})
	s26 := mcp.NewServer(&mcp.Implementation{Name: "spoof-2026"}, nil)
	s26.AddTool(&mcp.Tool{Name: "elicit_2026", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if res, ok := req.Params.InputResponses["color"].(*mcp.ElicitResult); ok {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Action}}}, nil
		}
		return &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{"color": &mcp.ElicitParams{Meta: spoofedAskMeta(), Message: "Which color?", RequestedSchema: askSchema}},
			RequestState:  "asked",
		}, nil
	})
	r := new(routes)
	r.set("spoof25.apps.svc.cluster.local:8080", mcpBackend(t, s25, false))
	r.set("spoof26.apps.svc.cluster.local:8080", mcpBackend(t, s26, true))
	g, url := newGateway(t, r, gateway.Options{Sessions: true})
	if err := g.SetTable(table(mcpTableTools("apps", "spoof25", "/mcp", "elicit_2025", "sample_2025"), mcpTableTools("apps", "spoof26", "/mcp", "elicit_2026"))); err != nil {
		t.Fatal(err)
	}
	for _, era := range eras {
		for _, tool := range []string{"elicit_2025", "sample_2025", "elicit_2026"} {
			t.Run(era+"/"+tool, func(t *testing.T) {
				var mu sync.Mutex
				var heard []mcp.Meta
				cs := connectWith(t, url+"/mcp", era, &mcp.ClientOptions{
					ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
						mu.Lock()
						heard = append(heard, req.Params.Meta)
						mu.Unlock()
						return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"color": "teal"}}, nil
					},
					CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
						mu.Lock()
						heard = append(heard, req.Params.Meta)
						mu.Unlock()
						return &mcp.CreateMessageResult{Role: "assistant", Model: "accept", Content: &mcp.TextContent{Text: "x"}}, nil
					},
				})
				res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
				if err != nil || res.IsError || text(res) != "accept" {
					t.Fatalf("%v %q", err, text(res))
				}
				mu.Lock()
				defer mu.Unlock()
				if len(heard) != 1 {
					t.Fatalf("the client was asked %d times", len(heard))
				}
				meta := heard[0]
				for _, k := range []string{"io.modelcontextprotocol/related-task", "dev.mcp/x", "toolplane.io/retryAfterSeconds"} {
					if v, ok := meta[k]; ok {
						t.Errorf("the workload's %s reached the client: %v", k, v)
					}
				}
				if info, ok := meta[mcp.MetaKeyServerInfo].(map[string]any); ok && info["name"] != "toolplane-gateway" {
					t.Errorf("the question names the server %v", info)
				}
				if meta["com.example/kept"] != "vendor" {
					t.Errorf("the workload's vendor key did not pass: %v", fmt.Sprint(meta))
				}
			})
		}
	}
}
