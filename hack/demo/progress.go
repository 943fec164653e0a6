package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// progressTool is the demo's long-running tool, and its arguments: four
// sections of a quarter of a second each.
const (
	progressTool     = "build_report"
	progressArgs     = `{"sections":"4","delayMs":"250"}`
	progressSections = 4
)

// progress calls the long-running tool over MCP, at the endpoint the table
// gives, as a client that shows a progress bar does: it sends a
// progressToken, and prints each notifications/progress as it arrives.
func progress(ctx context.Context, st *settled, wls []*workload, r *report) error {
	var tool *spec.TableTool
	for i := range st.table.Tools {
		if st.table.Tools[i].Name == progressTool {
			tool = &st.table.Tools[i]
		}
	}
	if tool == nil || tool.Endpoints == nil {
		return fmt.Errorf("the table has no %s with endpoints", progressTool)
	}
	r.step("Calling %s %s over MCP with a progressToken, as a client with a progress bar does", progressTool, progressArgs)
	r.detail("owner %s, MCP %s", tool.ToolSet, tool.Endpoints.MCP)

	hc := loopbackClient(routes(wls))
	defer hc.CloseIdleConnections()
	var mu sync.Mutex
	reports := 0
	client := mcp.NewClient(&mcp.Implementation{Name: "toolplane-demo", Version: "v0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			reports++
			r.detail("progress %g/%g: %s", req.Params.Progress, req.Params.Total, req.Params.Message)
		},
	})
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cs, err := client.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: tool.Endpoints.MCP, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", tool.Endpoints.MCP, err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: tool.SourceName, Arguments: json.RawMessage(progressArgs)}
	params.SetProgressToken("demo-1")
	res, err := cs.CallTool(cctx, params)
	if err != nil {
		return fmt.Errorf("calling %s over MCP: %w", progressTool, err)
	}
	// The notifications come before the result on the call's stream, and
	// the client hands them to the handler on a goroutine of its own: give
	// the last one a moment.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := reports
		mu.Unlock()
		if n >= progressSections {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if res.IsError || reports == 0 {
		return fmt.Errorf("calling %s over MCP: error %v, %d progress reports", progressTool, res.IsError, reports)
	}
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			r.detail("→ %s", clip(tc.Text))
		}
	}
	return nil
}
