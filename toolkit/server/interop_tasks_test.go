package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/server"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// SlowInput is the slow tool's input.
type SlowInput struct {
	Steps   int `json:"steps" tool:"minimum=1;maximum=1000"`
	DelayMs int `json:"delayMs" tool:"minimum=0;maximum=1000"`
}

// SlowOutput is the slow tool's output.
type SlowOutput struct {
	Steps int `json:"steps"`
}

// slowTool runs steps of delayMs each, reporting its progress after each,
// and sends on ended how each call ended: "done" or its context's error.
func slowTool(ended chan<- string) *toolkit.Tool {
	return must(toolkit.New("slow", "Takes steps times delayMs.", func(ctx context.Context, in SlowInput) (SlowOutput, error) {
		for i := 1; i <= in.Steps; i++ {
			select {
			case <-ctx.Done():
				ended <- ctx.Err().Error()
				return SlowOutput{}, ctx.Err()
			case <-time.After(time.Duration(in.DelayMs) * time.Millisecond):
			}
			toolkit.Progress(ctx, float64(i), float64(in.Steps), fmt.Sprintf("step %d", i))
		}
		ended <- "done"
		return SlowOutput{Steps: in.Steps}, nil
	}, toolkit.TaskSupport(spec.TaskSupportOptional)))
}

type taskJSON struct {
	TaskID        string  `json:"taskId"`
	Status        string  `json:"status"`
	StatusMessage string  `json:"statusMessage"`
	CreatedAt     string  `json:"createdAt"`
	LastUpdatedAt string  `json:"lastUpdatedAt"`
	TTL           float64 `json:"ttl"`
	PollInterval  float64 `json:"pollInterval"`
}

type rpcErrJSON struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// TestTypeScriptSDKInterop_Tasks drives MCP 2025-11-25 tasks with the
// TypeScript SDK's client: it lists the tool with execution.taskSupport,
// calls it as a task and polls it to completion, cancels another
// mid-run (the tool's context ends), fills its cap of running tasks and
// is refused the next, while a second client, in a session of its own,
// still starts one and cannot see the first one's.
func TestTypeScriptSDKInterop_Tasks(t *testing.T) {
	node := requireNode(t)
	const taskCap = 2
	ended := make(chan string, 16)
	reg := new(toolkit.Registry)
	if err := reg.Add(slowTool(ended)); err != nil {
		t.Fatal(err)
	}
	h := server.New(reg, &server.Options{MCPSessions: true, MaxTasksPerCaller: taskCap, TaskPollInterval: 20 * time.Millisecond})
	srv := httptest.NewServer(h)
	t.Cleanup(func() { h.Close(); srv.Close() })

	events := runInterop(t, node, srv.URL, "slow", `{"steps":3,"delayMs":10}`,
		fmt.Sprintf("--tasks=%d", taskCap), `--long={"steps":1000,"delayMs":20}`)
	next(t, events, "connected")

	var tools []struct {
		Name      string          `json:"name"`
		Execution *spec.Execution `json:"execution"`
	}
	if err := json.Unmarshal(next(t, events, "tools").Tools, &tools); err != nil {
		t.Fatal(err)
	}
	if len(tools) != 1 || tools[0].Execution == nil || tools[0].Execution.TaskSupport != spec.TaskSupportOptional {
		t.Fatalf("tools/list gave %+v, want slow with execution.taskSupport optional", tools)
	}

	var completed struct {
		Task     taskJSON `json:"task"`
		Statuses []struct {
			Status string `json:"status"`
		} `json:"statuses"`
		Result struct {
			StructuredContent SlowOutput                 `json:"structuredContent"`
			IsError           bool                       `json:"isError"`
			Meta              map[string]json.RawMessage `json:"_meta"`
		} `json:"result"`
	}
	decodeEvent(t, next(t, events, "taskCompleted"), &completed)
	if completed.Task.Status != "working" || len(completed.Task.TaskID) < 22 || completed.Task.TTL != 60000 || completed.Task.PollInterval != 20 {
		t.Errorf("created task %+v", completed.Task)
	}
	if n := len(completed.Statuses); n == 0 || completed.Statuses[n-1].Status != "completed" {
		t.Errorf("statuses polled %+v, want the last completed", completed.Statuses)
	}
	if completed.Result.IsError || completed.Result.StructuredContent.Steps != 3 {
		t.Errorf("tasks/result %+v", completed.Result)
	}
	if rel := string(completed.Result.Meta["io.modelcontextprotocol/related-task"]); !strings.Contains(rel, completed.Task.TaskID) {
		t.Errorf("tasks/result _meta related-task %s, want task %s", rel, completed.Task.TaskID)
	}
	waitEnded(t, ended, "done")

	var running struct {
		Task taskJSON `json:"task"`
	}
	decodeEvent(t, next(t, events, "taskRunning"), &running)
	if running.Task.Status != "working" || !strings.HasPrefix(running.Task.StatusMessage, "step ") {
		t.Errorf("running task %+v, want working with its progress as status message", running.Task)
	}
	var cancelled struct {
		Task  taskJSON `json:"task"`
		After taskJSON `json:"after"`
	}
	decodeEvent(t, next(t, events, "taskCancelled"), &cancelled)
	if cancelled.Task.Status != "cancelled" || cancelled.After.Status != "cancelled" || cancelled.Task.TaskID != running.Task.TaskID {
		t.Errorf("tasks/cancel %+v, then tasks/get %+v", cancelled.Task, cancelled.After)
	}
	waitEnded(t, ended, context.Canceled.Error())

	var refused struct {
		Error   *rpcErrJSON `json:"error"`
		Running int         `json:"running"`
	}
	decodeEvent(t, next(t, events, "capRefused"), &refused)
	if refused.Error == nil || refused.Error.Code != server.CodeTooManyTasks || !strings.Contains(refused.Error.Message, "2 tasks running") || refused.Running != taskCap {
		t.Errorf("past the cap of %d: %+v (%d running)", taskCap, refused.Error, refused.Running)
	}

	var other struct {
		Task       taskJSON    `json:"task"`
		ForeignGet *rpcErrJSON `json:"foreignGet"`
		Listed     []string    `json:"listed"`
	}
	decodeEvent(t, next(t, events, "otherCaller"), &other)
	if other.Task.Status != "working" {
		t.Errorf("the other caller's task %+v", other.Task)
	}
	if other.ForeignGet == nil || other.ForeignGet.Code != -32602 || !strings.Contains(other.ForeignGet.Message, "task not found") {
		t.Errorf("the other caller's tasks/get of the first's task: %+v, want not found", other.ForeignGet)
	}
	if !slices.Equal(other.Listed, []string{other.Task.TaskID}) {
		t.Errorf("the other caller lists %v, want only its own %s", other.Listed, other.Task.TaskID)
	}

	var own struct {
		Tasks []taskJSON `json:"tasks"`
	}
	decodeEvent(t, next(t, events, "ownList"), &own)
	statuses := map[string]int{}
	for _, tk := range own.Tasks {
		statuses[tk.Status]++
	}
	// A caller keeps at most taskCap finished tasks: the first of the
	// cap's dropped the oldest, the completed one. Left are the one
	// cancelled mid-run and the cap's, cancelled since.
	if len(own.Tasks) != 1+taskCap || statuses["cancelled"] != 1+taskCap || own.Tasks[0].TaskID != running.Task.TaskID {
		t.Errorf("the first caller lists %+v", own.Tasks)
	}
	for range taskCap + 1 {
		waitEnded(t, ended, context.Canceled.Error())
	}
}

func decodeEvent(t *testing.T, e interopEvent, v any) {
	t.Helper()
	if err := json.Unmarshal(e.Raw, v); err != nil {
		t.Fatalf("%s: %v", e.Raw, err)
	}
}

// waitEnded waits, bounded, for the next call of the slow tool to end as
// want says.
func waitEnded(t *testing.T, ended <-chan string, want string) {
	t.Helper()
	select {
	case got := <-ended:
		if got != want {
			t.Errorf("the tool's call ended with %q, want %q", got, want)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the tool's call did not end (%s) within 20s", want)
	}
}
