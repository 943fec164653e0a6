package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/test/harness"
)

// searchTask is what the demo's searching agent needs done, in the words a
// user would give it; it knows no tool name.
const searchTask = "score the risk of a large international transaction"

// searchAgent is an agent that does not read the whole table: at the
// gateway's /mcp/search it sees two meta-tools, finds the tool its task
// needs with search_tools, and calls it with call_tool.
func searchAgent(ctx context.Context, gw *harness.Gateway, r *report) error {
	endpoint := gw.URL() + "/mcp/search"
	r.step("A searching agent (the Go SDK, protocol 2026-07-28) connects to %s", endpoint)
	client := mcp.NewClient(&mcp.Implementation{Name: "toolplane-demo-search-agent", Version: "v0"}, nil)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cs, err := client.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		return fmt.Errorf("connecting to the gateway at %s: %w", endpoint, err)
	}
	defer cs.Close()
	list, err := cs.ListTools(cctx, nil)
	if err != nil {
		return fmt.Errorf("listing the meta-tools: %w", err)
	}
	var names []string
	for _, t := range list.Tools {
		names = append(names, t.Name)
	}
	r.detail("tools/list holds %d tools: %v", len(names), names)

	r.step("search_tools %q", searchTask)
	res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": searchTask, "limit": 3}})
	if err != nil {
		return fmt.Errorf("search_tools: %w", err)
	}
	if res.IsError {
		return fmt.Errorf("search_tools answered with an error: %s", textOf(res))
	}
	for _, line := range strings.Split(textOf(res), "\n") {
		r.detail("%s", clip(line))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return err
	}
	var found struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(b, &found); err != nil || len(found.Tools) == 0 {
		return fmt.Errorf("search_tools found nothing for %q: %s", searchTask, b)
	}
	best := found.Tools[0].Name
	if best != gatewayTool {
		return fmt.Errorf("search_tools ranked %s first for %q, want %s", best, searchTask, gatewayTool)
	}

	r.step("call_tool %s %s", best, gatewayArgs)
	res, err = cs.CallTool(cctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"name": best, "arguments": json.RawMessage(gatewayArgs)}})
	if err != nil {
		return fmt.Errorf("call_tool %s: %w", best, err)
	}
	if res.IsError {
		return fmt.Errorf("call_tool %s: the tool answered with an error: %s", best, textOf(res))
	}
	r.detail("→ %s", clip(textOf(res)))
	r.detail("search_tools' structured result: %d tools with their full schemas, %d bytes", len(found.Tools), len(b))
	return nil
}

func textOf(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}
