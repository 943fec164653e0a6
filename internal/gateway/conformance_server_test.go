package gateway_test

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// referenceTools are the fixture tools of the conformance suite's
// streaming scenarios, which its reference server declares (the suite's
// package ships the scenarios, not that server): the same tools on the Go
// SDK, built to each scenario's "Server Implementation Requirements".
var referenceTools = []string{"test_tool_with_logging", "test_tool_with_progress", "test_sampling", "test_elicitation"}

// referenceServer is an MCP server of the 2025 era (with sessions, so that
// it can ask its client for sampling and elicitation) with referenceTools.
func referenceServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "conformance-reference", Version: "1.0.0"}, nil)
	pause := func(ctx context.Context) {
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	type none struct{}
	mcp.AddTool(s, &mcp.Tool{Name: "test_tool_with_logging"}, func(ctx context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
		for i, m := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
			if i > 0 {
				pause(ctx)
			}
			//nolint:staticcheck // logging is deprecated in 2026-07-28, and still served
			if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: m}); err != nil {
				return nil, nil, err
			}
		}
		return text("Tool with logging executed successfully"), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "test_tool_with_progress"}, func(ctx context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
		token := req.Params.GetProgressToken()
		for i, p := range []float64{0, 50, 100} {
			if i > 0 {
				pause(ctx)
			}
			if token != nil {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: p, Total: 100}); err != nil {
					return nil, nil, err
				}
			}
		}
		return text("Tool with progress executed successfully"), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "test_sampling"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct {
		Prompt string `json:"prompt"`
	}) (*mcp.CallToolResult, any, error) {
		//nolint:staticcheck // sampling is deprecated in 2026-07-28, and still served
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 100,
			Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: in.Prompt}}}})
		if err != nil {
			return nil, nil, err
		}
		answer := ""
		if tc, ok := res.Content.(*mcp.TextContent); ok {
			answer = tc.Text
		}
		return text("LLM response: " + answer), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "test_elicitation"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct {
		Message string `json:"message"`
	}) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: in.Message, RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"username": map[string]any{"type": "string", "description": "User's response"},
				"email":    map[string]any{"type": "string", "description": "User's email address"},
			},
			"required": []string{"username", "email"},
		}})
		if err != nil {
			return nil, nil, err
		}
		return text(fmt.Sprintf("User response: action=%s, content=%v", res.Action, res.Content)), nil, nil
	})
	return s
}
