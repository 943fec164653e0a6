//nolint:staticcheck // MCP's logging and sampling are deprecated in 2026-07-28 and still served: relaying them is the point here.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// behindGateway serves the example tools named (build_report when none)
// through a gateway (with sessions, for 2025 clients' logging level and
// questions) as the operator would publish them, and returns the
// gateway's /mcp URL.
func behindGateway(t *testing.T, names ...string) string {
	t.Helper()
	if len(names) == 0 {
		names = []string{"build_report"}
	}
	// The gateway dials the workload's Service name, which lands on
	// loopback here, as the demo does.
	in := start(t, "--allow-any-host-on-loopback")
	const host = "reports.demo.svc.cluster.local:8080"
	base := "http://" + host
	tbl := &spec.Table{SchemaVersion: spec.SchemaVersion}
	for _, tool := range in.document(t).Tools {
		if !slices.Contains(names, tool.Name) {
			continue
		}
		tbl.Tools = append(tbl.Tools, spec.TableTool{
			Name: tool.Name, SourceName: tool.Name, Description: tool.Description, InputSchema: tool.InputSchema, OutputSchema: tool.OutputSchema,
			Annotations: tool.Annotations, Meta: tool.Meta,
			ToolSet:   spec.ObjectReference{Namespace: "demo", Name: "reports"},
			Endpoints: &spec.Endpoints{Invoke: base + spec.InvokePrefix + tool.Name, MCP: base + spec.MCPPath},
		})
	}
	if len(tbl.Tools) != len(names) {
		t.Fatalf("the tools %v are not all served: %+v", names, tbl.Tools)
	}
	tbl.Revision = spec.TableRevision(tbl.Tools)
	addr := strings.TrimPrefix(in.url, "http://")
	g := gateway.New(&gateway.Options{Sessions: true, DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
		if a != host {
			return nil, fmt.Errorf("no route to %s", a)
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}})
	if err := g.SetTable(tbl); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	t.Cleanup(func() {
		g.Close()
		srv.Close()
	})
	return srv.URL + "/mcp"
}

// wantReportProgress is build_report's progress for 4 sections, in order.
var wantReportProgress = []string{"1/4 wrote section 1 of 4", "2/4 wrote section 2 of 4", "3/4 wrote section 3 of 4", "4/4 wrote section 4 of 4"}

// TestBuildReportProgressThroughTheGateway: a Go SDK client, in both eras,
// sees every progress notification of build_report through the gateway,
// in order, under its own token, and its log message.
func TestBuildReportProgressThroughTheGateway(t *testing.T) {
	url := behindGateway(t)
	for _, era := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(era, func(t *testing.T) {
			var mu sync.Mutex
			var progress, logs []string
			client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
					mu.Lock()
					defer mu.Unlock()
					if r.Params.ProgressToken != "report-1" {
						t.Errorf("progress under token %v", r.Params.ProgressToken)
					}
					progress = append(progress, fmt.Sprintf("%v/%v %s", r.Params.Progress, r.Params.Total, r.Params.Message))
				},
				LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
					mu.Lock()
					defer mu.Unlock()
					logs = append(logs, fmt.Sprint(r.Params.Data))
				},
			})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: era})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			params := &mcp.CallToolParams{Name: "build_report", Arguments: map[string]any{"sections": 4, "delayMs": 20}}
			params.SetProgressToken("report-1")
			if era >= "2026-07-28" {
				params.Meta[mcp.MetaKeyLogLevel] = "info"
			} else if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
				t.Fatal(err)
			}
			res, err := cs.CallTool(ctx, params)
			if err != nil || res.IsError {
				t.Fatalf("build_report: %v %+v", err, res)
			}
			// The SDK hands notifications to their handlers on a goroutine of
			// its own: they can come after the result.
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				mu.Lock()
				n, l := len(progress), len(logs)
				mu.Unlock()
				if n >= len(wantReportProgress) && l >= 1 {
					break
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if strings.Join(progress, "|") != strings.Join(wantReportProgress, "|") {
				t.Errorf("progress %q, want %q", progress, wantReportProgress)
			}
			if len(logs) != 1 || logs[0] != "writing 4 sections" {
				t.Errorf("logs %q", logs)
			}
		})
	}
}

// TestBuildReportProgressThroughTheGatewayToTypeScript: the TypeScript SDK
// client (hack/interop, which speaks the 2025 era: its SDK has no
// 2026-07-28 yet) sees the same, through the gateway.
func TestBuildReportProgressThroughTheGatewayToTypeScript(t *testing.T) {
	node, dir := typeScriptClient(t)
	url := behindGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "interop.mjs", url, "build_report", `{"sections":4,"delayMs":20}`, "--progress")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("interop.mjs: %v\n%s", err, out)
	}
	var progress, logs []string
	var called bool
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var e struct {
			Event    string          `json:"event"`
			Progress float64         `json:"progress"`
			Total    float64         `json:"total"`
			Message  string          `json:"message"`
			Data     any             `json:"data"`
			Result   json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		switch e.Event {
		case "progress":
			if called {
				t.Errorf("progress after the result: %s", line)
			}
			progress = append(progress, fmt.Sprintf("%v/%v %s", e.Progress, e.Total, e.Message))
		case "log":
			logs = append(logs, fmt.Sprint(e.Data))
		case "called":
			called = true
			if strings.Contains(string(e.Result), `"isError":true`) || !strings.Contains(string(e.Result), "Section 4") {
				t.Errorf("result %s", e.Result)
			}
		}
	}
	if strings.Join(progress, "|") != strings.Join(wantReportProgress, "|") {
		t.Errorf("progress %q, want %q", progress, wantReportProgress)
	}
	if len(logs) != 1 || logs[0] != "writing 4 sections" {
		t.Errorf("logs %q", logs)
	}
	if !called {
		t.Error("no result")
	}
}

// createTicket opens a ticket through the gateway at url, and returns its
// id.
func createTicket(t *testing.T, ctx context.Context, url, title string) string {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "setup", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_ticket", Arguments: map[string]any{"title": title, "priority": "low"}})
	if err != nil || res.IsError {
		t.Fatalf("create_ticket: %v %+v", err, res)
	}
	var tk Ticket
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &tk); err != nil || tk.ID == "" {
		t.Fatalf("create_ticket: %s %v", b, err)
	}
	return tk.ID
}

// TestDeleteTicketAsksThroughTheGateway: delete_ticket asks its user to
// confirm (toolkit.Ask) and a Go SDK client of either era, through the
// gateway's /mcp, is asked, answers, and gets the result that uses its
// answer: in 2026-07-28 the question comes back as input_required and the
// SDK's client calls again with the answer; in 2025 it is an
// elicitation/create during the call, which the gateway relays from the
// 2026-07-28 input_required of the workload. A client that cannot answer
// gets an isError result, and nothing is deleted.
func TestDeleteTicketAsksThroughTheGateway(t *testing.T) {
	url := behindGateway(t, "create_ticket", "delete_ticket")
	for _, era := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(era, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			id := createTicket(t, ctx, url, "Printer jam "+era)
			connect := func(opts *mcp.ClientOptions) *mcp.ClientSession {
				cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, opts).Connect(ctx,
					&mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: era})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { cs.Close() })
				return cs
			}
			// A call's params of their own each time: the SDK's client
			// writes its capabilities into their _meta.
			call := func() *mcp.CallToolParams {
				return &mcp.CallToolParams{Name: "delete_ticket", Arguments: map[string]any{"id": id}}
			}

			// No elicitation: refused, and the ticket stays.
			res, err := connect(nil).CallTool(ctx, call())
			if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "cannot be asked") {
				t.Fatalf("a client that cannot answer: %v %+v", err, res)
			}

			var mu sync.Mutex
			var asked []string
			cs := connect(&mcp.ClientOptions{ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				mu.Lock()
				asked = append(asked, r.Params.Message)
				mu.Unlock()
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"reason": "a duplicate"}}, nil
			}})
			res, err = cs.CallTool(ctx, call())
			if err != nil || res.IsError {
				t.Fatalf("delete_ticket: %v %+v %s", err, res, textOf(res))
			}
			var out Deleted
			b, _ := json.Marshal(res.StructuredContent)
			if err := json.Unmarshal(b, &out); err != nil {
				t.Fatal(err)
			}
			if out != (Deleted{ID: id, Deleted: true, Reason: "a duplicate"}) {
				t.Errorf("delete_ticket: %+v", out)
			}
			mu.Lock()
			if len(asked) != 1 || !strings.Contains(asked[0], "Delete ticket "+id) {
				t.Errorf("the user was asked %q", asked)
			}
			mu.Unlock()
			// Deleted once: a second call finds no ticket, and asks nothing.
			res, err = cs.CallTool(ctx, call())
			if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "no ticket") {
				t.Errorf("a second delete: %v %+v", err, res)
			}
		})
	}
}

// TestDeleteTicketAsksThroughTheGatewayToTypeScript: the TypeScript SDK
// client (2025 era, with a session) is asked delete_ticket's question
// through the gateway with elicitation/create, and its answer reaches the
// tool.
func TestDeleteTicketAsksThroughTheGatewayToTypeScript(t *testing.T) {
	node, dir := typeScriptClient(t)
	url := behindGateway(t, "create_ticket", "delete_ticket")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id := createTicket(t, ctx, url, "Printer jam")
	cmd := exec.CommandContext(ctx, node, "interop.mjs", url, "delete_ticket", `{"id":"`+id+`"}`, "--elicit", `{"reason":"asked in TypeScript"}`)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("interop.mjs: %v\n%s", err, out)
	}
	var asked []string
	var result *Deleted
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var e struct {
			Event   string `json:"event"`
			Message string `json:"message"`
			Result  struct {
				IsError           bool     `json:"isError"`
				StructuredContent *Deleted `json:"structuredContent"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		switch e.Event {
		case "elicited":
			asked = append(asked, e.Message)
		case "called":
			if e.Result.IsError {
				t.Errorf("result %s", line)
			}
			result = e.Result.StructuredContent
		}
	}
	if len(asked) != 1 || !strings.Contains(asked[0], "Delete ticket "+id) {
		t.Errorf("the user was asked %q", asked)
	}
	if result == nil || *result != (Deleted{ID: id, Deleted: true, Reason: "asked in TypeScript"}) {
		t.Errorf("result %+v\n%s", result, out)
	}
}

func textOf(res *mcp.CallToolResult) string {
	if res == nil || len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

// typeScriptClient returns node and the directory of hack/interop, the
// TypeScript SDK client. Outside CI a machine without them skips the test;
// in CI (CI=true) it fails, since make test installs them.
func typeScriptClient(t *testing.T) (node, dir string) {
	t.Helper()
	dir = filepath.Join("..", "..", "hack", "interop")
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json"))
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the TypeScript SDK client is not installed (make interop-deps): %v", err)
		}
		t.Skipf("the TypeScript SDK client is not installed (make interop-deps): %v", err)
	}
	return node, dir
}
