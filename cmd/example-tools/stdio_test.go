package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestStdioServesTheTools runs --stdio over an in-memory pipe, as a
// desktop client runs it over the process's stdin and stdout: every tool
// is listed, and a call is bound leniently as over HTTP.
func TestStdioServesTheTools(t *testing.T) {
	ct, st := mcp.NewInMemoryTransports()
	saved := stdioTransport
	stdioTransport = func() mcp.Transport { return st }
	t.Cleanup(func() { stdioTransport = saved })

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	logs := &syncBuffer{}
	go func() { done <- run(ctx, []string{"--stdio", "--name", "stdio-tools"}, logs, nil) }()

	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "v0"}, nil).Connect(cctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := cs.InitializeResult().ServerInfo.Name; got != "stdio-tools" {
		t.Errorf("serverInfo name %q", got)
	}
	var names []string
	for tool, err := range cs.Tools(cctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	if len(names) != len(allTools) {
		t.Errorf("tools %v, want %v", names, allTools)
	}
	res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "add", Arguments: json.RawMessage(`{"a":"9007199254740993","b":1}`)})
	if err != nil || res.IsError {
		t.Fatalf("CallTool = %+v, %v", res, err)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; text != `{"sum":9007199254740994}` {
		t.Errorf("add = %s", text)
	}
	cs.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return")
	}
}
