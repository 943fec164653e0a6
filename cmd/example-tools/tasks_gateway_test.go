package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// TestBuildReportRunsAsATaskThroughTwoGatewayReplicas: the TypeScript SDK
// client (hack/interop/tasks.mjs) runs the example tools' build_report as
// an MCP task through one gateway replica, polled by the SDK to its result,
// and cancels another mid-run through a second replica, which shares the
// first's task key.
func TestBuildReportRunsAsATaskThroughTwoGatewayReplicas(t *testing.T) {
	node, dir := typeScriptClient(t)
	in := start(t, "--allow-any-host-on-loopback")
	var tool spec.Tool
	for _, tl := range in.document(t).Tools {
		if tl.Name == "build_report" {
			tool = tl
		}
	}
	if !tool.Execution.Tasks() {
		t.Fatalf("build_report does not declare task support: %+v", tool.Execution)
	}
	const host = "reports.demo.svc.cluster.local:8080"
	base := "http://" + host
	tbl := &spec.Table{SchemaVersion: spec.SchemaVersion, Tools: []spec.TableTool{{
		Name: tool.Name, SourceName: tool.Name, Description: tool.Description, InputSchema: tool.InputSchema, OutputSchema: tool.OutputSchema,
		Execution: tool.Execution,
		ToolSet:   spec.ObjectReference{Namespace: "demo", Name: "reports"},
		Endpoints: &spec.Endpoints{Invoke: base + spec.InvokePrefix + tool.Name, MCP: base + spec.MCPPath},
	}}}
	tbl.Revision = spec.TableRevision(tbl.Tools)
	addr := strings.TrimPrefix(in.url, "http://")
	var urls []string
	for range 2 {
		g := gateway.New(&gateway.Options{TaskKey: []byte("the replicas' shared task key, 32 bytes or more"),
			DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
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
		urls = append(urls, srv.URL+"/mcp")
	}
	a := tasksClient(t, node, dir, urls[0])
	b := tasksClient(t, node, dir, urls[1])

	m := a(`{"op":"stream","tool":"build_report","args":{"sections":3,"delayMs":30},"ttl":60000}`)
	var streamed struct {
		Messages []struct {
			Type   string `json:"type"`
			Result struct {
				StructuredContent struct {
					Sections []string `json:"sections"`
				} `json:"structuredContent"`
			} `json:"result"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(m, &streamed); err != nil || len(streamed.Messages) < 3 {
		t.Fatalf("callToolStream gave %s", m)
	}
	last := streamed.Messages[len(streamed.Messages)-1]
	if streamed.Messages[0].Type != "taskCreated" || last.Type != "result" || len(last.Result.StructuredContent.Sections) != 3 {
		t.Fatalf("callToolStream gave %s", m)
	}

	var started struct {
		Task struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
	}
	if m = a(`{"op":"start","tool":"build_report","args":{"sections":20,"delayMs":2000},"ttl":60000}`); json.Unmarshal(m, &started) != nil || started.Task.TaskID == "" {
		t.Fatalf("starting a task: %s", m)
	}
	id, _ := json.Marshal(started.Task.TaskID)
	if m = b(`{"op":"cancel","taskId":` + string(id) + `}`); !strings.Contains(string(m), `"status":"cancelled"`) {
		t.Fatalf("tasks/cancel through the other replica: %s", m)
	}
	if m = a(`{"op":"get","taskId":` + string(id) + `}`); !strings.Contains(string(m), `"status":"cancelled"`) {
		t.Fatalf("tasks/get after the cancel: %s", m)
	}
}

// tasksClient starts tasks.mjs at url and returns a function that runs one
// command and returns its answer.
func tasksClient(t *testing.T, node, dir, url string) func(cmd string) json.RawMessage {
	t.Helper()
	cmd := exec.Command(node, "tasks.mjs", url)
	cmd.Dir = dir
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func() json.RawMessage {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("tasks.mjs exited")
			}
			return json.RawMessage(l)
		case <-time.After(30 * time.Second):
			t.Fatal("tasks.mjs did not answer within 30s")
		}
		return nil
	}
	if c := next(); !strings.Contains(string(c), `"event":"connected"`) {
		t.Fatalf("tasks.mjs: %s", c)
	}
	return func(c string) json.RawMessage {
		t.Helper()
		if _, err := io.WriteString(stdin, c+"\n"); err != nil {
			t.Fatal(err)
		}
		return next()
	}
}
