package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// tsTasks is hack/interop/tasks.mjs: the TypeScript SDK client, connected
// to one endpoint, run one command at a time.
type tsTasks struct {
	t     *testing.T
	in    io.WriteCloser
	lines chan string
	n     atomic.Int64
	conn  map[string]any
}

func startTSTasks(t *testing.T, url, token string) *tsTasks {
	t.Helper()
	args := []string{"tasks.mjs", url}
	if token != "" {
		args = append(args, token)
	}
	cmd := exec.Command("node", args...)
	cmd.Dir = filepath.Join("..", "..", "hack", "interop")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &tsTasks{t: t, in: in, lines: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		_ = in.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	c.conn = c.next()
	if c.conn["event"] != "connected" {
		t.Fatalf("tasks.mjs did not connect: %v\n%s", c.conn, stderr.String())
	}
	return c
}

func (c *tsTasks) next() map[string]any {
	c.t.Helper()
	select {
	case line, ok := <-c.lines:
		if !ok {
			c.t.Fatal("tasks.mjs exited")
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			c.t.Fatalf("tasks.mjs said %q", line)
		}
		return m
	case <-time.After(30 * time.Second):
		c.t.Fatal("tasks.mjs did not answer within 30s")
	}
	return nil
}

// do runs one command and returns its answer.
func (c *tsTasks) do(cmd map[string]any) map[string]any {
	c.t.Helper()
	id := c.n.Add(1)
	cmd["id"] = id
	b, _ := json.Marshal(cmd)
	if _, err := c.in.Write(append(b, '\n')); err != nil {
		c.t.Fatal(err)
	}
	m := c.next()
	if m["id"] != float64(id) {
		c.t.Fatalf("answer %v to command %d", m, id)
	}
	return m
}

// start starts a task of tool and returns its id, failing the test on an
// error.
func (c *tsTasks) start(tool string, args map[string]any) string {
	c.t.Helper()
	m := c.do(map[string]any{"op": "start", "tool": tool, "args": args, "ttl": 60000})
	task, _ := m["task"].(map[string]any)
	id, _ := task["taskId"].(string)
	if m["event"] != "started" || id == "" {
		c.t.Fatalf("starting a task of %s: %v", tool, m)
	}
	return id
}

func (c *tsTasks) status(id string) string {
	c.t.Helper()
	m := c.do(map[string]any{"op": "get", "taskId": id})
	task, _ := m["task"].(map[string]any)
	s, _ := task["status"].(string)
	if m["event"] != "task" || s == "" {
		c.t.Fatalf("tasks/get %s: %v", id, m)
	}
	return s
}

// tsStats are mcp-server.mjs's counts.
type tsStats struct {
	Methods map[string]int `json:"methods"`
	Tasks   struct {
		Created, Completed, Cancelled int
	} `json:"tasks"`
}

func getTSStats(t *testing.T, addr string) tsStats {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/control/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s tsStats
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// startTSTaskServer starts mcp-server.mjs (sessions) serving ts_slow, a
// task tool, and ts_look, which is not one, and returns its address and
// the table entries of ToolSet apps/ts for them.
func startTSTaskServer(t *testing.T) (string, []spec.TableTool) {
	t.Helper()
	addr := startTSServer(t)
	body := `[{"name":"ts_look","inputSchema":{"type":"object"}},
		{"name":"ts_slow","inputSchema":{"type":"object","properties":{"ms":{"type":"number"}}},"execution":{"taskSupport":"optional"}}]`
	req, _ := http.NewRequest(http.MethodPut, "http://"+addr+"/control/tools", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	tools := mcpTableTools("apps", "ts", "/mcp", "ts_look", "ts_slow")
	for i := range tools {
		tools[i].ToolSetUID = "uid-ts"
		if tools[i].Name == "ts_slow" {
			tools[i].Execution = &spec.Execution{TaskSupport: spec.TaskSupportOptional}
		}
	}
	return addr, tools
}

func errorOf(m map[string]any) string {
	if m["event"] != "error" {
		return ""
	}
	return fmt.Sprint(m["message"])
}

// TestTasksThroughTheGateway: the TypeScript SDK client, through the
// gateway, to a TypeScript SDK server with sessions: it sees the task tool
// and the tasks capability, runs a task with its own polling to the end
// and reads the result, cancels another mid-run (the backend sees it), polls
// on a second replica a task started on the first, and finds a tampered or
// forged id unknown without the backend being asked. Each replica holds its
// own bound of tasks per caller.
func TestTasksThroughTheGateway(t *testing.T) {
	addr, tools := startTSTaskServer(t)
	r := new(routes)
	r.set("ts.apps.svc.cluster.local:8080", addr)
	key := []byte("a task key that both replicas share, 32+ bytes")
	opts := gateway.Options{CallTimeout: 20 * time.Second, TaskKey: key, MaxTasksPerCaller: 2}
	gA, urlA := newGateway(t, r, opts)
	gB, urlB := newGateway(t, r, opts)
	for _, g := range []*gateway.Gateway{gA, gB} {
		if err := g.SetTable(table(tools)); err != nil {
			t.Fatal(err)
		}
	}
	a := startTSTasks(t, urlA+"/mcp", "")
	b := startTSTasks(t, urlB+"/mcp", "")

	caps, _ := a.conn["capabilities"].(map[string]any)
	tasksCap, _ := caps["tasks"].(map[string]any)
	if _, ok := tasksCap["requests"].(map[string]any)["tools"].(map[string]any)["call"]; !ok {
		t.Fatalf("the gateway does not declare task-augmented tools/call: %v", caps)
	}
	if _, ok := tasksCap["list"]; ok {
		t.Fatalf("the gateway declares tasks/list, which it does not serve: %v", tasksCap)
	}

	list := a.do(map[string]any{"op": "list"})
	exec := map[string]any{}
	for _, tl := range list["tools"].([]any) {
		m := tl.(map[string]any)
		exec[m["name"].(string)] = m["execution"]
	}
	if ts, _ := exec["ts_slow"].(map[string]any); ts["taskSupport"] != "optional" || exec["ts_look"] != nil {
		t.Fatalf("tools/list gives execution %v", exec)
	}

	t.Run("polled to completion by the SDK", func(t *testing.T) {
		m := a.do(map[string]any{"op": "stream", "tool": "ts_slow", "args": map[string]any{"ms": 300}, "ttl": 60000})
		msgs, _ := m["messages"].([]any)
		if len(msgs) < 3 {
			t.Fatalf("callToolStream gave %v", m)
		}
		first := msgs[0].(map[string]any)
		task := first["task"].(map[string]any)
		if first["type"] != "taskCreated" || !strings.HasPrefix(task["taskId"].(string), "tpt1.") || task["status"] != "working" {
			t.Fatalf("first message %v", first)
		}
		if task["ttl"] != float64(60000) {
			t.Fatalf("the task's ttl is %v, want the 60000 asked for", task["ttl"])
		}
		polls := 0
		for _, x := range msgs[1 : len(msgs)-1] {
			if x.(map[string]any)["type"] == "taskStatus" {
				polls++
			}
		}
		last := msgs[len(msgs)-1].(map[string]any)
		res, _ := last["result"].(map[string]any)
		content, _ := res["content"].([]any)
		if last["type"] != "result" || len(content) != 1 || content[0].(map[string]any)["text"] != "ts_slow done after 300ms" || polls < 1 {
			t.Fatalf("the stream ends %v after %d polls", last, polls)
		}
		meta, _ := res["_meta"].(map[string]any)
		related, _ := meta["io.modelcontextprotocol/related-task"].(map[string]any)
		if related["taskId"] != task["taskId"] {
			t.Fatalf("the result's related task is %v, want the gateway's id", related)
		}
	})

	t.Run("cancelled mid-run", func(t *testing.T) {
		id := a.start("ts_slow", map[string]any{"ms": 60000})
		if s := a.status(id); s != "working" {
			t.Fatalf("status %s", s)
		}
		before := getTSStats(t, addr).Tasks.Cancelled
		m := a.do(map[string]any{"op": "cancel", "taskId": id})
		if task, _ := m["task"].(map[string]any); m["event"] != "cancelled" || task["status"] != "cancelled" || task["taskId"] != id {
			t.Fatalf("tasks/cancel: %v", m)
		}
		deadline := time.Now().Add(10 * time.Second)
		for getTSStats(t, addr).Tasks.Cancelled == before {
			if time.Now().After(deadline) {
				t.Fatal("the backend's task did not see its cancellation")
			}
			time.Sleep(20 * time.Millisecond)
		}
		if s := b.status(id); s != "cancelled" {
			t.Fatalf("on the other replica the task is %s", s)
		}
	})

	t.Run("started on one replica, polled on the other", func(t *testing.T) {
		id := a.start("ts_slow", map[string]any{"ms": 200})
		deadline := time.Now().Add(10 * time.Second)
		for b.status(id) != "completed" {
			if time.Now().After(deadline) {
				t.Fatal("the task did not complete")
			}
			time.Sleep(20 * time.Millisecond)
		}
		m := b.do(map[string]any{"op": "result", "taskId": id})
		res, _ := m["result"].(map[string]any)
		if content, _ := res["content"].([]any); m["event"] != "result" || len(content) != 1 || content[0].(map[string]any)["text"] != "ts_slow done after 200ms" {
			t.Fatalf("tasks/result on the other replica: %v", m)
		}
	})

	t.Run("a tampered or forged id is not found, and no backend is asked", func(t *testing.T) {
		id := a.start("ts_slow", map[string]any{"ms": 100})
		tampered := id[:len(id)-3] + map[bool]string{true: "A", false: "B"}[id[len(id)-3] != 'A'] + id[len(id)-2:]
		before := getTSStats(t, addr).Methods
		for _, bad := range []string{tampered, "tpt1." + strings.Repeat("A", 80), "not-a-task", strings.Repeat("x", 5000)} {
			for _, op := range []string{"get", "result", "cancel"} {
				m := a.do(map[string]any{"op": op, "taskId": bad})
				if !strings.Contains(errorOf(m), "task not found") {
					t.Fatalf("%s of a bad id: %v", op, m)
				}
			}
		}
		after := getTSStats(t, addr).Methods
		for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel", "initialize"} {
			if after[method] != before[method] {
				t.Fatalf("the backend was asked %s for bad ids: %d then %d", method, before[method], after[method])
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		for a.status(id) != "completed" {
			if time.Now().After(deadline) {
				t.Fatal("the task did not complete")
			}
			time.Sleep(20 * time.Millisecond)
		}
	})

	t.Run("a tool that is not a task is refused as one", func(t *testing.T) {
		m := a.do(map[string]any{"op": "start", "tool": "ts_look", "args": map[string]any{}})
		if errorOf(m) == "" || m["code"] != float64(-32601) {
			t.Fatalf("ts_look as a task: %v", m)
		}
	})

	t.Run("tasks/list is not served", func(t *testing.T) {
		if m := a.do(map[string]any{"op": "listTasks"}); !strings.Contains(errorOf(m), "tasks/list is not served") {
			t.Fatalf("tasks/list: %v", m)
		}
	})

	t.Run("each replica bounds the tasks of a caller", func(t *testing.T) {
		// Earlier tasks started on A have ended unseen by A (polled on B,
		// or not at all): A asks their backend before it refuses.
		ids := []string{a.start("ts_slow", map[string]any{"ms": 60000}), a.start("ts_slow", map[string]any{"ms": 60000})}
		m := a.do(map[string]any{"op": "start", "tool": "ts_slow", "args": map[string]any{"ms": 60000}, "ttl": 60000})
		if !strings.Contains(errorOf(m), "its limit per caller") {
			t.Fatalf("a third task on replica A: %v", m)
		}
		// Replica B counts its own.
		ids = append(ids, b.start("ts_slow", map[string]any{"ms": 60000}))
		// A cancel seen on A frees a place there.
		a.do(map[string]any{"op": "cancel", "taskId": ids[0]})
		ids[0] = a.start("ts_slow", map[string]any{"ms": 60000})
		for _, id := range ids {
			b.do(map[string]any{"op": "cancel", "taskId": id})
		}
	})
}

// TestTasksUnderAuthAreTheCallers: under --auth=kubernetes a task id is
// its caller's: another caller who may call the same tool finds it unknown,
// and the backend is not asked; the bound of tasks is per caller, so one
// caller at its bound leaves another unaffected; and a caller whose grant
// is gone finds its own task unknown.
func TestTasksUnderAuthAreTheCallers(t *testing.T) {
	addr, tools := startTSTaskServer(t)
	r := new(routes)
	r.set("ts.apps.svc.cluster.local:8080", addr)
	f := newFakeAPI()
	f.grant("alice", "apps", "")
	f.grant("bob", "apps", "")
	f.grant("carol", "apps", "ts_slow")
	g, url := newGateway(t, r, gateway.Options{
		CallTimeout: 20 * time.Second, MaxTasksPerCaller: 1,
		Auth: &gateway.KubernetesAuth{Client: f, TTL: time.Millisecond, DenyTTL: time.Millisecond},
	})
	if err := g.SetTable(table(tools)); err != nil {
		t.Fatal(err)
	}
	alice := startTSTasks(t, url+"/mcp", f.token("alice"))
	bob := startTSTasks(t, url+"/mcp", f.token("bob"))

	id := alice.start("ts_slow", map[string]any{"ms": 60000})
	before := getTSStats(t, addr).Methods
	for _, op := range []string{"get", "result", "cancel"} {
		if m := bob.do(map[string]any{"op": op, "taskId": id}); !strings.Contains(errorOf(m), "task not found") {
			t.Fatalf("bob's %s of alice's task: %v", op, m)
		}
	}
	if after := getTSStats(t, addr).Methods; after["tasks/get"] != before["tasks/get"] || after["tasks/cancel"] != before["tasks/cancel"] || after["tasks/result"] != before["tasks/result"] {
		t.Fatalf("the backend was asked for another caller's task: %v then %v", before, after)
	}
	if s := alice.status(id); s != "working" {
		t.Fatalf("alice's task is %s", s)
	}

	// Alice is at her bound of one; Bob is not.
	if m := alice.do(map[string]any{"op": "start", "tool": "ts_slow", "args": map[string]any{"ms": 60000}, "ttl": 60000}); !strings.Contains(errorOf(m), "its limit per caller") {
		t.Fatalf("alice's second task: %v", m)
	}
	bobs := bob.start("ts_slow", map[string]any{"ms": 60000})
	bob.do(map[string]any{"op": "cancel", "taskId": bobs})

	// A grant taken away takes the task with it.
	carol := startTSTasks(t, url+"/mcp", f.token("carol"))
	cid := carol.start("ts_slow", map[string]any{"ms": 60000})
	f.mu.Lock()
	delete(f.grants, saUser("carol"))
	f.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		m := carol.do(map[string]any{"op": "get", "taskId": cid})
		if strings.Contains(errorOf(m), "task not found") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("carol's task outlives her grant: %v", m)
		}
		time.Sleep(20 * time.Millisecond)
	}
	alice.do(map[string]any{"op": "cancel", "taskId": id})
}

// TestTasksOfAToolkitWorkload: the same flow to a toolkit workload, whose
// /mcp runs a tool declared toolkit.TaskSupport as a task: the TypeScript
// SDK client runs one to its result, and cancels another mid-run, which
// ends the tool's context; a second replica polls a task the first
// started.
func TestTasksOfAToolkitWorkload(t *testing.T) {
	var cancelled atomic.Int64
	slow := toolkit.MustNew("slow", "Works for ms milliseconds", func(ctx context.Context, in struct {
		Ms int `json:"ms"`
	}) (string, error) {
		select {
		case <-ctx.Done():
			cancelled.Add(1)
			return "", ctx.Err()
		case <-time.After(time.Duration(in.Ms) * time.Millisecond):
			return fmt.Sprintf("slow done after %dms", in.Ms), nil
		}
	}, toolkit.TaskSupport(spec.TaskSupportOptional))
	w := newWorkload(t, "apps", "kit", "", slow, echoTool("kit"))
	tools := w.tableTools()
	for i := range tools {
		for _, s := range w.reg.Specs() {
			if s.Name == tools[i].SourceName {
				tools[i].Execution = s.Execution
			}
		}
	}
	r := new(routes).add(w)
	opts := gateway.Options{CallTimeout: 20 * time.Second, TaskKey: []byte("a task key that both replicas share, 32+ bytes")}
	gA, urlA := newGateway(t, r, opts)
	gB, urlB := newGateway(t, r, opts)
	for _, g := range []*gateway.Gateway{gA, gB} {
		if err := g.SetTable(table(tools)); err != nil {
			t.Fatal(err)
		}
	}
	a := startTSTasks(t, urlA+"/mcp", "")
	b := startTSTasks(t, urlB+"/mcp", "")

	m := a.do(map[string]any{"op": "stream", "tool": "slow", "args": map[string]any{"ms": 200}, "ttl": 60000})
	msgs, _ := m["messages"].([]any)
	if len(msgs) < 3 {
		t.Fatalf("callToolStream gave %v", m)
	}
	last := msgs[len(msgs)-1].(map[string]any)
	res, _ := last["result"].(map[string]any)
	if content, _ := res["content"].([]any); last["type"] != "result" || len(content) == 0 || content[0].(map[string]any)["text"] != "slow done after 200ms" {
		t.Fatalf("the stream ends %v", last)
	}

	id := a.start("slow", map[string]any{"ms": 60000})
	if s := b.status(id); s != "working" {
		t.Fatalf("on replica B the task is %s", s)
	}
	if m := b.do(map[string]any{"op": "cancel", "taskId": id}); m["event"] != "cancelled" {
		t.Fatalf("tasks/cancel on replica B: %v", m)
	}
	deadline := time.Now().Add(10 * time.Second)
	for cancelled.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the tool's context did not end with its task's cancellation")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if s := a.status(id); s != "cancelled" {
		t.Fatalf("after the cancel the task is %s", s)
	}
}

// postRPC posts one JSON-RPC request of protocol version and returns its
// reply.
func postRPC(t *testing.T, url, version, method, params string) map[string]any {
	t.Helper()
	return replyOf(t, postRPCResponse(t, url, version, method, params))
}

// postRPCResponse is postRPC's exchange: the response, its body unread.
func postRPCResponse(t *testing.T, url, version, method, params string) *http.Response {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
	req, _ := http.NewRequestWithContext(bounded(t), http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", version)
	req.Header.Set("Mcp-Method", method)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestTasksCapabilityFollowsTheView: initialize (2025-11-25) and
// server/discover (2026-07-28) declare tasks on a view with a task tool,
// and not on one without; a task whose tool leaves the table is not found,
// and its backend is not asked.
func TestTasksCapabilityFollowsTheView(t *testing.T) {
	addr, tools := startTSTaskServer(t)
	r := new(routes)
	r.set("ts.apps.svc.cluster.local:8080", addr)
	plain := newWorkload(t, "other", "kit", "kit_", echoTool("kit"))
	r.add(plain)
	g, url := newGateway(t, r, gateway.Options{CallTimeout: 20 * time.Second, Sessions: true})
	if err := g.SetTable(table(tools, plain.tableTools())); err != nil {
		t.Fatal(err)
	}
	init := `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`
	discover := `{"_meta":{"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`
	for _, c := range []struct {
		path string
		want bool
	}{{"/mcp", true}, {"/mcp/namespaces/apps", true}, {"/mcp/namespaces/other", false}} {
		for _, q := range []struct{ version, method, params string }{{"2025-11-25", "initialize", init}, {"2026-07-28", "server/discover", discover}} {
			reply := postRPC(t, url+c.path, q.version, q.method, q.params)
			res, _ := reply["result"].(map[string]any)
			caps, _ := res["capabilities"].(map[string]any)
			if caps == nil {
				t.Fatalf("%s %s: %v", c.path, q.method, reply)
			}
			if _, got := caps["tasks"]; got != c.want || caps["tools"] == nil {
				t.Fatalf("%s %s declares %v, want tasks %v", c.path, q.method, caps, c.want)
			}
		}
	}

	// The TypeScript client in a 2025 session of the gateway (Sessions).
	a := startTSTasks(t, url+"/mcp", "")
	id := a.start("ts_slow", map[string]any{"ms": 60000})
	if s := a.status(id); s != "working" {
		t.Fatalf("status %s", s)
	}
	if err := g.SetTable(table(plain.tableTools())); err != nil {
		t.Fatal(err)
	}
	before := getTSStats(t, addr).Methods["tasks/get"]
	if m := a.do(map[string]any{"op": "get", "taskId": id}); !strings.Contains(errorOf(m), "task not found") {
		t.Fatalf("a task whose tool left the table: %v", m)
	}
	if after := getTSStats(t, addr).Methods["tasks/get"]; after != before {
		t.Fatalf("the backend was asked: %d then %d", before, after)
	}
}

// TestTaskRequestsAreBoundedPerCaller: a caller's tasks/* requests through
// one replica are bounded (each would cost a backend request): a client
// that sends them in a loop is refused once past a minute's worth, and is
// told when to retry.
func TestTaskRequestsAreBoundedPerCaller(t *testing.T) {
	_, url := newGateway(t, nil, gateway.Options{MaxTasksPerCaller: 1})
	params := `{"taskId":"tpt1.AAAA"}`
	for n := 1; ; n++ {
		reply := postRPC(t, url+"/mcp", "2025-11-25", "tasks/get", params)
		e, _ := reply["error"].(map[string]any)
		msg := fmt.Sprint(e["message"])
		if strings.Contains(msg, "too many task requests") {
			if n <= 1200 || !strings.Contains(msg, "retry in") {
				t.Fatalf("refused after %d requests: %s", n, msg)
			}
			return
		}
		if !strings.Contains(msg, "task not found") {
			t.Fatalf("request %d: %v", n, reply)
		}
		if n > 5000 {
			t.Fatal("5000 tasks/get requests and none refused")
		}
	}
}
