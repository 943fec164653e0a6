//nolint:staticcheck // MCP's sampling is deprecated in 2026-07-28 and still relayed: a sampling request that carries the token is one of the questions here.
package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/internal/gateway"
)

// A workload's questions to the client (a 2025 backend's elicitation/create
// and sampling/createMessage) asked during the call had only an
// elicitation's message redacted: its requested schema and a sampling
// request's messages and system prompt reached a 2025 client with the
// ToolSet's token. Each question is now redacted whole before it is asked
// or parked; a 2026-07-28 client, which gets it in the result's
// input_required, had it redacted with the result, and still does.
func TestQuestionsOfAWorkloadAreRedacted(t *testing.T) {
	const token = "tok-question-7f3e"
	s := mcp.NewServer(&mcp.Implementation{Name: "asker"}, nil)
	s.AddTool(&mcp.Tool{Name: "slow", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		schema := map[string]any{"type": "object", "properties": map[string]any{"color": map[string]any{"type": "string", "description": "not " + token}}}
		if _, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Your key is " + token + "?", RequestedSchema: schema}); err != nil {
			return nil, err
		}
		if _, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10, SystemPrompt: "key " + token,
			Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "Bearer " + token}}}}); err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "asked"}}}, nil
	})
	endpoint := redactRig(t, token, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{DisableLocalhostProtection: true}), gateway.Options{Sessions: true})
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			var mu sync.Mutex
			var asked []string
			hear := func(params any) {
				b, _ := json.Marshal(params)
				mu.Lock()
				defer mu.Unlock()
				asked = append(asked, string(b))
			}
			cs := connectWith(t, endpoint, era, &mcp.ClientOptions{
				ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					hear(req.Params)
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"color": "teal"}}, nil
				},
				CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
					hear(req.Params)
					return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "x"}}, nil
				},
			})
			res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{}})
			if err != nil || res.IsError || text(res) != "asked" {
				t.Fatalf("%v %q", err, text(res))
			}
			mu.Lock()
			defer mu.Unlock()
			if len(asked) < 2 {
				t.Fatalf("the client was asked %d questions, want the elicitation and the sampling request", len(asked))
			}
			for _, q := range asked {
				if strings.Contains(q, token) || !strings.Contains(q, "[redacted]") {
					t.Errorf("the question as the client heard it: %s", q)
				}
			}
		})
	}
}
