package main

import (
	"bytes"
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestDemo runs the demo end to end, as `make demo DEMO_FLAGS=--wait` does,
// against binaries built from this tree: control plane, manager, workloads,
// table, conflict, the agent's calls; then interrupts it, as Ctrl-C does,
// and checks that every workload is gone.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries and runs the whole demo")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	binDir := t.TempDir()
	build := exec.Command("go", "build", "-o", binDir+string(filepath.Separator), "./cmd/manager", "./cmd/gateway", "./cmd/example-tools")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the binaries: %v\n%s", err, out)
	}

	out := &watchedBuffer{marker: "Press Ctrl-C to stop.", seen: make(chan struct{})}
	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, options{
			binDir:  binDir,
			workDir: t.TempDir(),
			crdDir:  filepath.Join(root, "config", "crd", "bases"),
			wait:    true,
			timeout: 2 * time.Minute,
			out:     out,
		})
	}()
	select {
	case <-out.seen:
	case err := <-done:
		t.Fatalf("the demo ended before it was up: %v\n%s", err, out)
	case <-time.After(5 * time.Minute):
		t.Fatalf("the demo was not up within 5 minutes\n%s", out)
	}
	interrupt()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the demo failed to stop cleanly: %v\n%s", err, out)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("the demo did not stop within 2 minutes of the interrupt\n%s", out)
	}

	text := out.String()
	for _, want := range []string{
		// The table: every tool with its owner, state and Service endpoint.
		`get_weather\s+weather/weather-tools\s+Published\s+http://weather-tools\.weather\.svc\.cluster\.local:8080/tools/get_weather\n`,
		`crm_evaluate_transaction_risk\s+crm/crm-tools\s+Published\s+http://crm-tools\.crm\.svc\.cluster\.local:8080/tools/evaluate_transaction_risk\n`,
		`typed_echo\s+crm/assistant-tools\s+Published\s+http://assistant-tools\.crm\.svc\.cluster\.local:8080/tools/typed_echo\n`,
		`9 tools, revision sha256:`,
		// The conflict, from the loser's status.
		`crm/assistant-tools\s+get_weather\s+Conflicted\s+weather/weather-tools\n`,
		// The agent's calls, with the workloads' repairs.
		`→ \{"city":"北京","condition":"sunny","temperature":"25 degrees Celsius"`,
		`→ \{"riskScore":8\.6,"riskLevel":"LOW"`,
		// The long-running tool's progress, over MCP.
		`progress 1/4: wrote section 1 of 4\n`,
		`progress 4/4: wrote section 4 of 4\n`,
		// The MCP agent, through the gateway.
		`9 tools: \[add build_report crm_create_ticket`,
		`Calling crm_evaluate_transaction_risk .* through the gateway\n.*\n?\s+→ \{"riskScore":8\.6,"riskLevel":"LOW"`,
		// The searching agent: two meta-tools, the tool found by a task's
		// words, and called through call_tool.
		`tools/list holds 2 tools: \[search_tools call_tool\]`,
		`1\. crm_evaluate_transaction_risk\(`,
		`call_tool crm_evaluate_transaction_risk .*\n\s+→ \{"riskScore":8\.6,"riskLevel":"LOW"`,
		`export KUBECONFIG=`,
	} {
		if !regexp.MustCompile(want).MatchString(text) {
			t.Errorf("the output does not match %s", want)
		}
	}
	addrs := regexp.MustCompile(`curl -s http://(127\.0\.0\.1:[0-9]+)/`).FindAllStringSubmatch(text, -1)
	if len(addrs) != 3 {
		t.Fatalf("the output names %d workload addresses, want 3", len(addrs))
	}
	for _, a := range addrs {
		if c, err := net.DialTimeout("tcp", a[1], time.Second); err == nil {
			c.Close()
			t.Errorf("a workload still listens at %s after the demo stopped", a[1])
		}
	}
	if t.Failed() {
		t.Logf("the demo's output:\n%s", text)
	}
}

// watchedBuffer collects the demo's output and closes seen once marker has
// been written.
type watchedBuffer struct {
	marker string
	seen   chan struct{}

	mu   sync.Mutex
	buf  bytes.Buffer
	once sync.Once
}

func (w *watchedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.marker) {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}

func (w *watchedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
