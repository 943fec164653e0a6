package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// mcpPost sends one JSON-RPC request to the instance's /mcp and returns
// its result, failing on an error.
func mcpPost(t *testing.T, in *instance, method, params string) json.RawMessage {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":%s}`, method, params)
	req, err := http.NewRequest(http.MethodPost, in.url+spec.MCPPath, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var msg struct {
		Result json.RawMessage  `json:"result"`
		Error  *json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(b, &msg); err != nil || msg.Error != nil {
		t.Fatalf("%s: %d %s", method, resp.StatusCode, b)
	}
	return msg.Result
}

// build_report runs as an MCP task: created, polled to completion with
// its progress as the status message, and read with tasks/result.
func TestBuildReportRunsAsATask(t *testing.T) {
	in := start(t)
	var created struct {
		Task struct {
			TaskID string `json:"taskId"`
			Status string `json:"status"`
		} `json:"task"`
	}
	if err := json.Unmarshal(mcpPost(t, in, "tools/call", `{"name":"build_report","arguments":{"sections":3,"delayMs":20},"task":{"ttl":60000}}`), &created); err != nil || created.Task.Status != "working" {
		t.Fatalf("created %+v %v", created, err)
	}
	id := fmt.Sprintf(`{"taskId":%q}`, created.Task.TaskID)
	deadline := time.Now().Add(20 * time.Second)
	var messages []string
	for {
		var got struct {
			Status        string `json:"status"`
			StatusMessage string `json:"statusMessage"`
		}
		if err := json.Unmarshal(mcpPost(t, in, "tasks/get", id), &got); err != nil {
			t.Fatal(err)
		}
		messages = append(messages, got.StatusMessage)
		if got.Status == "completed" {
			break
		}
		if got.Status != "working" || time.Now().After(deadline) {
			t.Fatalf("status %+v", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if last := messages[len(messages)-1]; last != "wrote section 3 of 3 (3/3)" {
		t.Errorf("last status message %q", last)
	}
	var res struct {
		StructuredContent Report `json:"structuredContent"`
	}
	if err := json.Unmarshal(mcpPost(t, in, "tasks/result", id), &res); err != nil || len(res.StructuredContent.Sections) != 3 {
		t.Errorf("tasks/result %+v %v", res, err)
	}
}
