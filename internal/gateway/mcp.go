package gateway

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// middleware answers tools/list and tools/call from the table and passes
// every other method (initialize, server/discover, ping,
// subscriptions/listen, …) to the SDK.
func (g *Gateway) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		// One budget of authorization questions for the whole request,
		// whatever paths it takes.
		ctx = withReviewBudget(ctx, g.opts.MaxReviewsPerRequest)
		switch r := req.(type) {
		case *mcp.ListToolsRequest:
			ctx, end := g.serverSpan(ctx, r, "tools/list", "")
			res, err := g.listTools(ctx, r)
			end(res, err)
			if err != nil {
				return nil, err
			}
			return g.withExecution(res), nil // tasks_mcp.go
		case *mcp.CallToolRequest:
			if ttl, ok := taskRequested(r); ok { // tasks.go
				return g.callAsTask(ctx, r, ttl)
			}
			res, err := g.answerCall(ctx, r, func(res *mcp.CallToolResult) *mcp.CallToolResult { return stampResult(r, res) })
			if err != nil {
				return nil, err // not a typed nil
			}
			return res, nil
		case *mcp.ServerRequest[*mcp.SetLoggingLevelParams]: //nolint:staticcheck // logging is deprecated in 2026-07-28, and still served
			g.noteLogLevel(r)
		}
		res, err := next(ctx, method, req)
		if err == nil && (method == "initialize" || method == "server/discover") {
			g.withExtensions(req, res)
			res = g.withTasksCapability(req, res) // tasks_mcp.go
		}
		return res, err
	}
}

// maxScanFactor bounds the tools one tools/list request looks at, as a
// multiple of the page size, when the caller may call only some of them:
// a caller who may call few of many tools gets short pages rather than
// one request that authorizes the whole table. The questions that cost a
// review are bounded apart, by Options.MaxReviewsPerRequest: a page that
// reaches that bound ends where it stopped, with a nextCursor.
const maxScanFactor = 4

func (g *Gateway) listTools(ctx context.Context, req *mcp.ListToolsRequest) (*mcp.ListToolsResult, error) {
	s := g.snapshot()
	header, token := extraOf(req)
	v := viewFrom(header)
	caller := callerFrom(token)
	var after string
	if req.Params != nil && req.Params.Cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(req.Params.Cursor)
		if err != nil || len(b) > 1024 {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid cursor"}
		}
		after = string(b)
	}
	rest := v.after(s, after)
	page := g.opts.PageSize
	res := &mcp.ListToolsResult{Tools: make([]*mcp.Tool, 0, min(page, len(rest)))}

	if g.opts.Auth == nil {
		n := min(page, len(rest))
		for _, i := range rest[:n] {
			res.Tools = append(res.Tools, s.tools[i])
		}
		if n < len(rest) {
			res.NextCursor = cursor(s.table.Tools[rest[n-1]].Name)
		}
	} else {
		scanned := 0
		for scanned < len(rest) && len(res.Tools) < page && scanned < maxScanFactor*page {
			chunk := rest[scanned:min(len(rest), scanned+page-len(res.Tools))]
			ok, decided, err := g.decide(ctx, caller, s, chunk)
			spent := errors.Is(err, ErrReviewBudget)
			if err != nil && (!spent || scanned+decided == 0) {
				// No progress at all (or no answer): an error, not a page
				// whose cursor is the one the client sent.
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "authorizing tools: " + err.Error()}
			}
			for k, i := range chunk[:decided] {
				if ok[k] {
					res.Tools = append(res.Tools, s.tools[i])
				}
			}
			scanned += decided
			if spent {
				break
			}
		}
		if scanned < len(rest) {
			res.NextCursor = cursor(s.table.Tools[rest[scanned-1]].Name)
		}
	}
	g.setCacheable(&res.Cacheable)
	g.metrics.listSize.WithLabelValues("mcp").Observe(float64(len(res.Tools)))
	return res, nil
}

func cursor(lastName string) string { return base64.RawURLEncoding.EncodeToString([]byte(lastName)) }

// setCacheable sets the 2026 cache fields truthfully: a list that depends
// on who asks is private to the caller.
func (g *Gateway) setCacheable(c *mcp.Cacheable) {
	c.TTLMs = max(0, int(g.opts.ListTTL.Milliseconds()))
	c.CacheScope = "public"
	if g.opts.Auth != nil {
		c.CacheScope = "private"
	}
}

// answerCall answers a tools/call that is not task-augmented, for the SDK's
// middleware and for serveFastCall alike: its server span, the call, and
// stamp, which sets what the client's era needs of the result.
func (g *Gateway) answerCall(ctx context.Context, r *mcp.CallToolRequest, stamp func(*mcp.CallToolResult) *mcp.CallToolResult) (*mcp.CallToolResult, error) {
	ctx, end := g.serverSpan(ctx, r, "tools/call", r.Params.Name)
	res, err := g.callTool(withCallRequest(ctx, r), r)
	if err == nil {
		res = stamp(res)
	}
	end(res, err)
	return res, err
}

// callTool is the one funnel of every tool call: it decides the call
// (the tool exists in the view, the caller may call it, the limits let it
// through), routes it, and writes its one audit line.
func (g *Gateway) callTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	header, token := extraOf(req)
	caller := callerFrom(token)
	ctx, a := g.beginCall(ctx, req.Params.Name, header, caller, req.Params.Arguments)
	res, ref, err := g.decideCall(ctx, req, header, caller, a)
	g.endCall(a, caller, ref)
	return res, err
}

// decideCall is callTool's decision and call; it fills in a's decision and
// outcome, and returns the tool's entry for the audit line (nil for an
// unknown tool): the table's own, which nothing changes, so that a call
// without an audit log copies nothing of it.
func (g *Gateway) decideCall(ctx context.Context, req *mcp.CallToolRequest, header http.Header, caller *Caller, a *callAudit) (*mcp.CallToolResult, *spec.TableTool, error) {
	s := g.snapshot()
	v := viewFrom(header)
	name := req.Params.Name
	i, ok := s.byName[name]
	if !ok || !v.contains(s, i) {
		g.metrics.calls.inc(nil, "", outcomeUnknown)
		a.rec.Decision, a.rec.Reason, a.rec.Outcome = decisionDenied, reasonUnknownTool, outcomeUnknown
		return nil, nil, unknownTool(name)
	}
	tool := &s.table.Tools[i]
	if g.opts.Auth != nil {
		allowed, err := g.permits(ctx, caller, s, i)
		if err != nil {
			g.countCall(s, i, outcomeAuthError)
			a.rec.Decision, a.rec.Reason, a.rec.Outcome = decisionError, clip(err.Error(), 512), outcomeAuthError
			return nil, tool, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "authorizing the call: " + err.Error()}
		}
		if !allowed {
			// A tool the caller may not call is as absent as in its lists.
			g.countCall(s, i, outcomeDenied)
			a.rec.Decision, a.rec.Reason, a.rec.Outcome = decisionDenied, reasonNotPermitted, outcomeDenied
			return nil, tool, unknownTool(name)
		}
	}
	if l := g.limitCall(limitKeyOf(caller, header), s, i); l != nil {
		g.countCall(s, i, outcomeLimited)
		g.metrics.limited.WithLabelValues(l.limit).Inc()
		a.rec.Decision, a.rec.Reason, a.rec.Outcome = decisionRateLimited, l.limit, outcomeLimited
		a.rec.RetryAfterSeconds = l.retryAfter()
		res := errorResult(l.message(tool.Name, tool.ToolSet.String()))
		res.Meta = mcp.Meta{retryAfterMeta: l.retryAfter()}
		return res, tool, nil
	}
	a.rec.Decision = decisionAllowed
	res := g.call(ctx, caller, s, i, req.Params.Arguments, header)
	a.rec.Outcome = a.info.outcome
	return res, tool, nil
}

// retryAfterMeta is the _meta key of a rate-limited result that says, in
// whole seconds, when to retry: the isError text says it to a model.
const retryAfterMeta = "toolplane.io/retryAfterSeconds"

// limitKeyOf is the caller of the per-caller limit: the user name under
// auth, else the client's address.
func limitKeyOf(c *Caller, header http.Header) string {
	if c != nil {
		return "user:" + c.User
	}
	if a := header.Get(clientHeader); a != "" {
		return "addr:" + a
	}
	return ""
}

func unknownTool(name string) error {
	if len(name) > 128 {
		name = name[:128] + "…"
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", name)}
}

func extraOf(req mcp.Request) (http.Header, *auth.TokenInfo) {
	e := req.GetExtra()
	if e == nil {
		return http.Header{}, nil
	}
	return e.Header, e.TokenInfo
}
