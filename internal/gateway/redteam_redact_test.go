package gateway_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// Attacks on the redaction of a ToolSet's token from what its workload
// returns, by a workload (which knows its own token and writes every byte
// of its replies) and by a caller whose input the workload echoes. Each
// failed before the redaction looked for the token in decoded strings,
// redacted before it cut, and kept the gateway's own words in a withheld
// task answer.

// rawRequestHandler serves name as an MCP server that answers initialize
// as a server of tasks and every other call with answer's result or error,
// as fixed JSON that no SDK would write; answer sees the whole request (to
// tell a task-augmented tools/call from an ordinary one).
func rawRequestHandler(name string, answer func(req *jsonrpc.Request) (json.RawMessage, *jsonrpc.Error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		msg, err := jsonrpc.DecodeMessage(body)
		req, ok := msg.(*jsonrpc.Request)
		if err != nil || !ok || !req.IsCall() {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		resp := &jsonrpc.Response{ID: req.ID}
		if req.Method == "initialize" {
			resp.Result = json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"tasks":{"requests":{"tools":{"call":{}}}}},"serverInfo":{"name":"` + name + `","version":"1"}}`)
		} else {
			resp.Result, resp.Error = answer(req)
		}
		b, _ := jsonrpc.EncodeMessage(resp)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	})
}

// isTaskCall reports whether req is a task-augmented tools/call.
func isTaskCall(req *jsonrpc.Request) bool {
	var p struct {
		Task json.RawMessage `json:"task"`
	}
	_ = json.Unmarshal(req.Params, &p)
	return req.Method == "tools/call" && len(p.Task) > 0
}

// redactRig serves h over TLS as the ToolSet tenant/tasker (token token)
// with one tool "slow" that supports tasks, behind a gateway, and returns
// the gateway's MCP endpoint.
func redactRig(t *testing.T, token string, h http.Handler, opts gateway.Options) string {
	t.Helper()
	const host = "tasker.tenant.svc.cluster.local"
	ca := newPrivateCA(t)
	cert := ca.serving(t, host)
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	r := new(routes)
	r.set(host+":8443", srv.Listener.Addr().String())
	opts.Credentials = kubernetesCredentials(t, credentialObjects("tenant", "tasker", "https", token, ca.pem)...)
	if opts.CallTimeout == 0 {
		opts.CallTimeout = 10 * time.Second
	}
	g, url := newGateway(t, r, opts)
	tool := secureTableTool("tenant", "tasker", "slow", "https://"+host+":8443/mcp")
	tool.Execution = &spec.Execution{TaskSupport: spec.TaskSupportOptional}
	if err := g.SetTable(table([]spec.TableTool{tool})); err != nil {
		t.Fatal(err)
	}
	return url + "/mcp"
}

// createTaskID creates a task through the gateway and returns its sealed id.
func createTaskID(t *testing.T, endpoint string) (string, map[string]any) {
	t.Helper()
	created := postRPC(t, endpoint, "2025-11-25", "tools/call", `{"name":"slow","arguments":{},"task":{"ttl":60000}}`)
	res, _ := created["result"].(map[string]any)
	view, _ := res["task"].(map[string]any)
	id, _ := view["taskId"].(string)
	if !strings.HasPrefix(id, "tpt1.") {
		t.Fatalf("no sealed task id: %v", created)
	}
	return id, created
}

// shows reports whether the token is in answer as the client decodes it,
// but for the sealed id.
func shows(answer map[string]any, token, id string) (string, bool) {
	b := decoded(answer)
	s := string(b)
	if id != "" {
		s = strings.ReplaceAll(s, id, "")
	}
	return string(b), strings.Contains(s, token)
}

// Attack 1. Redaction of a task's answers is a byte replacement on the
// backend's raw JSON. JSON lets a string hold any character as an escape:
// "\u002B" for '+', "\/" for '/'. System.Text.Json (the C# MCP SDK's
// encoder) writes '+' as \u002B by default, PHP's json_encode writes '/'
// as \/; a base64 token with either, echoed by such a workload (a
// "whoami" tool, a debug status), is not in the raw bytes, is not
// redacted, and every client decodes it back to the token. An ordinary
// (non-task) call of the same workload is safe: the gateway decodes the
// result and re-encodes it (redactResult) before it looks for the token.
func TestRedTeamEscapedTokenInTaskAnswersReachesTheClient(t *testing.T) {
	const (
		token   = "k3y+Tok/en=="
		escaped = `k3y\u002BTok\/en==`
	)
	task := `{"taskId":"b-1","status":"working","statusMessage":"auth ` + escaped + `","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttl":60000,"pollInterval":1000}`
	content := `{"content":[{"type":"text","text":"Authorization: Bearer ` + escaped + `"}]}`
	endpoint := redactRig(t, token, rawRequestHandler("tasker", func(req *jsonrpc.Request) (json.RawMessage, *jsonrpc.Error) {
		switch {
		case isTaskCall(req):
			return json.RawMessage(`{"task":` + task + `}`), nil
		case req.Method == "tools/call":
			return json.RawMessage(content), nil
		case req.Method == "tasks/get":
			return json.RawMessage(task), nil
		case req.Method == "tasks/result":
			return json.RawMessage(content), nil
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "no"}
	}), gateway.Options{})

	// The control: an ordinary call of the same workload, same bytes.
	plain := postRPC(t, endpoint, "2025-11-25", "tools/call", `{"name":"slow","arguments":{}}`)
	if b, leaked := shows(plain, token, ""); leaked {
		t.Errorf("ordinary tools/call: the token reached the client: %s", b)
	}

	id, created := createTaskID(t, endpoint)
	if b, leaked := shows(created, token, id); leaked {
		t.Errorf("task-augmented tools/call: the token reached the client: %s", b)
	}
	get := postRPC(t, endpoint, "2025-11-25", "tasks/get", `{"taskId":"`+id+`"}`)
	if b, leaked := shows(get, token, id); leaked {
		t.Errorf("tasks/get: the token reached the client: %s", b)
	}
	result := postRPC(t, endpoint, "2025-11-25", "tasks/result", `{"taskId":"`+id+`"}`)
	if b, leaked := shows(result, token, id); leaked {
		t.Errorf("tasks/result: the token reached the client: %s", b)
	}
}

// Attack 2. A token with a character Go's encoder escapes ('&', '<', '>':
// \u0026, \u003c, \u003e) is never in the bytes the gateway searches,
// ordinary call or task: credentials.Load refuses only CR, LF and NUL. A
// benign Go SDK workload whose whoami tool echoes its Authorization
// header shows the token to every caller.
func TestRedTeamTokenWithHTMLCharactersIsNeverRedacted(t *testing.T) {
	const token = "s3cr3t&t0ken<x>"
	s := mcp.NewServer(&mcp.Implementation{Name: "whoami"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "slow"}, func(_ context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "you sent " + req.Extra.Header.Get("Authorization")}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true, DisableLocalhostProtection: true})
	endpoint := redactRig(t, token, h, gateway.Options{})
	plain := postRPC(t, endpoint, "2025-11-25", "tools/call", `{"name":"slow","arguments":{}}`)
	b, leaked := shows(plain, token, "")
	if leaked {
		t.Errorf("ordinary tools/call: the token reached the client: %s", b)
	} else if !strings.Contains(b, "[redacted]") {
		t.Fatalf("the workload did not echo the token: %s", b)
	}
}

// Attack 3. A backend's error for tasks/get, tasks/result or tasks/cancel
// is split on the backend's own task id (to put the client's sealed id
// there) and the pieces are redacted one by one. A token that contains
// the backend's id (a numeric id such as "7", and a token with a 7 in it)
// is cut by the split: no piece holds the whole token, none is redacted,
// and the client reads the token with the sealed id in place of each
// "7". Before 054cbdf the id was replaced first and the whole message
// redacted after: the same cut.
func TestRedTeamBackendTaskIDSplitsTheTokenInAnError(t *testing.T) {
	const token = "abc7defghij7klmnop"
	task := `{"taskId":"7","status":"working","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttl":60000,"pollInterval":1000}`
	endpoint := redactRig(t, token, rawRequestHandler("tasker", func(req *jsonrpc.Request) (json.RawMessage, *jsonrpc.Error) {
		switch {
		case isTaskCall(req):
			return json.RawMessage(`{"task":` + task + `}`), nil
		case req.Method == "tasks/cancel":
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "task 7: cancel refused for Bearer " + token}
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "no"}
	}), gateway.Options{})
	id, _ := createTaskID(t, endpoint)
	canceled := postRPC(t, endpoint, "2025-11-25", "tasks/cancel", `{"taskId":"`+id+`"}`)
	e, _ := canceled["error"].(map[string]any)
	msg, _ := e["message"].(string)
	if want := "task " + id + ": cancel refused for Bearer [redacted]"; msg != want {
		t.Errorf("tasks/cancel's error shows the token cut around the client's id:\n got %q\nwant %q\nwith the id taken out: %q",
			msg, want, strings.ReplaceAll(msg, id, "<id>"))
	}
}

// Attack 4. A backend's error is clipped before it is redacted, on the
// task path (1024 bytes) and on an ordinary call's (512): a token that
// straddles the clip is cut, its head is no longer the token, and the
// head reaches the client (and the span) unredacted.
func TestRedTeamClipCutsTheTokenBeforeRedaction(t *testing.T) {
	const token = "SECRET-0123456789-abcdefghij"
	task := `{"taskId":"b-1","status":"working","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttl":60000,"pollInterval":1000}`
	// Pads that put the clip in the token's middle.
	taskPad := strings.Repeat("x", 1024-14)
	// (the SDK's error reads `calling "tools/call": ` + the message)
	callPad := strings.Repeat("y", 512-len(`calling "tools/call": `)-14)
	var created atomic.Int32
	endpoint := redactRig(t, token, rawRequestHandler("tasker", func(req *jsonrpc.Request) (json.RawMessage, *jsonrpc.Error) {
		switch {
		case isTaskCall(req) && created.Add(1) == 1:
			return json.RawMessage(`{"task":` + task + `}`), nil
		case isTaskCall(req): // the task-creating call's error: clipped at 512 as it is
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: strings.Repeat("z", 512-14) + token}
		case req.Method == "tools/call":
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: callPad + token}
		case req.Method == "tasks/cancel":
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: taskPad + token}
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "no"}
	}), gateway.Options{})
	head := token[:12] // "SECRET-01234"

	id, _ := createTaskID(t, endpoint)
	canceled := postRPC(t, endpoint, "2025-11-25", "tasks/cancel", `{"taskId":"`+id+`"}`)
	if b, _ := json.Marshal(canceled); strings.Contains(string(b), head) {
		t.Errorf("tasks/cancel: the token's head reached the client: …%s", tail(string(b), 80))
	}
	plain := postRPC(t, endpoint, "2025-11-25", "tools/call", `{"name":"slow","arguments":{}}`)
	if b, _ := json.Marshal(plain); strings.Contains(string(b), head) {
		t.Errorf("ordinary tools/call: the token's head reached the client: …%s", tail(string(b), 120))
	}
	failed := postRPC(t, endpoint, "2025-11-25", "tools/call", `{"name":"slow","arguments":{},"task":{"ttl":60000}}`)
	if b, _ := json.Marshal(failed); strings.Contains(string(b), head) {
		t.Errorf("task-augmented tools/call: the token's head reached the client: …%s", tail(string(b), 120))
	}
}

// decoded is v as JSON with no HTML escapes: what a client reads.
func decoded(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return bytes.TrimSpace(buf.Bytes())
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// Attack 5. A reply whose redaction would grow past MaxResultBytes is
// withheld: on the task path the whole answer becomes a CallToolResult
// (withheldJSON), whatever the method. tasks/get then answers with no
// task at all (no taskId, no status: not a GetTaskResult, which a client
// cannot parse), and tasks/result loses the gateway's related-task (and,
// in 2026-07-28, serverInfo) _meta: exactly what 755805d says a
// repeated token must no longer take with it. The created task, withheld,
// was an error result, though the backend had the task running.
func TestRedTeamWithheldTaskAnswersLoseTheGatewaysWords(t *testing.T) {
	const (
		token = "tq"
		limit = 64 << 10
	)
	many := strings.Repeat(token+" ", 16<<10) // 48 KiB: 160 KiB redacted
	busy := `{"taskId":"b-1","status":"working","statusMessage":"` + many + `","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttl":60000,"pollInterval":1000}`
	endpoint := redactRig(t, token, rawRequestHandler("tasker", func(req *jsonrpc.Request) (json.RawMessage, *jsonrpc.Error) {
		switch {
		case isTaskCall(req):
			return json.RawMessage(`{"task":` + busy + `}`), nil
		case req.Method == "tasks/get":
			return json.RawMessage(busy), nil
		case req.Method == "tasks/result":
			return json.RawMessage(`{"content":[{"type":"text","text":"` + many + `"}]}`), nil
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "no"}
	}), gateway.Options{MaxResultBytes: limit})
	// The created task, withheld too, is still the client's: the backend
	// has it running, and the caller's limit of tasks counts it.
	id, created := createTaskID(t, endpoint)
	view, _ := created["result"].(map[string]any)["task"].(map[string]any)
	if view["status"] != "working" || !strings.Contains(fmt.Sprint(view["statusMessage"]), "withheld") {
		t.Errorf("the created task withheld: %v", view)
	}

	get := postRPC(t, endpoint, "2025-11-25", "tasks/get", `{"taskId":"`+id+`"}`)
	status, _ := get["result"].(map[string]any)
	if status["taskId"] != id || status["status"] != "working" || !strings.Contains(fmt.Sprint(status["statusMessage"]), "withheld") {
		b, _ := json.Marshal(get)
		t.Errorf("tasks/get withheld is not the client's task: %.300s", b)
	}
	reply := postRPC(t, endpoint, "2025-11-25", "tasks/result", `{"taskId":"`+id+`"}`)
	result, _ := reply["result"].(map[string]any)
	meta, _ := result["_meta"].(map[string]any)
	if related, _ := meta["io.modelcontextprotocol/related-task"].(map[string]any); related["taskId"] != id {
		b, _ := json.Marshal(reply)
		t.Errorf("tasks/result withheld has no related task %s: %.300s", id, b)
	}
}
