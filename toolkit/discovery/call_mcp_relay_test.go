//nolint:staticcheck // MCP's logging and sampling are deprecated in 2026-07-28 and still served: relaying them is the point here.
package discovery_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/toolkit/discovery"
)

// chattyServer's tool "chat" logs and reports progress three times, and
// asks its client for a name (2025: elicitation/create during the call;
// 2026-07-28: input_required), which it answers with.
func chattyServer(t *testing.T, stateless bool) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "chatty"}, nil)
	s.AddTool(&mcp.Tool{Name: "chat", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		name := ""
		if ip := req.Session.InitializeParams(); ip != nil && ip.ProtocolVersion >= "2026-07-28" {
			res, ok := req.Params.InputResponses["name"].(*mcp.ElicitResult)
			if !ok {
				return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"name": &mcp.ElicitParams{Message: "Name?"}}, RequestState: "s"}, nil
			}
			name = fmt.Sprint(res.Content["name"])
		} else {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Name?"})
			if err != nil {
				return nil, err
			}
			name = fmt.Sprint(res.Content["name"])
		}
		for i := 1; i <= 3; i++ {
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: fmt.Sprintf("log %d", i)})
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "debug", Data: "below the level"})
			if tok := req.Params.GetProgressToken(); tok != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 3})
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hi " + name}}}, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: stateless}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestMCPCallerRelays: a caller that asks for progress, logs and
// elicitation gets them from servers of both eras, in order, every one of
// them before Call returns, and its answer reaches the server.
func TestMCPCallerRelays(t *testing.T) {
	for _, tc := range []struct {
		name      string
		stateless bool
	}{{"a stateless 2026-07-28 server", true}, {"a 2025 server with sessions", false}} {
		t.Run(tc.name, func(t *testing.T) {
			url := chattyServer(t, tc.stateless)
			var heard []string
			c := discovery.MCPCaller{
				Progress: func(_ context.Context, p *mcp.ProgressNotificationParams) {
					heard = append(heard, fmt.Sprintf("progress %v/%v", p.Progress, p.Total))
				},
				Log: func(_ context.Context, p *mcp.LoggingMessageParams) {
					heard = append(heard, fmt.Sprint(p.Data))
				},
				LogLevel: "info",
				Elicit: func(_ context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
					heard = append(heard, "asked "+p.Message)
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
				},
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := c.Call(ctx, url, "chat", nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Content[0].(*mcp.TextContent).Text; got != "hi Ada" {
				t.Errorf("result %q", got)
			}
			// No waiting: Call returns after the notifications read before
			// the result were handled.
			want := "asked Name?|log 1|progress 1/3|log 2|progress 2/3|log 3|progress 3/3"
			if got := strings.Join(heard, "|"); got != want {
				t.Errorf("heard\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// A caller that shows a long tool's progress asks for it with Progress: the
// call carries a progress token of the caller's own, and every
// notification of the call has been handled when Call returns.
func ExampleMCPCaller_Progress() {
	s := mcp.NewServer(&mcp.Implementation{Name: "reports"}, nil)
	s.AddTool(&mcp.Tool{Name: "build", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		for i := 1; i <= 3; i++ {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Total: 3})
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "built"}}}, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true}))
	defer srv.Close()

	c := discovery.MCPCaller{
		Progress: func(_ context.Context, p *mcp.ProgressNotificationParams) {
			fmt.Printf("%v of %v\n", p.Progress, p.Total)
		},
	}
	res, err := c.Call(context.Background(), srv.URL, "build", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Content[0].(*mcp.TextContent).Text)
	// Output:
	// 1 of 3
	// 2 of 3
	// 3 of 3
	// built
}
