package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/test/harness"
)

// gatewayCall is the call the demo's MCP agent makes through the gateway,
// with arguments as sloppy as a small model sends them: numbers as strings
// and an enum in capitals. The workload's binder repairs them.
const (
	gatewayTool = "crm_evaluate_transaction_risk"
	gatewayArgs = `{"amount":"15000.00","customerRiskScore":"70","transactionType":"INTERNATIONAL"}`
)

// startGateway runs the gateway binary against the table, with --resolve
// standing in for cluster DNS as the agent's dialer does.
func startGateway(ctx context.Context, binDir, workDir, kubeconfig string, wls []*workload, r *report) (*harness.Gateway, error) {
	gw := &harness.Gateway{
		Bin:            filepath.Join(binDir, "gateway"),
		Kubeconfig:     kubeconfig,
		TableNamespace: tableNamespace,
		Resolve:        routes(wls),
		Args:           []string{"--table-name", tableName},
		LogPath:        filepath.Join(workDir, "gateway.log"),
	}
	if err := freshLog(gw.LogPath); err != nil {
		return nil, err
	}
	r.step("Starting the gateway (%s): every tool behind one MCP endpoint", gw.Bin)
	if err := gw.Start(ctx); err != nil {
		return nil, err
	}
	r.detail("ready at %s/mcp (log: %s)", gw.URL(), gw.LogPath)
	return gw, nil
}

// mcpAgent is an agent that speaks only MCP: it lists the tools through the
// gateway, page by page, and calls one with sloppy arguments.
func mcpAgent(ctx context.Context, gw *harness.Gateway, want int, r *report) error {
	endpoint := gw.URL() + "/mcp"
	r.step("An MCP agent (the Go SDK, protocol 2026-07-28) lists the tools through the gateway")
	client := mcp.NewClient(&mcp.Implementation{Name: "toolplane-demo-agent", Version: "v0"}, nil)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cs, err := client.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		return fmt.Errorf("connecting to the gateway at %s: %w", endpoint, err)
	}
	defer cs.Close()
	var names []string
	for tool, err := range cs.Tools(cctx, nil) {
		if err != nil {
			return fmt.Errorf("listing tools through the gateway: %w", err)
		}
		names = append(names, tool.Name)
	}
	if len(names) != want {
		return fmt.Errorf("the gateway lists %d tools, the table holds %d", len(names), want)
	}
	r.detail("%d tools: %v", len(names), names)

	r.step("Calling %s %s through the gateway", gatewayTool, gatewayArgs)
	res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: gatewayTool, Arguments: json.RawMessage(gatewayArgs)})
	if err != nil {
		return fmt.Errorf("calling %s through the gateway: %w", gatewayTool, err)
	}
	text := ""
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text += tc.Text
		}
	}
	if res.IsError {
		return fmt.Errorf("calling %s through the gateway: the tool answered with an error: %s", gatewayTool, text)
	}
	r.detail("→ %s", clip(text))
	return nil
}
