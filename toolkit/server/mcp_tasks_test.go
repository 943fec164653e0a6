package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/server"
	"github.com/toolplane/toolplane/toolkit/spec"
)

type rpcReply struct {
	status int
	result json.RawMessage
	err    *rpcErrJSON
}

// rpc posts one JSON-RPC request to url's /mcp, with header pairs, and
// reads the reply in JSON or as an SSE stream alike.
func rpc(t *testing.T, url, method, params string, header ...string) rpcReply {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":%q,"params":%s}`, method, params)
	req, err := http.NewRequestWithContext(bounded(t), http.MethodPost, url+spec.MCPPath, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := rpcReply{status: resp.StatusCode}
	if resp.StatusCode != http.StatusOK {
		return out
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "text/event-stream" {
		sc := bufio.NewScanner(bytes.NewReader(raw))
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				raw = []byte(data)
			}
		}
	}
	var msg struct {
		Result json.RawMessage `json:"result"`
		Error  *rpcErrJSON     `json:"error"`
	}
	if err := json.Unmarshal(raw, &msg); err != nil {
		t.Fatalf("%s: %q: %v", method, raw, err)
	}
	out.result, out.err = msg.Result, msg.Error
	return out
}

func (r rpcReply) task(t *testing.T) taskJSON {
	t.Helper()
	var v struct {
		Task taskJSON `json:"task"`
	}
	if r.err != nil || json.Unmarshal(r.result, &v) != nil || v.Task.TaskID == "" {
		t.Fatalf("want a task, got %d %s %+v", r.status, r.result, r.err)
	}
	return v.Task
}

func (r rpcReply) wantError(t *testing.T, code int, contains string) {
	t.Helper()
	if r.err == nil || r.err.Code != code || !strings.Contains(r.err.Message, contains) {
		t.Errorf("got %d %s %+v, want JSON-RPC error %d %q", r.status, r.result, r.err, code, contains)
	}
}

// waitTool is a tool that runs until its context ends.
func waitTool(name, support string) *toolkit.Tool {
	return must(toolkit.New(name, "Waits for its context to end.", func(ctx context.Context, _ struct{}) (struct{}, error) {
		<-ctx.Done()
		return struct{}{}, ctx.Err()
	}, toolkit.TaskSupport(support)))
}

func TestMCPTasksFollowTaskSupport(t *testing.T) {
	reg := new(toolkit.Registry)
	for _, tl := range []*toolkit.Tool{
		waitTool("must", spec.TaskSupportRequired),
		waitTool("may", spec.TaskSupportOptional),
		must(toolkit.New("never", "An ordinary tool.", echo)),
	} {
		if err := reg.Add(tl); err != nil {
			t.Fatal(err)
		}
	}
	h := server.New(reg, &server.Options{TaskPollInterval: 10 * time.Millisecond})
	srv := httptest.NewServer(h)
	t.Cleanup(func() { h.Close(); srv.Close() })

	init := rpc(t, srv.URL, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)
	var ir struct {
		Capabilities struct {
			Tasks json.RawMessage `json:"tasks"`
			Tools json.RawMessage `json:"tools"`
		} `json:"capabilities"`
	}
	if err := json.Unmarshal(init.result, &ir); err != nil || string(ir.Capabilities.Tasks) != `{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}` || ir.Capabilities.Tools == nil {
		t.Errorf("initialize capabilities %s (%v)", init.result, err)
	}

	var list struct {
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
			Execution   *spec.Execution `json:"execution"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(rpc(t, srv.URL, "tools/list", `{}`).result, &list); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, tl := range list.Tools {
		got[tl.Name] = "none"
		if tl.Execution != nil {
			got[tl.Name] = tl.Execution.TaskSupport
		}
		if want, _ := reg.Lookup(tl.Name); string(tl.InputSchema) != string(want.Spec().InputSchema) {
			t.Errorf("%s inputSchema %s, want the spec's bytes %s", tl.Name, tl.InputSchema, want.Spec().InputSchema)
		}
	}
	if fmt.Sprint(got) != "map[may:optional must:required never:none]" {
		t.Errorf("tools/list execution %v", got)
	}

	rpc(t, srv.URL, "tools/call", `{"name":"must","arguments":{}}`).wantError(t, -32601, "must be called as a task")
	rpc(t, srv.URL, "tools/call", `{"name":"must","arguments":{},"task":{"ttl":"soon"}}`).wantError(t, -32602, "invalid tools/call params")
	rpc(t, srv.URL, "tools/call", `{"name":"must","arguments":{},"task":{"ttl":1e999}}`).wantError(t, -32602, "invalid tools/call params")
	rpc(t, srv.URL, "tools/call", `{"name":"never","arguments":{"text":"x"},"task":{}}`).wantError(t, -32601, "cannot be called as a task")
	if r := rpc(t, srv.URL, "tools/call", `{"name":"never","arguments":{"text":"x"}}`); r.err != nil || !strings.Contains(string(r.result), `"echo":"x"`) {
		t.Errorf("an ordinary call: %s %+v", r.result, r.err)
	}

	tk := rpc(t, srv.URL, "tools/call", `{"name":"must","arguments":{},"task":{"ttl":5000}}`).task(t)
	if tk.Status != "working" || tk.TTL != 5000 || tk.PollInterval != 10 {
		t.Errorf("created %+v", tk)
	}
	var listed struct {
		Tasks []taskJSON `json:"tasks"`
	}
	if err := json.Unmarshal(rpc(t, srv.URL, "tasks/list", `{}`).result, &listed); err != nil || len(listed.Tasks) != 1 || listed.Tasks[0].TaskID != tk.TaskID {
		t.Errorf("tasks/list %+v %v", listed, err)
	}
	// tasks/result blocks until the task ends, here by tasks/cancel.
	result := make(chan rpcReply, 1)
	go func() { result <- rpc(t, srv.URL, "tasks/result", fmt.Sprintf(`{"taskId":%q}`, tk.TaskID)) }()
	var cancelled taskJSON
	if err := json.Unmarshal(rpc(t, srv.URL, "tasks/cancel", fmt.Sprintf(`{"taskId":%q}`, tk.TaskID)).result, &cancelled); err != nil || cancelled.Status != "cancelled" {
		t.Errorf("tasks/cancel %+v %v", cancelled, err)
	}
	select {
	case r := <-result:
		r.wantError(t, -32602, "was cancelled")
	case <-time.After(10 * time.Second):
		t.Fatal("tasks/result did not return once the task was cancelled")
	}
	rpc(t, srv.URL, "tasks/cancel", fmt.Sprintf(`{"taskId":%q}`, tk.TaskID)).wantError(t, -32602, "finished")
	rpc(t, srv.URL, "tasks/get", `{"taskId":"nope"}`).wantError(t, -32602, "task not found")
	rpc(t, srv.URL, "tasks/get", `{}`).wantError(t, -32602, "takes params.taskId")
}

// TestMCPTasksAreKeptPerVerifiedCaller keys tasks by the subject of a
// verified Txn-Token: alice's cap does not hold bob, neither sees the
// other's tasks, and an anonymous caller (keyed by address) is apart.
func TestMCPTasksAreKeptPerVerifiedCaller(t *testing.T) {
	is := newIssuer(t)
	k := newKey(t, "k1", jose.ES256)
	is.publish(k)
	reg := new(toolkit.Registry)
	if err := reg.Add(waitTool("wait", spec.TaskSupportOptional)); err != nil {
		t.Fatal(err)
	}
	h := server.New(reg, &server.Options{MaxTasksPerCaller: 1, TxnToken: &server.TxnTokenOptions{JWKSURL: is.url(), Audience: testAudience}})
	srv := httptest.NewServer(h)
	t.Cleanup(func() { h.Close(); srv.Close() })
	alice := []string{server.TxnTokenHeader, sign(t, k, claims("alice"))}
	bob := []string{server.TxnTokenHeader, sign(t, k, claims("bob"))}
	const call = `{"name":"wait","arguments":{},"task":{}}`

	mine := rpc(t, srv.URL, "tools/call", call, alice...).task(t)
	if mine.TTL != float64(server.DefaultMaxTaskTTL.Milliseconds()) {
		t.Errorf("a task that asks no ttl lives %v ms, want the most, %d", mine.TTL, server.DefaultMaxTaskTTL.Milliseconds())
	}
	rpc(t, srv.URL, "tools/call", call, alice...).wantError(t, server.CodeTooManyTasks, "1 tasks running")
	theirs := rpc(t, srv.URL, "tools/call", call, bob...).task(t)
	rpc(t, srv.URL, "tasks/get", fmt.Sprintf(`{"taskId":%q}`, mine.TaskID), bob...).wantError(t, -32602, "task not found")
	rpc(t, srv.URL, "tasks/cancel", fmt.Sprintf(`{"taskId":%q}`, mine.TaskID), bob...).wantError(t, -32602, "task not found")
	rpc(t, srv.URL, "tasks/get", fmt.Sprintf(`{"taskId":%q}`, theirs.TaskID), alice...).wantError(t, -32602, "task not found")
	rpc(t, srv.URL, "tools/call", call).task(t) // anonymous: by address
	rpc(t, srv.URL, "tasks/get", fmt.Sprintf(`{"taskId":%q}`, mine.TaskID)).wantError(t, -32602, "task not found")
	rpc(t, srv.URL, "tasks/list", `{}`, server.TxnTokenHeader, "forged").wantError(t, server.CodeTxnTokenInvalid, "refused")
	if r := rpc(t, srv.URL, "tasks/get", fmt.Sprintf(`{"taskId":%q}`, mine.TaskID), alice...); r.err != nil {
		t.Errorf("alice's own task: %+v", r.err)
	}
}

func TestMCPTasksRefuseAnUnknownSession(t *testing.T) {
	reg := new(toolkit.Registry)
	if err := reg.Add(waitTool("wait", spec.TaskSupportOptional)); err != nil {
		t.Fatal(err)
	}
	h := server.New(reg, &server.Options{MCPSessions: true})
	srv := httptest.NewServer(h)
	t.Cleanup(func() { h.Close(); srv.Close() })
	// A made-up session would be a fresh quota per request.
	if r := rpc(t, srv.URL, "tools/call", `{"name":"wait","arguments":{},"task":{}}`, "Mcp-Session-Id", "made-up"); r.status != http.StatusNotFound {
		t.Errorf("a task in an unknown session: %d %s", r.status, r.result)
	}
}

// TestMCPTasksAreOffWithoutTaskTools: a registry without a tool that
// supports tasks is served by the SDK alone.
func TestMCPTasksAreOffWithoutTaskTools(t *testing.T) {
	s := newTestServer(t, nil)
	init := rpc(t, s.URL, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)
	if strings.Contains(string(init.result), `"tasks"`) {
		t.Errorf("initialize advertises tasks: %s", init.result)
	}
	// The SDK refuses a method it does not know with 400.
	if r := rpc(t, s.URL, "tasks/list", `{}`); r.status != http.StatusBadRequest {
		t.Errorf("tasks/list: %d %s %+v, want the SDK's refusal", r.status, r.result, r.err)
	}
}

// FuzzMCPTasksFront sends the tasks front any message: it never panics,
// and every reply is a status the SDK or the front gives.
//
//	go test ./server -run '^$' -fuzz FuzzMCPTasksFront -fuzztime 30s
func FuzzMCPTasksFront(f *testing.F) {
	reg := new(toolkit.Registry)
	quickTask := must(toolkit.New("quick", "Returns at once.", echo, toolkit.TaskSupport(spec.TaskSupportRequired)))
	if err := reg.Add(quickTask); err != nil {
		f.Fatal(err)
	}
	h := server.New(reg, &server.Options{MaxTasksPerCaller: 4, MaxTasks: 8})
	f.Cleanup(func() { h.Close() })
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"quick","arguments":{"text":"x"},"task":{"ttl":1000}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"quick","arguments":{"text":"x"}}}`,
		`{"jsonrpc":"2.0","id":"a","method":"tasks/get","params":{"taskId":"x"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tasks/list","params":null}`,
		`{"jsonrpc":"2.0","id":3,"method":"tasks/cancel","params":[1]}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"f","version":"1"}}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"tasks/list"}]`,
		`{"jsonrpc":"2.0","method":"tasks/list"}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest(http.MethodPost, spec.MCPPath, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		rec := httptest.NewRecorder()
		ctx, cancel := context.WithTimeout(req.Context(), 5*time.Second)
		defer cancel()
		h.ServeHTTP(rec, req.WithContext(ctx))
		if rec.Code >= 500 {
			t.Fatalf("%q: %d %s", body, rec.Code, rec.Body)
		}
	})
}

// TestMCPTasksFrontReadsKeysAsTheSDKDoes is a red-team spec: the front
// looked at a request with encoding/json, which matches keys whatever
// their case and keeps the last, while the SDK matches them exactly. A
// body whose "method" or "name" had a differently cased twin after it was
// one thing to the front and another to the SDK: a tool whose
// taskSupport is required ran as an ordinary call, outside the caller's
// bound on tasks.
func TestMCPTasksFrontReadsKeysAsTheSDKDoes(t *testing.T) {
	reg := new(toolkit.Registry)
	for _, tl := range []*toolkit.Tool{
		must(toolkit.New("must", "Returns at once, as a task only.", echo, toolkit.TaskSupport(spec.TaskSupportRequired))),
		must(toolkit.New("never", "An ordinary tool.", echo)),
	} {
		if err := reg.Add(tl); err != nil {
			t.Fatal(err)
		}
	}
	h := server.New(reg, nil)
	srv := httptest.NewServer(h)
	t.Cleanup(func() { h.Close(); srv.Close() })
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"must","arguments":{"text":"x"}},"Method":"ping"}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"must","arguments":{"text":"x"},"Name":"never"}}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"must","arguments":{"text":"x"},"NAME":"nope"}}`,
	} {
		req, err := http.NewRequestWithContext(bounded(t), http.MethodPost, srv.URL+spec.MCPPath, strings.NewReader(body))
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
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if strings.Contains(string(raw), `"echo"`) || !strings.Contains(string(raw), "must be called as a task") {
			t.Errorf("%s: %d %.300s, want the error that must is called as a task only", body, resp.StatusCode, raw)
		}
	}
}

// TestMCPTasksThatDoNotStopStillCount is a red-team spec: tasks/cancel
// (or a task's lifetime) freed the task's place at once, while its tool
// may not heed its context and go on running. A caller that started and
// cancelled tasks in a loop ran as many of such a tool at once as it
// liked, past its bound and the server's. A task counts until its tool
// returns.
func TestMCPTasksThatDoNotStopStillCount(t *testing.T) {
	release := make(chan struct{})
	var running atomic.Int64
	stubborn := must(toolkit.New("stubborn", "Runs until released, whatever its context.", func(context.Context, struct{}) (struct{}, error) {
		running.Add(1)
		defer running.Add(-1)
		<-release
		return struct{}{}, nil
	}, toolkit.TaskSupport(spec.TaskSupportOptional)))
	reg := new(toolkit.Registry)
	if err := reg.Add(stubborn); err != nil {
		t.Fatal(err)
	}
	h := server.New(reg, &server.Options{MaxTasksPerCaller: 2, MaxTasks: 4})
	srv := httptest.NewServer(h)
	t.Cleanup(func() { h.Close(); srv.Close() })
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })

	start := func() rpcReply {
		return rpc(t, srv.URL, "tools/call", `{"name":"stubborn","arguments":{},"task":{"ttl":60000}}`)
	}
	for round := range 2 {
		for range 2 {
			r := start()
			if round == 1 {
				r.wantError(t, server.CodeTooManyTasks, "too many tasks")
				continue
			}
			tk := r.task(t)
			if r := rpc(t, srv.URL, "tasks/cancel", fmt.Sprintf(`{"taskId":%q}`, tk.TaskID)); r.err != nil {
				t.Fatalf("tasks/cancel: %+v", r.err)
			}
		}
	}
	if n := running.Load(); n > 2 {
		t.Errorf("%d runs of the tool at once, for a caller bound to 2 tasks", n)
	}
	// Once the tool returns, the places are free again.
	releaseOnce.Do(func() { close(release) })
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := start()
		if r.err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the tool returned, still %+v", r.err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
