package gateway_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit"
)

// TestToolkitToolsThatAskAreCalledWhereTheyCanAsk: for a client that can
// answer, a toolkit tool that declares it asks (toolkit.Asks) is called
// over MCP, and its question reaches the client in the client's era; one
// that does not declare it is called at its invoke endpoint (a quarter of
// the cost), where toolkit.Ask says it cannot ask.
func TestToolkitToolsThatAskAreCalledWhereTheyCanAsk(t *testing.T) {
	ask := func(ctx context.Context, _ struct{}) (string, error) {
		ans, err := toolkit.Ask(ctx, "color", toolkit.Question{Message: "Which color?", Schema: map[string]any{
			"type": "object", "properties": map[string]any{"color": map[string]any{"type": "string"}}}})
		if err != nil {
			return "", err
		}
		c, _ := ans.Content["color"].(string)
		return ans.Action + " " + c, nil
	}
	wl := newWorkload(t, "paint", "paint-tools", "",
		toolkit.MustNew("ask", "Asks", ask, toolkit.Asks()),
		toolkit.MustNew("ask_undeclared", "Asks without saying so", ask))
	g, url := newGateway(t, new(routes).add(wl), gateway.Options{Sessions: true})
	if err := g.SetTable(table(wl.tableTools())); err != nil {
		t.Fatal(err)
	}
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			var asked atomic.Int32
			cs := connectWith(t, url+"/mcp", era, &mcp.ClientOptions{
				ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					asked.Add(1)
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"color": "teal"}}, nil
				},
			})
			res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "ask"})
			if err != nil || res.IsError || !strings.Contains(text(res), "accept teal") || asked.Load() != 1 {
				t.Errorf("ask: %v %q (isError %v), asked %d times", err, text(res), res != nil && res.IsError, asked.Load())
			}
			res, err = cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "ask_undeclared"})
			if err != nil || !res.IsError || !strings.Contains(text(res), "cannot be asked") || asked.Load() != 1 {
				t.Errorf("ask_undeclared: %v %q, asked %d times", err, text(res), asked.Load())
			}
		})
	}
}
