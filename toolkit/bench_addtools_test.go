package toolkit_test

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/toolkit/server"
)

// BenchmarkMCPCallAddTools is BenchmarkMCPCall's impl=toolkit as the
// library serves it: server.AddTools on a go-sdk server.
func BenchmarkMCPCallAddTools(b *testing.B) {
	s := mcp.NewServer(&mcp.Implementation{Name: "toolkit", Version: "v0"}, nil)
	tools, err := server.AddTools(s, benchRegistry(b), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer tools.Close()
	cs := connect(b, s)
	ctx := context.Background()
	params := &mcp.CallToolParams{Name: "create_user", Arguments: benchArgs}
	if res, err := cs.CallTool(ctx, params); err != nil || res.IsError {
		b.Fatalf("CallTool = %+v, %v", res, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cs.CallTool(ctx, params); err != nil {
			b.Fatal(err)
		}
	}
}
