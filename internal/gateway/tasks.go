package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// Tasks (MCP 2025-11-25, experimental): a client calls a tool that
// supports them (execution.taskSupport "optional" or "required") with
// tools/call and params.task, gets a task back at once, and polls it with
// tasks/get, reads its result with tasks/result, or cancels it with
// tasks/cancel. The Go SDK has no tasks, so the gateway handles them in
// front of it: it notes a tools/call's params.task in serveBounded (which
// the SDK's decoding drops), and answers tasks/* itself.
//
// A task runs where its tool runs: the gateway calls the tool's backend
// over MCP (a toolkit workload at its MCP endpoint, an MCP server at its
// own) with the task, as one call of [Gateway.call] (the same decision,
// audit line, limits, credentials, Txn-Token, circuit and spans), and
// gives the client a task id that seals where the task is (tasks_seal.go).
// tasks/get, tasks/result and tasks/cancel, on any replica that has the
// key, open that id, check that it is the caller's, that the ToolSet
// still owns the tool in the table served and (under auth) that the
// caller may still call it, and forward the request to the backend.
//
// tasks/list is not served: without a store, no replica knows a caller's
// tasks across backends and replicas, and a list of what one replica
// happens to remember would differ from replica to replica. The gateway
// does not declare tasks.list, and answers tasks/list with "method not
// found", as MCP has a server that does not list do.
//
// Each replica bounds the tasks one caller has running through it
// (Options.MaxTasksPerCaller; with N replicas a caller may have N times
// as many), and every task's lifetime (Options.MaxTaskTTL): its ttl is
// clamped to it, and its id expires with it. A task counts against its
// caller until the replica that created it sees it end (a tasks/get,
// tasks/result or tasks/cancel it serves that finds it terminal, or a
// backend that no longer knows it), or its id expires; a caller at its
// bound has its counted tasks' backends asked first (reclaimTasks).

// Tasks methods.
const (
	methodTasksGet    = "tasks/get"
	methodTasksResult = "tasks/result"
	methodTasksCancel = "tasks/cancel"
	methodTasksList   = "tasks/list"
)

// relatedTaskMeta is the _meta key that ties a message to its task.
const relatedTaskMeta = "io.modelcontextprotocol/related-task"

// Defaults of the task options.
const (
	// DefaultMaxTasksPerCaller bounds the tasks one caller has running
	// through one replica.
	DefaultMaxTasksPerCaller = 16
	// DefaultMaxTaskTTL bounds a task's lifetime, and its id's.
	DefaultMaxTaskTTL = time.Hour
)

// taskHeader carries a tools/call's params.task ttl (milliseconds, or
// "-" for none) from serveBounded to the tools/call handler; it replaces
// whatever a client sent.
const taskHeader = "Toolplane-Gateway-Task"

// markTaskRequest is serveBounded's note of a task request: a tools/call's
// params.task in taskHeader. params are the request's params as the SDK
// decoded them; their keys are matched exactly, as the SDK matches them.
func markTaskRequest(r *http.Request, method string, params json.RawMessage) {
	r.Header.Del(taskHeader)
	if method == "tools/call" && bytes.Contains(params, []byte(`"task"`)) {
		var p map[string]json.RawMessage
		if json.Unmarshal(params, &p) != nil {
			return
		}
		var task map[string]json.RawMessage
		if json.Unmarshal(p["task"], &task) != nil || task == nil {
			return
		}
		v := "-"
		var ttl *float64
		if json.Unmarshal(task["ttl"], &ttl) == nil && ttl != nil && *ttl > 0 && !math.IsInf(*ttl, 0) {
			v = strconv.FormatInt(int64(min(*ttl, math.MaxInt64/2)), 10)
		}
		r.Header.Set(taskHeader, v)
	}
}

// taskRequested returns the ttl a task-augmented tools/call asks for (zero:
// none), and whether it is one.
func taskRequested(req *mcp.CallToolRequest) (time.Duration, bool) {
	header, _ := extraOf(req)
	v := header.Get(taskHeader)
	if v == "" {
		return 0, false
	}
	ms, _ := strconv.ParseInt(v, 10, 64)
	return time.Duration(max(ms, 0)) * time.Millisecond, true
}

// taskSupport is tool's execution.taskSupport ("" for none).
func taskSupport(t *spec.TableTool) string {
	if t.Execution == nil {
		return ""
	}
	return t.Execution.TaskSupport
}

func supportsTasks(t *spec.TableTool) bool {
	ts := taskSupport(t)
	return ts == spec.TaskSupportOptional || ts == spec.TaskSupportRequired
}

// taskCreate is a task-augmented call in flight, in its context: what it
// asks for, and the task the backend created.
type taskCreate struct {
	ttl    time.Duration // clamped
	caller string        // the caller's seal key
	result *taskResult
}

type taskCreateKey struct{}

func taskCreateFrom(ctx context.Context) *taskCreate {
	tc, _ := ctx.Value(taskCreateKey{}).(*taskCreate)
	return tc
}

// taskResult is a result the gateway writes as it is: a task, or a
// task's payload.
type taskResult struct {
	mcp.ResultBase
	raw json.RawMessage
	id  string // the task's sealed id
	exp time.Time
}

// MarshalJSON writes raw, with the _meta the SDK may have added.
func (r *taskResult) MarshalJSON() ([]byte, error) {
	if len(r.Meta) == 0 {
		return r.raw, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(r.raw, &m); err != nil {
		return nil, err
	}
	meta := map[string]any{}
	if len(m["_meta"]) > 0 {
		_ = json.Unmarshal(m["_meta"], &meta)
	}
	for k, v := range r.Meta {
		if _, ok := meta[k]; !ok {
			meta[k] = v
		}
	}
	b, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	m["_meta"] = b
	return json.Marshal(m)
}

// sealKeyOf is what a task id holds of its caller: the authenticated
// user, or nothing without auth (the id alone is then the capability).
func sealKeyOf(c *Caller) string {
	if c == nil {
		return ""
	}
	return "user:" + c.User
}

// taskError is a JSON-RPC error of the tasks methods.
func taskError(code int64, format string, args ...any) *jsonrpc.Error {
	return &jsonrpc.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// errTaskNotFound answers an id that does not open, has expired, is
// another caller's, or names a tool that is gone: all alike, and before
// any backend is asked.
var errTaskNotFound = taskError(jsonrpc.CodeInvalidParams, "task not found (unknown, expired, or not yours)")

// callAsTask answers a task-augmented tools/call: the call goes through
// callTool as any other, and its backend is asked for a task
// (createTask); the client gets the task, with a sealed id, or a JSON-RPC
// error when there is none.
func (g *Gateway) callAsTask(ctx context.Context, req *mcp.CallToolRequest, ttl time.Duration) (mcp.Result, error) {
	header, token := extraOf(req)
	caller := callerFrom(token)
	s := g.snapshot()
	if i, ok := s.byName[req.Params.Name]; ok && viewFrom(header).contains(s, i) && !supportsTasks(&s.table.Tools[i]) {
		// As MCP has it: a tool that does not support tasks is not
		// called as one, and the answer is -32601 (which the SDK words
		// as "method not found" whatever the message). A tool the caller
		// may not call stays unknown.
		if g.opts.Auth != nil {
			if ok, err := g.permits(ctx, caller, s, i); err != nil || !ok {
				return nil, unknownTool(req.Params.Name)
			}
		}
		return nil, taskError(jsonrpc.CodeMethodNotFound, "the tool %s does not support being called as a task (its execution.taskSupport is not optional or required): call it without params.task", clip(req.Params.Name, 128))
	}
	key := limitKeyOf(caller, header)
	slot, full, why := g.tasks.reserve(key, g.opts.MaxTasksPerCaller, time.Now())
	if full {
		// The caller's tasks may have ended where this replica did not
		// see it (polled through another): ask their backends, then again.
		g.reclaimTasks(ctx, caller, key, header)
		slot, _, why = g.tasks.reserve(key, g.opts.MaxTasksPerCaller, time.Now())
	}
	if why != "" {
		g.metrics.refused.WithLabelValues(refusedTasks).Inc()
		return nil, taskError(codeServerBusy, "%s", why)
	}
	if ttl <= 0 || ttl > g.opts.MaxTaskTTL {
		ttl = g.opts.MaxTaskTTL
	}
	tc := &taskCreate{ttl: ttl, caller: sealKeyOf(caller)}
	ctx = context.WithValue(ctx, taskCreateKey{}, tc)
	ctx, end := g.serverSpan(ctx, req, "tools/call", req.Params.Name)
	res, err := g.callTool(withCallRequest(ctx, req), req)
	switch {
	case err != nil:
		g.tasks.cancel(key, slot)
		end(nil, err)
		return nil, err
	case tc.result != nil:
		g.tasks.commit(key, slot, tc.result.id, tc.result.exp)
		end(nil, nil)
		return tc.result, nil
	case res != nil && !res.IsError:
		// The backend ran the call the ordinary way (a server that does
		// not do tasks, as MCP allows): its result passes on as it is.
		g.tasks.cancel(key, slot)
		end(res, nil)
		return stampResult(req, res), nil
	}
	g.tasks.cancel(key, slot)
	end(res, nil)
	return nil, taskError(jsonrpc.CodeInternalError, "%s", clip(resultText(res), 1024))
}

// reclaimTasks asks the backends of the tasks this replica counts for
// caller (at most Options.MaxTasksPerCaller) for their status: those that
// have ended, or that their backend no longer knows, stop counting.
func (g *Gateway) reclaimTasks(ctx context.Context, c *Caller, key string, header http.Header) {
	s := g.snapshot()
	for _, id := range g.tasks.ids(key) {
		if ctx.Err() != nil {
			return
		}
		st := g.taskSealer.open(id, time.Now())
		if st == nil {
			g.tasks.done(id) // expired
			continue
		}
		i, ok := s.byName[st.tool]
		if !ok || s.table.Tools[i].ToolSet.String() != st.toolSet || (st.uid != "" && s.table.Tools[i].ToolSetUID != st.uid) {
			g.tasks.done(id) // the tool is gone: so is the way to the task
			continue
		}
		if g.opts.Auth != nil {
			// A task its caller may no longer reach (taskMethod would
			// find it not found) stops counting, and its backend is not
			// asked in the caller's name.
			if allowed, err := g.permits(ctx, c, s, i); err != nil || !allowed {
				if err == nil {
					g.tasks.done(id)
				}
				continue
			}
		}
		_, outcome, _ := g.forwardTask(ctx, c, s, i, st, methodTasksGet, id, header)
		g.taskOps.WithLabelValues("reclaim", outcome).Inc()
	}
}

// taskRoute is the MCP endpoint of tool i of s.
func taskRoute(s *snapshot, i int) (string, error) {
	tool := &s.table.Tools[i]
	if tool.IsMCP() {
		return s.routes[i], nil
	}
	return mcpRoute(tool, s.clusterDomain)
}

// createTask is g.call's round trip for a task-augmented call: tools/call
// with params.task at the backend's MCP endpoint. The task it creates is
// left in tc, and the round trip returns an empty result for g.call.
func (g *Gateway) createTask(ctx context.Context, tc *taskCreate, s *snapshot, i int, args json.RawMessage, header, out http.Header) (*mcp.CallToolResult, string, string) {
	tool := &s.table.Tools[i]
	url, err := taskRoute(s, i)
	if err != nil {
		return nil, outcomeBadReply, err.Error()
	}
	slot, outcome, detail := g.acquire(ctx)
	if !slot.held() {
		return nil, outcome, detail
	}
	defer slot.release()
	mt, done := g.meter(ctx, header)
	defer done()
	conn, err := g.dialTask(ctx, mt, url, out, "", true)
	if err != nil {
		return g.taskFailure(ctx, err)
	}
	defer conn.close()
	if len(bytes.TrimSpace(args)) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	params := map[string]any{
		"name": tool.SourceName, "arguments": args,
		"task": map[string]any{"ttl": tc.ttl.Milliseconds()},
	}
	if p := callParams(ctx, tool.SourceName, args, out); len(p.Meta) > 0 {
		params["_meta"] = p.Meta
	}
	raw, err := conn.call(ctx, "tools/call", params)
	if err != nil {
		return g.taskFailure(ctx, err)
	}
	var reply struct {
		Task map[string]json.RawMessage `json:"task"`
	}
	if err := json.Unmarshal(raw, &reply); err != nil {
		return nil, outcomeBadReply, "the MCP server's reply is not a result: " + err.Error()
	}
	if reply.Task == nil {
		// No task: an ordinary result.
		res, err := decodeResult(raw)
		if err != nil {
			return nil, outcomeBadReply, "the MCP server's reply is neither a task nor a tool result: " + err.Error()
		}
		if res.IsError {
			return res, outcomeToolError, ""
		}
		return res, outcomeOK, ""
	}
	var backendID string
	if err := json.Unmarshal(reply.Task["taskId"], &backendID); err != nil || backendID == "" || len(backendID) > maxBackendTaskID {
		return nil, outcomeBadReply, fmt.Sprintf("the MCP server's task has no taskId of at most %d bytes", maxBackendTaskID)
	}
	session := conn.rt.sessionID()
	if len(session) > maxBackendSession {
		return nil, outcomeBadReply, fmt.Sprintf("the MCP server's session id is over %d bytes", maxBackendSession)
	}
	ttl := tc.ttl
	var backendTTL *float64
	if json.Unmarshal(reply.Task["ttl"], &backendTTL) == nil && backendTTL != nil && *backendTTL > 0 {
		ttl = min(ttl, time.Duration(*backendTTL)*time.Millisecond)
	}
	now := time.Now()
	st := &sealedTask{
		tool: tool.Name, toolSet: tool.ToolSet.String(), uid: tool.ToolSetUID,
		backendID: backendID, session: session, caller: callerDigest(tc.caller),
		expires: now.Add(ttl + time.Second - 1).Truncate(time.Second), ttlMs: ttl.Milliseconds(),
	}
	id := g.taskSealer.seal(st)
	if len(id) > maxTaskIDLen {
		return nil, outcomeBadReply, fmt.Sprintf("the task's id would be over %d bytes (the tool's name, its ToolSet's, or the server's task or session id is too long)", maxTaskIDLen)
	}
	// What the client sees of the task is redacted as the backend sent
	// it, before the gateway adds its own words (the sealed id, _meta): a
	// token that is also in them must not corrupt or withhold those. It
	// is decoded from the redacted reply alone (a member written twice,
	// once with the token, is redacted where it stands). The backend's
	// own id and session, sealed above, are never shown. A task whose
	// answer is withheld is still the client's to ask for: the backend
	// has it running.
	var shown struct {
		Task map[string]json.RawMessage `json:"task"`
	}
	if red, ok := g.redactReply(ctx, raw); !ok || json.Unmarshal(red, &shown) != nil || shown.Task == nil {
		shown.Task = withheldTask(reply.Task, backendFrom(ctx))
	}
	view := shown.Task
	task, err := g.rewriteTask(view, id, st, nil)
	if err != nil {
		return nil, outcomeBadReply, err.Error()
	}
	body, err := json.Marshal(map[string]json.RawMessage{"task": task})
	if err != nil {
		return nil, outcomeBadReply, err.Error()
	}
	tc.result = &taskResult{raw: body, id: id, exp: st.expires}
	return &mcp.CallToolResult{Content: []mcp.Content{}}, outcomeOK, ""
}

// rewriteTask is the backend's task, its token already redacted
// (redactReply), as the client sees it: the sealed id, the ttl the gateway
// keeps it for, the _meta that is the workload's to set with own, the
// gateway's (relayMeta).
func (g *Gateway) rewriteTask(task map[string]json.RawMessage, id string, st *sealedTask, own map[string]any) (json.RawMessage, error) {
	relayMeta(task, own)
	idJSON, _ := json.Marshal(id)
	task["taskId"] = idJSON
	task["ttl"] = json.RawMessage(strconv.FormatInt(st.ttlMs, 10))
	var poll float64
	if err := json.Unmarshal(task["pollInterval"], &poll); err != nil || poll < minPollInterval {
		task["pollInterval"] = json.RawMessage(strconv.Itoa(minPollInterval))
	}
	return json.Marshal(task)
}

// redactReply is b, a backend's JSON reply, with the call's ToolSet token
// redacted (backend.redactJSON); ok is false if the reply is to be withheld
// instead. It runs on the reply as the backend sent it, before the gateway
// sets its own members.
func (g *Gateway) redactReply(ctx context.Context, b []byte) (red []byte, ok bool) {
	return backendFrom(ctx).redactJSON(b, g.opts.MaxResultBytes)
}

// taskStatuses are the statuses MCP names for a task.
var taskStatuses = []string{"working", "input_required", "completed", "failed", "cancelled"}

// withheldTask is what the client sees of a task whose backend's answer is
// withheld for the ToolSet's token: the status, if it is one MCP names
// (else failed), the backend's timestamps, as the gateway writes them and
// if they do not hold the token, and a status message that says why;
// rewriteTask adds the gateway's words (the id, ttl, poll interval, _meta).
func withheldTask(m map[string]json.RawMessage, be *backend) map[string]json.RawMessage {
	status := "failed"
	var s string
	if json.Unmarshal(m["status"], &s) == nil && slices.Contains(taskStatuses, s) {
		status = s
	}
	out := map[string]json.RawMessage{}
	out["status"], _ = json.Marshal(status)
	out["statusMessage"], _ = json.Marshal(withheldResult)
	for _, k := range []string{"createdAt", "lastUpdatedAt"} {
		var at string
		if json.Unmarshal(m[k], &at) != nil {
			continue
		}
		// Written afresh: RFC 3339 takes any number of fractional
		// digits, and a token of digits would pass as some.
		t, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			continue
		}
		if at = t.UTC().Format(time.RFC3339Nano); be == nil || be.token == "" || !strings.Contains(at, be.token) {
			out[k], _ = json.Marshal(at)
		}
	}
	return out
}

// meter returns the client of the call in ctx, whose replies are charged
// to the results' budget until done (or, with a ledger for header, until
// the answer is written).
func (g *Gateway) meter(ctx context.Context, header http.Header) (*http.Client, func()) {
	client := clientFor(ctx, g.client)
	mt := &meteredTransport{base: client.Transport, b: g.results}
	if mt.base == nil {
		mt.base = http.DefaultTransport
	}
	hc := *client
	hc.Transport = mt
	return &hc, func() {
		held, _ := mt.take()
		if l := g.ledgerOf(header); l != nil {
			l.add(held)
		} else {
			g.results.release(held)
		}
	}
}

func (g *Gateway) taskFailure(ctx context.Context, err error) (*mcp.CallToolResult, string, string) {
	var rpcErr *jsonrpc.Error
	switch {
	case errors.Is(err, errReplyTooLarge):
		return nil, outcomeBadReply, fmt.Sprintf("the workload's reply is over the gateway's limit of %d bytes", g.opts.MaxResultBytes)
	case ctx.Err() != nil:
		return g.failure(ctx, err)
	case asRPCError(err, &rpcErr):
		return nil, outcomeBadReply, "the MCP server answered with an error: " + backendFrom(ctx).clipRedacted(rpcErr.Message, 512)
	}
	return nil, outcomeUnreachable, "the MCP server is unreachable: " + backendFrom(ctx).clipRedacted(err.Error(), 512)
}

func asRPCError(err error, target **jsonrpc.Error) bool { return errors.As(err, target) }

// serveTaskMethod answers a tasks/* request that serveBounded noted, and
// reports whether it did.
func (g *Gateway) serveTaskMethod(w http.ResponseWriter, r *http.Request) bool {
	req := noteOf(r).req
	if req == nil || !req.IsCall() {
		return false
	}
	switch req.Method {
	case methodTasksGet, methodTasksResult, methodTasksCancel, methodTasksList:
	default:
		return false
	}
	ctx := withReviewBudget(r.Context(), g.opts.MaxReviewsPerRequest)
	res, rerr := g.taskMethod(ctx, r, req)
	resp := &jsonrpc.Response{ID: req.ID, Result: res}
	if rerr != nil {
		resp = &jsonrpc.Response{ID: req.ID, Error: rerr}
	}
	b, err := jsonrpc.EncodeMessage(resp)
	if err != nil {
		b, _ = jsonrpc.EncodeMessage(&jsonrpc.Response{ID: req.ID, Error: taskError(jsonrpc.CodeInternalError, "encoding the answer failed")})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	return true
}

// taskMethod answers one tasks/* request.
func (g *Gateway) taskMethod(ctx context.Context, r *http.Request, req *jsonrpc.Request) (json.RawMessage, *jsonrpc.Error) {
	g.metrics.inFlight.Inc()
	defer g.metrics.inFlight.Dec()
	if req.Method == methodTasksList {
		g.taskOps.WithLabelValues(req.Method, taskNotServed).Inc()
		return nil, taskError(jsonrpc.CodeMethodNotFound, "tasks/list is not served: the gateway keeps no store of tasks, so no replica can list yours; keep the ids tools/call gave you")
	}
	var p struct {
		TaskID string `json:"taskId"`
	}
	if len(req.Params) > 0 {
		if err := json.Unmarshal(req.Params, &p); err != nil {
			return nil, taskError(jsonrpc.CodeInvalidParams, "invalid params")
		}
	}
	caller := callerFromRequest(r)
	if key := limitKeyOf(caller, r.Header); key != "" {
		if res, after := g.taskLimits.reserve(keyOf(key), g.taskRequestsPerMinute(), time.Now()); res == nil {
			g.metrics.refused.WithLabelValues(refusedTaskRequests).Inc()
			return nil, taskError(codeServerBusy, "too many task requests from you through this gateway replica (%d a minute); retry in %d s", g.taskRequestsPerMinute(), max(1, int(after.Seconds()+0.999)))
		}
	}
	st := g.taskSealer.open(p.TaskID, time.Now())
	if st == nil || st.caller != callerDigest(sealKeyOf(caller)) {
		g.taskOps.WithLabelValues(req.Method, taskNotFound).Inc()
		return nil, errTaskNotFound
	}
	s := g.snapshot()
	i, ok := s.byName[st.tool]
	if !ok || !viewFrom(r.Header).contains(s, i) {
		g.taskOps.WithLabelValues(req.Method, taskNotFound).Inc()
		return nil, errTaskNotFound
	}
	tool := &s.table.Tools[i]
	if tool.ToolSet.String() != st.toolSet || (st.uid != "" && tool.ToolSetUID != st.uid) {
		// Another ToolSet has the tool now: the task is not its.
		g.taskOps.WithLabelValues(req.Method, taskNotFound).Inc()
		return nil, errTaskNotFound
	}
	if g.opts.Auth != nil {
		allowed, err := g.permits(ctx, caller, s, i)
		if err != nil {
			g.taskOps.WithLabelValues(req.Method, outcomeAuthError).Inc()
			return nil, taskError(jsonrpc.CodeInternalError, "authorizing the task: %s", err)
		}
		if !allowed {
			g.taskOps.WithLabelValues(req.Method, taskNotFound).Inc()
			return nil, errTaskNotFound
		}
	}
	res, outcome, rerr := g.forwardTask(ctx, caller, s, i, st, req.Method, p.TaskID, r.Header)
	g.taskOps.WithLabelValues(req.Method, outcome).Inc()
	return res, rerr
}

// refusedTaskRequests is the refused metric's reason for a tasks/*
// request over its caller's bound.
const refusedTaskRequests = "task_requests_per_caller"

// Outcomes of the tasks metric besides the calls'.
const (
	taskNotFound  = "not_found"
	taskNotServed = "not_served"
)

// forwardTask sends method for the task st of tool i to its backend, as
// g.call sends a call, and returns the answer for the client under id.
func (g *Gateway) forwardTask(ctx context.Context, c *Caller, s *snapshot, i int, st *sealedTask, method, id string, header http.Header) (json.RawMessage, string, *jsonrpc.Error) {
	tool := &s.table.Tools[i]
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, g.opts.CallTimeout)
	defer cancel()
	url, err := taskRoute(s, i)
	if err != nil {
		return nil, outcomeBadReply, taskError(jsonrpc.CodeInternalError, "%s", err)
	}
	ctx = g.traceContext(ctx, header, nil)
	be, outcome, detail := g.route(ctx, tool, url)
	if be == nil {
		return nil, outcome, taskError(jsonrpc.CodeInternalError, "the task's tool %s (ToolSet %s) could not be reached: %s", tool.Name, tool.ToolSet, detail)
	}
	ctx = withBackend(ctx, be)
	var span trace.Span
	ctx, span = g.startSpan(ctx, method+" "+tool.Name, trace.SpanKindClient,
		attrToolName.String(tool.Name), attrToolSet.String(tool.ToolSet.String()), attrServer.String(hostOf(url)))
	out := g.backendHeader(ctx, c, tool, header)
	res, outcome, rerr := g.taskRoundTrip(ctx, url, st, method, id, header, out)
	outcome2, detail := be.refused(outcome, "")
	if outcome2 != outcome {
		outcome, rerr = outcome2, taskError(jsonrpc.CodeInternalError, "%s", be.redact(detail))
	}
	g.circuits.record(tool.ToolSet, be.probe, callResult(parent, outcome))
	msg := ""
	if rerr != nil {
		// Redacted by taskRoundTrip before the client's id went in.
		msg = rerr.Message
	}
	endSpan(span, outcome, msg)
	return res, outcome, rerr
}

// taskRoundTrip is forwardTask's exchange with the backend.
func (g *Gateway) taskRoundTrip(ctx context.Context, url string, st *sealedTask, method, id string, header, out http.Header) (json.RawMessage, string, *jsonrpc.Error) {
	slot, outcome, detail := g.acquire(ctx)
	if !slot.held() {
		return nil, outcome, taskError(codeServerBusy, "%s", detail)
	}
	defer slot.release()
	client, done := g.meter(ctx, header)
	defer done()
	conn, err := g.dialTask(ctx, client, url, out, st.session, false)
	if err != nil {
		return g.taskBackendError(ctx, err)
	}
	defer conn.close()
	raw, err := conn.call(ctx, method, map[string]string{"taskId": st.backendID})
	var rpcErr *jsonrpc.Error
	if asRPCError(err, &rpcErr) {
		// The backend's own answer (its "not found", a cancel of a task
		// that has ended): the client's, under the client's id.
		// Clipped before the backend's id is replaced, a few times at
		// most: a one-letter id in a long message would otherwise make a
		// hundredfold of it. The ToolSet's token is redacted before
		// either, so that no cut splits it and the client's id, which may
		// hold it, is left whole.
		msg := strings.Replace(backendFrom(ctx).clipRedacted(rpcErr.Message, 1024), st.backendID, id, 4)
		if method == methodTasksGet {
			// The backend cannot say where the task is: it no longer
			// counts.
			g.tasks.done(id)
		}
		return nil, outcomeToolError, &jsonrpc.Error{Code: rpcErr.Code, Message: msg}
	}
	if err != nil {
		return g.taskBackendError(ctx, err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, outcomeBadReply, taskError(jsonrpc.CodeInternalError, "the task's backend answered %s with something that is not a result", method)
	}
	// The answer as the client sees it: redacted, or withheld with the
	// gateway's words kept (a task's id, a result's related task).
	switch red, ok := g.redactReply(ctx, raw); {
	case !ok && method == methodTasksResult:
		m = map[string]json.RawMessage{}
		w, _ := json.Marshal(errorResult(withheldResult))
		_ = json.Unmarshal(w, &m)
	case !ok:
		m = withheldTask(m, backendFrom(ctx))
	default:
		m = nil
		if err := json.Unmarshal(red, &m); err != nil || m == nil {
			return nil, outcomeBadReply, taskError(jsonrpc.CodeInternalError, "the task's backend answered %s with something that is not a result", method)
		}
	}
	// The client's server is the gateway: in the 2026-07-28 era it names
	// itself in each answer, as the SDK does in those it writes.
	own := map[string]any{}
	if header.Get("Mcp-Protocol-Version") >= modernProtocol {
		own[mcp.MetaKeyServerInfo] = g.impl
	}
	if method == methodTasksResult {
		// The payload: the tool's result, whose related-task _meta names
		// the client's id, as MCP has a task's result name its task.
		own[relatedTaskMeta] = map[string]string{"taskId": id}
		relayMeta(m, own)
		b, err := json.Marshal(m)
		if err != nil {
			return nil, outcomeBadReply, taskError(jsonrpc.CodeInternalError, "%s", err)
		}
		g.tasks.done(id)
		return b, outcomeOK, nil
	}
	var status string
	_ = json.Unmarshal(m["status"], &status)
	b, err := g.rewriteTask(m, id, st, own)
	if err != nil {
		return nil, outcomeBadReply, taskError(jsonrpc.CodeInternalError, "%s", err)
	}
	switch status {
	case "completed", "failed", "cancelled":
		g.tasks.done(id)
	}
	return b, outcomeOK, nil
}

// taskBackendError is taskRoundTrip's answer when the backend could not
// be asked (taskFailure, which redacts the ToolSet's token).
func (g *Gateway) taskBackendError(ctx context.Context, err error) (json.RawMessage, string, *jsonrpc.Error) {
	_, outcome, detail := g.taskFailure(ctx, err)
	return nil, outcome, taskError(jsonrpc.CodeInternalError, "the task's backend could not be asked: %s", detail)
}

// resultText is the text of res's text blocks.
func resultText(res *mcp.CallToolResult) string {
	if res == nil {
		return "the call has no result"
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}
