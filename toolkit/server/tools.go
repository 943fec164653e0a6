package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// ToolsOptions configure [AddTools]. The zero value serves with the
// defaults.
type ToolsOptions struct {
	// CallContext, if set, derives each call's context from the MCP
	// request, after the [toolkit.Caller] is set from the request's HTTP
	// header and verified token (when the transport has them). Use it to
	// extract a trace context from req.Extra.Header, say.
	CallContext func(ctx context.Context, req *mcp.CallToolRequest) context.Context
	// TxnToken, if set, verifies the transaction token of each call's
	// HTTP header (the Txn-Token header), as [Options.TxnToken] does: a
	// call whose token does not verify is refused with a JSON-RPC error
	// [CodeTxnTokenInvalid]. A transport without HTTP headers (stdio)
	// carries no token, so its calls are anonymous, or refused if
	// TxnToken.Required.
	TxnToken *TxnTokenOptions
	// Logger receives the tools the SDK refused to serve. The default is
	// [slog.Default].
	Logger *slog.Logger

	txn *TxnTokenVerifier // the Handler's, shared with its invoke endpoint
}

// Tools is a registry's tools on an [mcp.Server]: see [AddTools].
type Tools struct {
	reg     *toolkit.Registry
	server  *mcp.Server
	logger  *slog.Logger
	callCtx func(context.Context, *mcp.CallToolRequest) context.Context
	txn     *TxnTokenVerifier // nil: no verification

	mu          sync.Mutex
	served      map[string]string // tool name → revision of its spec as served
	unsubscribe func()
	closed      bool
}

// AddTools registers reg's tools on s, a go-sdk server the caller owns and
// serves over any transport (stdio, Streamable HTTP, in memory), beside
// its own resources, prompts and tools. The tools bind, validate, run
// their middleware and build their results exactly as [Handler] serves
// them, since every call goes through [toolkit.Registry.Call]; toolkit's
// progress and log messages become notifications/progress and
// notifications/message on the call's stream, and image, audio and
// resource blocks MCP's own content.
//
// The tools follow the registry as tools are added and removed, until
// [Tools.Close]. A tool reaches the MCP request that called it with
// [CallToolRequest], and asks its user for input with [Elicit].
//
// s must not have tools of the same names; AddTools replaces them. opts
// may be nil.
func AddTools(s *mcp.Server, reg *toolkit.Registry, opts *ToolsOptions) (*Tools, error) {
	if s == nil || reg == nil {
		return nil, errors.New("server.AddTools: nil server or registry")
	}
	var o ToolsOptions
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.txn == nil && o.TxnToken != nil {
		v, err := NewTxnTokenVerifier(o.TxnToken)
		if err != nil {
			return nil, err
		}
		o.txn = v
	}
	t := &Tools{reg: reg, server: s, logger: o.Logger, callCtx: o.CallContext, txn: o.txn, served: map[string]string{}}
	s.AddReceivingMiddleware(t.suggest)
	t.sync()
	t.unsubscribe = reg.Subscribe(t.sync)
	return t, nil
}

// Close stops following the registry and removes its tools from the
// server. It is idempotent and always returns nil.
func (t *Tools) Close() error {
	if !t.stopFollowing() {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	names := make([]string, 0, len(t.served))
	for name := range t.served {
		names = append(names, name)
	}
	if len(names) > 0 {
		t.server.RemoveTools(names...)
	}
	t.served = nil
	return nil
}

// suggest adds the registry's "did you mean" to the SDK's refusal of a
// tools/call for a tool it does not have, which never reaches call.
func (t *Tools) suggest(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		var je *jsonrpc.Error
		if err == nil || method != "tools/call" || !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams || !strings.HasPrefix(je.Message, "unknown tool ") {
			return res, err
		}
		ctr, ok := req.(*mcp.CallToolRequest)
		if !ok || ctr.Params == nil {
			return res, err
		}
		t.mu.Lock()
		closed := t.closed && t.served == nil
		t.mu.Unlock()
		if near, ok := t.reg.Nearest(ctr.Params.Name); ok && !closed && !strings.Contains(je.Message, "did you mean") {
			return res, &jsonrpc.Error{Code: je.Code, Message: je.Message + fmt.Sprintf(" (did you mean %q?)", near), Data: je.Data}
		}
		return res, err
	}
}

// stopFollowing stops following the registry, leaving the tools served as
// they are. It reports whether it stopped it (false: stopped already).
func (t *Tools) stopFollowing() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.closed = true
	t.unsubscribe()
	return true
}

// sync makes the server's tools equal to the registry's. It adds or
// replaces only the tools whose spec changed, and removes the rest in one
// call, so that a change is one debounced list_changed notification.
func (t *Tools) sync() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	tools := t.reg.Specs()
	seen := make(map[string]bool, len(tools))
	for _, ts := range tools {
		seen[ts.Name] = true
		rev := spec.Revision([]spec.Tool{ts})
		if t.served[ts.Name] == rev {
			continue
		}
		if err := t.add(ts); err != nil {
			t.logger.Error("Serving a tool over MCP failed", "tool", ts.Name, "error", err)
			continue
		}
		t.served[ts.Name] = rev
	}
	var gone []string
	for name := range t.served {
		if !seen[name] {
			gone = append(gone, name)
			delete(t.served, name)
		}
	}
	if len(gone) > 0 {
		t.server.RemoveTools(gone...)
	}
}

// add registers one tool with the SDK. The SDK panics on a schema it
// cannot serve; that is turned into an error so that one bad tool does not
// take the process down.
func (t *Tools) add(ts spec.Tool) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	t.server.AddTool(MCPTool(ts), t.call)
	return nil
}

type requestKey struct{}

// CallToolRequest returns the MCP request of the call whose context ctx
// is, when the tool was called over MCP: its session (client
// capabilities, elicitation, sampling), its _meta and, over HTTP, its
// header. Other transports have none.
func CallToolRequest(ctx context.Context) (*mcp.CallToolRequest, bool) {
	req, ok := ctx.Value(requestKey{}).(*mcp.CallToolRequest)
	return req, ok && req != nil
}

// ErrElicitationUnsupported is returned by [Elicit] when the call did not
// come over MCP, or its client did not declare the elicitation capability.
var ErrElicitationUnsupported = errors.New("server: the client does not support elicitation")

// Elicit asks the calling client's user for input (MCP elicitation), when
// the tool was called over MCP by a client that declared it can answer.
// Otherwise the error wraps [ErrElicitationUnsupported] (and
// [toolkit.ErrCannotAsk]), so that the tool can carry on without: many
// clients do not answer.
//
// A client of the 2025 era is asked during the call. In the 2026-07-28 era
// the error wraps [toolkit.ErrInputRequired] the first time: the tool
// returns it, the call's result is the question (input_required), and the
// client calls again with the answer, which runs the tool again; Elicit
// then returns the answer. The question is its own id: the same question
// asked twice in a call gets the same answer. [toolkit.Ask] is the same
// for a tool that does not import the SDK, with an id of its own.
func Elicit(ctx context.Context, params *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	a := askerOf(ctx)
	if a == nil || params == nil {
		return nil, fmt.Errorf("%w: %w", ErrElicitationUnsupported, toolkit.ErrCannotAsk)
	}
	return a.elicit(ctx, elicitID(params), params)
}

// call is the one handler of every tool: it calls the registry exactly as
// the invoke endpoint does.
func (t *Tools) call(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var (
		header http.Header
		token  *auth.TokenInfo
	)
	if req.Extra != nil {
		header = req.Extra.Header
		token = req.Extra.TokenInfo
	}
	if req.Session != nil && req.Session.ID() != "" {
		// A session's context is that of the request that opened it, so a
		// caller in it would be stale; only this request's header and
		// verified token speak for this request.
		ctx = toolkit.WithCaller(ctx, toolkit.Caller{})
	}
	ctx = callerContext(ctx, header, token)
	ctx = context.WithValue(ctx, requestKey{}, req)
	if t.callCtx != nil {
		ctx = t.callCtx(ctx, req)
	}
	ctx, err := t.txn.verifyCall(ctx, header)
	if err != nil {
		logRefusal(t.logger, err)
		return nil, &jsonrpc.Error{Code: CodeTxnTokenInvalid, Message: txnRefusal(err)}
	}
	if req.Session != nil {
		ctx = toolkit.WithReporter(ctx, &reporter{session: req.Session, tool: req.Params.Name, token: req.Params.GetProgressToken()})
	}
	ask := newAsker(req)
	if ask != nil {
		ctx = toolkit.WithAsker(context.WithValue(ctx, askerOfKey{}, ask), ask)
	}
	res, err := t.reg.Call(ctx, req.Params.Name, req.Params.Arguments)
	switch {
	case err == nil:
		return mcpResult(res), nil
	case errors.Is(err, toolkit.ErrInputRequired):
		// The tool's question is the call's answer (ask.go).
		if ir := ask.inputRequired(); ir != nil {
			return ir, nil
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: errNoQuestion.Error()}
	case errors.Is(err, toolkit.ErrToolNotFound):
		msg := fmt.Sprintf("unknown tool %q", req.Params.Name)
		if near, ok := t.reg.Nearest(req.Params.Name); ok {
			msg += fmt.Sprintf(" (did you mean %q?)", near)
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg}
	case errors.Is(err, toolkit.ErrInvalidArguments):
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	default:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
}

// callerContext returns ctx carrying the caller of this request: the
// subject and scopes that an outer middleware set, or failing that those
// of a token that the MCP SDK's auth middleware verified, and the
// request's header.
func callerContext(ctx context.Context, header http.Header, token *auth.TokenInfo) context.Context {
	c, _ := toolkit.CallerFrom(ctx)
	if c.Subject == "" && len(c.Scopes) == 0 && token != nil {
		c.Subject = token.UserID
		c.Scopes = token.Scopes
	}
	if header != nil {
		c.Header = header
	}
	return toolkit.WithCaller(ctx, c)
}
