package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// CodeTooManyTasks is the JSON-RPC error code of a task-augmented
// tools/call refused because its caller, or the server, runs as many tasks
// as it may ([Options.MaxTasksPerCaller], [Options.MaxTasks]). It is in
// JSON-RPC's range for server errors; MCP defines none for it.
const CodeTooManyTasks = -32003

// relatedTaskMeta is the _meta key that ties a tasks/result to its task.
const relatedTaskMeta = "io.modelcontextprotocol/related-task"

// tasksCapability is the server capability of MCP 2025-11-25 tasks that
// toolkit serves: tasks/list, tasks/cancel and task-augmented tools/call.
var tasksCapability = json.RawMessage(`{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`)

// mcpTasks serves MCP 2025-11-25 tasks in front of the SDK's handler,
// which has none: it answers task-augmented tools/call and tasks/* itself,
// and adds the tasks capability to initialize and each tool's execution
// to tools/list on their way out. It reads a request's message with the
// SDK's jsonrpc package, and only while the registry has a tool with task
// support or the store holds a task; otherwise requests pass untouched.
type mcpTasks struct {
	reg      *toolkit.Registry
	store    *taskStore
	guard    invokeGuard
	maxBody  int64
	logger   *slog.Logger
	callCtx  func(context.Context, http.Header) context.Context
	txn      *TxnTokenVerifier
	sessions func(id string) bool // nil: no sessions

	withTasks   atomic.Bool // the registry has a tool with task support
	unsubscribe func()
}

func newMCPTasks(reg *toolkit.Registry, o *Options, txn *TxnTokenVerifier, sessions func(string) bool) *mcpTasks {
	t := &mcpTasks{
		reg:     reg,
		store:   newTaskStore(o.MaxTasksPerCaller, o.MaxTasks, o.MaxTaskTTL, o.TaskPollInterval),
		guard:   newInvokeGuard(o),
		maxBody: o.MaxBodyBytes,
		logger:  o.Logger,
		callCtx: o.CallContext,
		txn:     txn,
	}
	t.sessions = sessions
	t.follow()
	t.unsubscribe = reg.Subscribe(t.follow)
	return t
}

func (t *mcpTasks) follow() {
	found := false
	for _, s := range t.reg.Specs() {
		if s.Execution.Tasks() {
			found = true
			break
		}
	}
	t.withTasks.Store(found)
}

func (t *mcpTasks) close() {
	t.unsubscribe()
	t.store.close()
}

// execution is the named tool's execution, and whether it exists.
func (t *mcpTasks) execution(name string) (*spec.Execution, bool) {
	tool, ok := t.reg.Lookup(name)
	if !ok {
		return nil, false
	}
	return tool.Spec().Execution, true
}

// serve answers r itself, or passes it to next with its body intact.
func (t *mcpTasks) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if r.Method != http.MethodPost || (!t.withTasks.Load() && t.store.live() == 0) {
		next.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, t.maxBody+1))
	if err != nil || int64(len(body)) > t.maxBody {
		// The SDK refuses it, with its own status.
		r.Body = readCloser{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
		next.ServeHTTP(w, r)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	// The method (and a tool call's name and task) as the SDK reads them:
	// with its decoder, and by exact key. encoding/json would match a
	// later "Method" or "Name" for them, and the SDK would then run what
	// the front let pass, a tool that must be a task as an ordinary call.
	msg, err := jsonrpc.DecodeMessage(body)
	req, ok := msg.(*jsonrpc.Request)
	if err != nil || !ok || !req.IsCall() {
		next.ServeHTTP(w, r) // a batch, or no JSON-RPC: the SDK's to refuse
		return
	}
	switch req.Method {
	case "initialize", "tools/list", "tasks/get", "tasks/result", "tasks/list", "tasks/cancel":
	case "tools/call":
		p, perr := callParamsOf(req.Params)
		exec, exists := t.execution(p.Name)
		if perr == nil && (!exists || p.Task == nil && !exec.TasksRequired()) {
			next.ServeHTTP(w, r)
			return
		}
	default:
		next.ServeHTTP(w, r)
		return
	}
	switch req.Method {
	case "initialize":
		t.rewrite(w, r, next, req.ID, addTasksCapability)
	case "tools/list":
		t.rewrite(w, r, next, req.ID, t.addExecution)
	case "tools/call":
		if !t.call(w, r, req) {
			next.ServeHTTP(w, r)
		}
	default:
		t.task(w, r, req)
	}
}

type readCloser struct {
	io.Reader
	io.Closer
}

// callParams are the members of tools/call params that decide whether
// toolkit answers it.
type callParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Task      *struct {
		TTL *float64 `json:"ttl"`
	} `json:"task"`
}

// callParamsOf decodes tools/call params by exact key, as the SDK does.
func callParamsOf(raw json.RawMessage) (callParams, error) {
	var p callParams
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return p, err
	}
	if v, ok := m["name"]; ok {
		if err := json.Unmarshal(v, &p.Name); err != nil {
			return p, err
		}
	}
	p.Arguments = m["arguments"]
	if v, ok := m["task"]; ok {
		var task map[string]json.RawMessage
		if err := json.Unmarshal(v, &task); err != nil {
			return p, err
		}
		if task != nil {
			p.Task = &struct {
				TTL *float64 `json:"ttl"`
			}{}
			if ttl, ok := task["ttl"]; ok {
				if err := json.Unmarshal(ttl, &p.Task.TTL); err != nil {
					return p, err
				}
			}
		}
	}
	return p, nil
}

// call answers a tools/call that is task-augmented or that must be, and
// reports whether it did; the SDK answers the rest.
func (t *mcpTasks) call(w http.ResponseWriter, r *http.Request, req *jsonrpc.Request) bool {
	p, err := callParamsOf(req.Params)
	if err != nil {
		// Not passed on: the SDK, which knows no task, would run the call.
		t.reply(w, r, req.ID, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid tools/call params: " + err.Error()})
		return true
	}
	exec, exists := t.execution(p.Name)
	switch {
	case !exists:
		return false
	case p.Task == nil && exec.TasksRequired():
		t.reply(w, r, req.ID, nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
			Message: fmt.Sprintf("tool %s must be called as a task (execution.taskSupport is required)", quote(p.Name))})
		return true
	case p.Task == nil:
		return false
	case !exec.Tasks():
		t.reply(w, r, req.ID, nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
			Message: fmt.Sprintf("tool %s cannot be called as a task (execution.taskSupport is forbidden)", quote(p.Name))})
		return true
	}
	ctx, owner, ok := t.caller(w, r, req.ID)
	if !ok {
		return true
	}
	name, args := p.Name, p.Arguments
	view, err := t.store.start(ctx, owner, t.store.clampTTL(p.Task.TTL), func(ctx context.Context, set func(string)) ([]byte, bool, error) {
		ctx = toolkit.WithReporter(ctx, taskReporter(set))
		res, err := t.reg.Call(ctx, name, args)
		switch {
		case errors.Is(err, toolkit.ErrInvalidArguments):
			return nil, false, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
		case err != nil:
			return nil, false, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		}
		b, err := json.Marshal(mcpResult(res))
		if err != nil {
			return nil, false, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "encoding the result failed"}
		}
		// MCP: a tool result with isError fails its task.
		return b, res.IsError, nil
	})
	if err != nil {
		code := int64(jsonrpc.CodeInternalError)
		if errors.Is(err, errTooManyTasks) {
			code = CodeTooManyTasks
		}
		t.reply(w, r, req.ID, nil, &jsonrpc.Error{Code: code, Message: err.Error()})
		return true
	}
	t.reply(w, r, req.ID, map[string]any{"task": view}, nil)
	return true
}

// taskParams are the params of tasks/get, tasks/result and tasks/cancel.
type taskParams struct {
	TaskID string `json:"taskId"`
}

// task answers tasks/get, tasks/result, tasks/list and tasks/cancel, for
// the caller's own tasks only.
func (t *mcpTasks) task(w http.ResponseWriter, r *http.Request, req *jsonrpc.Request) {
	ctx, owner, ok := t.caller(w, r, req.ID)
	if !ok {
		return
	}
	var p taskParams
	if req.Method != "tasks/list" {
		if err := json.Unmarshal(req.Params, &p); err != nil || p.TaskID == "" {
			t.reply(w, r, req.ID, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: req.Method + " takes params.taskId"})
			return
		}
	}
	notFound := func(err error) *jsonrpc.Error {
		if errors.Is(err, errTaskNotFound) {
			return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "task not found: " + quote(p.TaskID)}
		}
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	switch req.Method {
	case "tasks/get":
		v, err := t.store.get(owner, p.TaskID)
		if err != nil {
			t.reply(w, r, req.ID, nil, notFound(err))
			return
		}
		t.reply(w, r, req.ID, v, nil)
	case "tasks/cancel":
		v, err := t.store.cancelTask(owner, p.TaskID)
		if err != nil {
			t.reply(w, r, req.ID, nil, notFound(err))
			return
		}
		t.reply(w, r, req.ID, v, nil)
	case "tasks/list":
		t.reply(w, r, req.ID, map[string]any{"tasks": t.store.list(owner)}, nil)
	case "tasks/result":
		v, res, rpcErr, err := t.store.result(ctx, owner, p.TaskID)
		switch {
		case ctx.Err() != nil:
			return // the client has gone
		case err != nil:
			t.reply(w, r, req.ID, nil, notFound(err))
		case rpcErr != nil:
			t.reply(w, r, req.ID, nil, rpcErr)
		case v.Status == taskCancelled:
			t.reply(w, r, req.ID, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "task " + quote(p.TaskID) + " was cancelled: " + v.StatusMessage})
		default:
			t.reply(w, r, req.ID, withRelatedTask(res, v.TaskID), nil)
		}
	}
}

// withRelatedTask is a stored tool result with _meta naming its task, as
// MCP wants of tasks/result.
func withRelatedTask(res []byte, id string) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(res, &m) != nil {
		return res
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := m["_meta"]; ok {
		_ = json.Unmarshal(raw, &meta)
	}
	meta[relatedTaskMeta], _ = json.Marshal(map[string]string{"taskId": id})
	m["_meta"], _ = json.Marshal(meta)
	b, err := json.Marshal(m)
	if err != nil {
		return res
	}
	return b
}

// caller is the context of a task request, with the caller it names, and
// the key its tasks are kept under:
//   - the [toolkit.Caller] subject, once a Txn-Token verified (or a token
//     the SDK's auth middleware verified, or an outer middleware set it);
//   - else the MCP session, which must exist;
//   - else the remote IP address, which bounds the tasks it starts; any
//     anonymous caller reaches an anonymous task by its id (see
//     taskStore.lookupLocked).
//
// It writes the refusal and returns false for a request that must not
// reach the store.
func (t *mcpTasks) caller(w http.ResponseWriter, r *http.Request, id jsonrpc.ID) (context.Context, string, bool) {
	if !t.guard.check(w, r) {
		return nil, "", false
	}
	ctx := callerContext(r.Context(), r.Header, auth.TokenInfoFromContext(r.Context()))
	if t.callCtx != nil {
		ctx = t.callCtx(ctx, r.Header)
	}
	ctx, err := t.txn.verifyCall(ctx, r.Header)
	if err != nil {
		logRefusal(t.logger, err)
		t.reply(w, r, id, nil, &jsonrpc.Error{Code: CodeTxnTokenInvalid, Message: txnRefusal(err)})
		return nil, "", false
	}
	if c, _ := toolkit.CallerFrom(ctx); c.Subject != "" {
		return ctx, "subject:" + c.Subject, true
	}
	if sid := r.Header.Get("Mcp-Session-Id"); sid != "" && t.sessions != nil {
		if !t.sessions(sid) {
			http.Error(w, "session not found", http.StatusNotFound)
			return nil, "", false
		}
		return ctx, "session:" + sid, true
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return ctx, anonymousOwner + host, true
}

// reply writes one JSON-RPC response, as the SDK would with JSONResponse.
func (t *mcpTasks) reply(w http.ResponseWriter, r *http.Request, id jsonrpc.ID, result any, rpcErr error) {
	resp := &jsonrpc.Response{ID: id}
	if rpcErr != nil {
		var je *jsonrpc.Error
		if !errors.As(rpcErr, &je) {
			je = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: rpcErr.Error()}
		}
		resp.Error = je
	} else {
		raw, ok := result.(json.RawMessage)
		if !ok {
			var err error
			if raw, err = json.Marshal(result); err != nil {
				resp.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "encoding the reply failed"}
			}
		}
		if resp.Error == nil {
			resp.Result = raw
		}
	}
	b, err := jsonrpc.EncodeMessage(resp)
	if err != nil {
		http.Error(w, "encoding the reply failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" {
		w.Header().Set("Mcp-Protocol-Version", v)
	}
	_, _ = w.Write(b)
}

// rewrite serves r with next, and passes the result of the response to
// the request id through patch on its way out, in a JSON reply or an SSE
// stream alike. It buffers the reply: only initialize and tools/list go
// through it, whose replies are whole messages, not streams.
func (t *mcpTasks) rewrite(w http.ResponseWriter, r *http.Request, next http.Handler, id jsonrpc.ID, patch func(json.RawMessage) (json.RawMessage, error)) {
	if !t.withTasks.Load() {
		next.ServeHTTP(w, r)
		return
	}
	cw := &captureWriter{header: w.Header(), status: http.StatusOK}
	next.ServeHTTP(cw, r)
	out := cw.buf.Bytes()
	mt, _, _ := mime.ParseMediaType(w.Header().Get("Content-Type"))
	switch mt {
	case "application/json":
		if b, ok := patchMessage(bytes.TrimSpace(out), id, patch); ok {
			out = b
		}
	case "text/event-stream":
		var sb bytes.Buffer
		for line := range bytes.SplitAfterSeq(out, []byte("\n")) {
			data, isData := bytes.CutPrefix(line, []byte("data: "))
			if isData {
				if b, ok := patchMessage(bytes.TrimRight(data, "\n"), id, patch); ok {
					sb.WriteString("data: ")
					sb.Write(b)
					sb.WriteString("\n")
					continue
				}
			}
			sb.Write(line)
		}
		out = sb.Bytes()
	}
	w.Header().Del("Content-Length")
	w.WriteHeader(cw.status)
	_, _ = w.Write(out)
}

// patchMessage patches the result of data, when it is the response to id.
func patchMessage(data []byte, id jsonrpc.ID, patch func(json.RawMessage) (json.RawMessage, error)) ([]byte, bool) {
	msg, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		return nil, false
	}
	resp, ok := msg.(*jsonrpc.Response)
	if !ok || resp.Error != nil || resp.ID != id {
		return nil, false
	}
	res, err := patch(resp.Result)
	if err != nil {
		return nil, false
	}
	resp.Result = res
	b, err := jsonrpc.EncodeMessage(resp)
	return b, err == nil
}

// addTasksCapability adds capabilities.tasks to an initialize result.
func addTasksCapability(res json.RawMessage) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(res, &m); err != nil {
		return nil, err
	}
	caps := map[string]json.RawMessage{}
	if raw, ok := m["capabilities"]; ok {
		if err := json.Unmarshal(raw, &caps); err != nil {
			return nil, err
		}
	}
	caps["tasks"] = tasksCapability
	var err error
	if m["capabilities"], err = json.Marshal(caps); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// addExecution adds each tool's execution to a tools/list result. The
// other members of each tool keep their bytes.
func (t *mcpTasks) addExecution(res json.RawMessage) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(res, &m); err != nil {
		return nil, err
	}
	var tools []map[string]json.RawMessage
	if err := json.Unmarshal(m["tools"], &tools); err != nil {
		return nil, err
	}
	for _, tool := range tools {
		var name string
		if json.Unmarshal(tool["name"], &name) != nil {
			continue
		}
		if exec, _ := t.execution(name); exec.Tasks() {
			tool["execution"], _ = json.Marshal(exec)
		}
	}
	var err error
	if m["tools"], err = json.Marshal(tools); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// captureWriter holds a reply until it is complete.
type captureWriter struct {
	header http.Header
	status int
	wrote  bool
	buf    bytes.Buffer
}

func (c *captureWriter) Header() http.Header { return c.header }

func (c *captureWriter) WriteHeader(status int) {
	if !c.wrote {
		c.status, c.wrote = status, true
	}
}

func (c *captureWriter) Write(b []byte) (int, error) {
	c.wrote = true
	return c.buf.Write(b)
}

// Flush does nothing: the reply goes out whole.
func (c *captureWriter) Flush() {}

// taskReporter makes a task's progress its status message. Its log
// messages have no stream to go to.
type taskReporter func(string)

func (set taskReporter) Progress(_ context.Context, done, total float64, message string) {
	switch {
	case message != "" && total > 0:
		set(fmt.Sprintf("%s (%g/%g)", message, done, total))
	case message != "":
		set(message)
	case total > 0:
		set(fmt.Sprintf("%g/%g", done, total))
	default:
		set(fmt.Sprintf("%g", done))
	}
}

func (taskReporter) Log(context.Context, slog.Level, string) {}

// sessionExists reports whether the MCP server has a session id.
func sessionExists(s *mcp.Server) func(string) bool {
	return func(id string) bool {
		for ss := range s.Sessions() {
			if ss.ID() == id {
				return true
			}
		}
		return false
	}
}
