//nolint:staticcheck // MCP's logging is deprecated in 2026-07-28 and still served: relaying it is the point here.
package gateway_test

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit"
)

// BenchmarkRelay measures a call of an MCP server's tool that sends 100
// progress notifications and 100 log messages, through the gateway to a Go
// SDK client, with the relay (a progress token and a log level) and, as
// the baseline, without (the backend is not asked for any).
//
//	go test ./internal/gateway/ -run '^$' -bench BenchmarkRelay -benchmem -benchtime 50x
func BenchmarkRelay(b *testing.B) {
	r := new(routes)
	srv := goStepsServer()
	r.set("gosteps.apps.svc.cluster.local:8080", mcpBackend(b, srv, true))
	g, url := newGateway(b, r, gateway.Options{})
	if err := g.SetTable(table(mcpTableTools("apps", "gosteps", "/mcp", "go_steps"))); err != nil {
		b.Fatal(err)
	}
	for _, relay := range []bool{false, true} {
		name := "baseline"
		if relay {
			name = "relayed"
		}
		b.Run(name, func(b *testing.B) {
			var heard int
			cs := connectWith(b, url+"/mcp", "2026-07-28", &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, _ *mcp.ProgressNotificationClientRequest) { heard++ },
			})
			b.ReportAllocs()
			for b.Loop() {
				params := &mcp.CallToolParams{Name: "go_steps", Arguments: map[string]any{"steps": 100}}
				if relay {
					params.SetProgressToken("p")
					params.Meta[mcp.MetaKeyLogLevel] = "info"
				}
				res, err := cs.CallTool(context.Background(), params)
				if err != nil || res.IsError {
					b.Fatalf("%v %+v", err, res)
				}
			}
			_ = heard
		})
	}
}

// BenchmarkToolkitCallOfAClientThatCanAnswer measures what a client's
// elicitation capability costs a call of a toolkit tool: nothing for a
// tool that does not declare it asks (the gateway calls its invoke
// endpoint, as for a client that cannot answer, the baseline), and an MCP
// call for one that does (toolkit.Asks), where toolkit.Ask can ask.
//
//	go test ./internal/gateway/ -run '^$' -bench BenchmarkToolkitCallOfAClientThatCanAnswer -benchmem -benchtime 200x
func BenchmarkToolkitCallOfAClientThatCanAnswer(b *testing.B) {
	echo := func(_ context.Context, in struct {
		Text string `json:"text"`
	}) (string, error) {
		return in.Text, nil
	}
	wl := newWorkload(b, "crm", "crm-tools", "",
		toolkit.MustNew("echo", "Echoes", echo), toolkit.MustNew("echo_asks", "Echoes, and might ask", echo, toolkit.Asks()))
	g, url := newGateway(b, new(routes).add(wl), gateway.Options{})
	if err := g.SetTable(table(wl.tableTools())); err != nil {
		b.Fatal(err)
	}
	elicit := func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	for _, tc := range []struct {
		name, tool string
		opts       *mcp.ClientOptions
	}{
		{"baseline", "echo", &mcp.ClientOptions{}},
		{"elicits/tool does not ask", "echo", &mcp.ClientOptions{ElicitationHandler: elicit}},
		{"elicits/tool asks", "echo_asks", &mcp.ClientOptions{ElicitationHandler: elicit}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cs := connectWith(b, url+"/mcp", "2026-07-28", tc.opts)
			b.ReportAllocs()
			for b.Loop() {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tc.tool, Arguments: map[string]any{"text": "x"}})
				if err != nil || res.IsError {
					b.Fatalf("%v %+v", err, res)
				}
			}
		})
	}
}
