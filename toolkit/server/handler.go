package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// DefaultMaxBodyBytes is the default bound on an invoke body and on an MCP
// message: 1 MiB.
const DefaultMaxBodyBytes = 1 << 20

// DefaultSessionTimeout closes an idle MCP session when
// [Options.MCPSessions] is set and [Options.SessionTimeout] is zero.
const DefaultSessionTimeout = 10 * time.Minute

// Error codes of the invoke endpoint's JSON error bodies
// ([spec.ErrorDetail.Code]).
const (
	CodeToolNotFound     = "tool_not_found"
	CodeBadRequest       = "bad_request"
	CodeBodyTooLarge     = "body_too_large"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeNotFound         = "not_found"
	// CodeForbidden refuses a cross-origin request, or one with a foreign
	// Host on loopback (see [Options.CrossOriginProtection]).
	CodeForbidden = "forbidden"
	// CodeUnsupportedMediaType refuses an invoke body that is not sent as
	// application/json (see [Options.AllowAnyContentType]).
	CodeUnsupportedMediaType = "unsupported_media_type"
	// CodeInvalidArguments and CodeToolFailed are only used when the
	// registry propagates errors ([toolkit.Registry.PropagateErrors]);
	// otherwise both are a 200 reply with isError set.
	CodeInvalidArguments = "invalid_arguments"
	CodeToolFailed       = "tool_failed"
)

// Options configure a [Handler]. The zero value serves with the defaults.
type Options struct {
	// Name identifies the workload in the spec document and in MCP's
	// serverInfo. The default is "toolkit".
	Name string
	// Version is the workload's version, served next to Name.
	Version string
	// Instructions, if set, are MCP's server instructions: a hint to the
	// model on how to use the tools together.
	Instructions string
	// SpecPath is where the spec document is served. The default is
	// [spec.DefaultPath]; it must be a plain path, with no pattern syntax.
	SpecPath string
	// MaxBodyBytes bounds the body of an invoke request and of an MCP
	// request. Zero means [DefaultMaxBodyBytes]; a negative value makes
	// [New] panic. A larger body is refused with 413.
	MaxBodyBytes int64
	// MCPSessions gives MCP clients of the 2025 protocol era (those that
	// send initialize) a session, so that registry changes reach them as
	// notifications/tools/list_changed on their standalone SSE stream.
	// Without it, /mcp is stateless for every client, which is what a
	// Deployment with several replicas behind a Service needs: a session
	// lives in one process, and a later request of the session that the
	// Service sends to another replica fails. Clients of the 2026-07-28 era
	// are served statelessly either way, and get list_changed through
	// subscriptions/listen. See the package documentation.
	MCPSessions bool
	// SessionTimeout closes an MCP session after this long without a
	// request. Zero means [DefaultSessionTimeout]; a negative value makes
	// [New] panic. Only used with MCPSessions.
	SessionTimeout time.Duration
	// AllowAnyHostOnLoopback turns off the DNS-rebinding protection of
	// /mcp (the MCP SDK's) and of POST /tools/{name} (the same rule, here),
	// which refuses (403) a request that arrives on a loopback address with
	// a Host header that is not a loopback name. Set it when a sidecar
	// proxy forwards requests from 127.0.0.1 with the Service's name as
	// Host; do not set it for a server that a browser on the same machine
	// could reach.
	AllowAnyHostOnLoopback bool
	// CrossOriginProtection guards POST /tools/{name} against requests that
	// a web page makes from a browser: one whose Sec-Fetch-Site or Origin
	// header shows another origin is refused with 403. Requests without
	// those headers (curl, agents, the operator) pass. nil means
	// [http.NewCrossOriginProtection] with no trusted origins; give one of
	// your own to trust the origin of a browser app
	// (AddTrustedOrigin).
	CrossOriginProtection *http.CrossOriginProtection
	// AllowCrossOrigin turns the cross-origin check of POST /tools/{name}
	// off. Tools then run for any web page that a user of the server's
	// network visits: set it only behind a proxy that does its own check.
	AllowCrossOrigin bool
	// AllowAnyContentType accepts an invoke body whatever its
	// Content-Type. By default it must be application/json (415
	// otherwise), as on /mcp: a browser sends a cross-origin POST without
	// a preflight only with a form or text/plain type, so the requirement
	// keeps web pages out even where no Origin header is sent.
	AllowAnyContentType bool
	// CallContext, if set, derives each call's context from the request's
	// HTTP header, on invoke and on MCP alike. Use it to take a trace
	// context from the header when no instrumented HTTP middleware (such as
	// otelhttp) already put the request's span in the context, and in MCP
	// sessions, whose context is not the request's:
	//
	//	CallContext: func(ctx context.Context, h http.Header) context.Context {
	//		return otel.GetTextMapPropagator().Extract(ctx, propagation.HeaderCarrier(h))
	//	},
	CallContext func(ctx context.Context, header http.Header) context.Context
	// TxnToken, if set, verifies the transaction token (the Txn-Token
	// header) that the toolplane gateway sends with every call it routes
	// under authentication, on invoke and on MCP alike. A call whose token
	// verifies runs with the [toolkit.Caller] it names (Subject, Groups,
	// RequestID), replacing any other; one whose token does not (forged,
	// expired, for another audience, signed by an unknown key) is refused:
	// 401 on invoke, a JSON-RPC error [CodeTxnTokenInvalid] on MCP. A call
	// without a token is anonymous unless TxnToken.Required. Nil verifies
	// nothing: the header is ignored, and nothing in a call's Caller comes
	// from it. See [TxnTokenVerifier].
	TxnToken *TxnTokenOptions
	// Logger receives the transport's own errors, and the MCP SDK's logs.
	// The default is [slog.Default].
	Logger *slog.Logger

	// MaxTasksPerCaller bounds the MCP tasks (2025-11-25) that one caller
	// has running, for tools declared with [toolkit.TaskSupport]; the next
	// task-augmented tools/call is refused with [CodeTooManyTasks]; a
	// task cancelled or past its lifetime counts until its tool returns. A
	// caller also keeps at most this many finished tasks: a new task drops
	// its oldest. The caller is the verified [toolkit.Caller] subject
	// (Txn-Token, a bearer token the SDK verified, an outer middleware),
	// else the MCP session, else the remote IP address. Zero means
	// [DefaultMaxTasksPerCaller]; a negative value makes [New] panic.
	MaxTasksPerCaller int
	// MaxTasks bounds the tasks running for every caller together, so that
	// callers without a subject, one per address, cannot hold the process;
	// at most twice as many are kept. Zero means [DefaultMaxTasks]; a
	// negative value makes [New] panic.
	MaxTasks int
	// MaxTaskTTL bounds a task's lifetime from its creation: a caller's
	// ttl is clamped to it (and to at least one second), and a task that
	// asks none gets it. When it ends the task is cancelled if it still
	// runs, and dropped with its result. Zero means [DefaultMaxTaskTTL]; a
	// negative value makes [New] panic.
	MaxTaskTTL time.Duration
	// TaskPollInterval is the pollInterval a task suggests to its client.
	// Zero means [DefaultTaskPollInterval]; a negative value makes [New]
	// panic.
	TaskPollInterval time.Duration
}

// Handler serves a [toolkit.Registry] over HTTP, from one registry and one
// middleware chain:
//
//   - GET {SpecPath}: the spec document ([spec.Document]), with an ETag;
//   - POST /tools/{name}: invoke a tool with the body as its arguments,
//     which must be application/json; cross-origin browser requests and,
//     on loopback, foreign Host headers are refused as on /mcp;
//   - /mcp: MCP Streamable HTTP, served by the official MCP Go SDK.
//
// Every call goes through [toolkit.Registry.Call], so binding, validation
// and middleware are the same on every transport. The transport puts a
// [toolkit.Caller] in the call's context: the request's headers, and the
// subject and scopes of a caller that an outer middleware set with
// [toolkit.WithCaller] or that the MCP SDK's auth middleware verified
// ([auth.TokenInfo]).
//
// A Handler is safe for concurrent use. It follows the registry as tools
// are added and removed. Call [Handler.Close] when done with it (typically
// with [http.Server.RegisterOnShutdown]): it stops following the registry
// and ends open MCP streams, which [http.Server.Shutdown] would otherwise
// wait for. A Handler also ends its MCP streams when the http.Server of
// any request it served shuts down, so that Shutdown returns even where
// its owner forgot Close.
type Handler struct {
	reg     *toolkit.Registry
	guard   invokeGuard
	callCtx func(context.Context, http.Header) context.Context
	info    spec.Server
	maxBody int64
	logger  *slog.Logger
	mux     *http.ServeMux
	mcp     *mcpBridge
	txn     *TxnTokenVerifier // nil unless Options.TxnToken

	doc atomic.Pointer[document]

	closeOnce sync.Once
	servers   sync.Map // *http.Server whose shutdown closes h
}

// New returns a Handler that serves reg. opts may be nil. It panics where
// [NewHandler] returns an error: for a nil registry or an option out of
// range, a programming error found at the first start.
func New(reg *toolkit.Registry, opts *Options) *Handler {
	h, err := NewHandler(reg, opts)
	if err != nil {
		panic(err)
	}
	return h
}

// ErrInvalidOptions is matched by the error of [NewHandler] for a nil
// registry or an option out of range.
var ErrInvalidOptions = errors.New("server: invalid options")

// NewHandler returns a Handler that serves reg, or an error wrapping
// [ErrInvalidOptions] for a nil registry or an option out of range, as
// [toolkit.New] returns one for a bad tool. opts may be nil.
func NewHandler(reg *toolkit.Registry, opts *Options) (*Handler, error) {
	if reg == nil {
		return nil, fmt.Errorf("%w: nil registry", ErrInvalidOptions)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Name == "" {
		o.Name = "toolkit"
	}
	if o.SpecPath == "" {
		o.SpecPath = spec.DefaultPath
	}
	if !strings.HasPrefix(o.SpecPath, "/") || strings.ContainsAny(o.SpecPath, "{} ") {
		return nil, fmt.Errorf("%w: SpecPath %q is not a plain absolute path", ErrInvalidOptions, o.SpecPath)
	}
	if o.MaxBodyBytes < 0 || o.SessionTimeout < 0 {
		return nil, fmt.Errorf("%w: MaxBodyBytes (%d) and SessionTimeout (%s) must not be negative", ErrInvalidOptions, o.MaxBodyBytes, o.SessionTimeout)
	}
	if o.MaxTasksPerCaller < 0 || o.MaxTasks < 0 || o.MaxTaskTTL < 0 || o.TaskPollInterval < 0 {
		return nil, fmt.Errorf("%w: MaxTasksPerCaller (%d), MaxTasks (%d), MaxTaskTTL (%s) and TaskPollInterval (%s) must not be negative",
			ErrInvalidOptions, o.MaxTasksPerCaller, o.MaxTasks, o.MaxTaskTTL, o.TaskPollInterval)
	}
	if o.MaxTasksPerCaller == 0 {
		o.MaxTasksPerCaller = DefaultMaxTasksPerCaller
	}
	if o.MaxTasks == 0 {
		o.MaxTasks = DefaultMaxTasks
	}
	if o.MaxTaskTTL == 0 {
		o.MaxTaskTTL = DefaultMaxTaskTTL
	}
	if o.TaskPollInterval == 0 {
		o.TaskPollInterval = DefaultTaskPollInterval
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.SessionTimeout == 0 {
		o.SessionTimeout = DefaultSessionTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	h := &Handler{
		reg:     reg,
		guard:   newInvokeGuard(&o),
		callCtx: o.CallContext,
		info:    spec.Server{Name: o.Name, Version: o.Version},
		maxBody: o.MaxBodyBytes,
		logger:  o.Logger,
		mux:     http.NewServeMux(),
	}
	var err error
	if o.TxnToken != nil {
		if h.txn, err = NewTxnTokenVerifier(o.TxnToken); err != nil {
			return nil, err
		}
	}
	if h.mcp, err = newMCPBridge(reg, &o, o.CallContext, h.txn); err != nil {
		return nil, err
	}
	// The method checks are the handlers' own, so that a wrong method gets
	// a JSON error body like every other failure here; ServeMux's own 405
	// is plain text.
	h.mux.HandleFunc(o.SpecPath, h.serveSpec)
	h.mux.HandleFunc(spec.InvokePrefix+"{name}", h.serveInvoke)
	h.mux.Handle(spec.MCPPath, h.mcp)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, CodeNotFound, "no such endpoint; tools are listed at "+o.SpecPath)
	})
	return h, nil
}

// ServeHTTP implements [http.Handler].
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server); ok && srv != nil {
		if _, seen := h.servers.Load(srv); !seen {
			if _, seen = h.servers.LoadOrStore(srv, true); !seen {
				// Shutdown waits for open MCP streams, which end only with
				// Close: a Handler that its owner forgot to close would
				// hold Shutdown to its deadline. Only the streams end
				// here: the Handler may serve another server too, and goes
				// on following the registry until Close.
				srv.RegisterOnShutdown(h.mcp.endSessions)
			}
		}
	}
	h.mux.ServeHTTP(w, r)
}

// Close stops following the registry and closes every MCP session, which
// ends their open streams (a 2026-era subscriptions/listen, a 2025-era
// standalone SSE stream). Requests that arrive after Close are still
// served, statelessly. Close is idempotent and always returns nil.
func (h *Handler) Close() error {
	h.closeOnce.Do(h.mcp.close)
	return nil
}

// callContext returns ctx carrying the caller of this request (see
// callerContext), then whatever Options.CallContext adds.
func (h *Handler) callContext(ctx context.Context, header http.Header, token *auth.TokenInfo) context.Context {
	ctx = callerContext(ctx, header, token)
	if h.callCtx != nil {
		ctx = h.callCtx(ctx, header)
	}
	return ctx
}

// writeJSON writes v with status. v is always one of this package's own
// values, so an encoding failure is a bug; it is reported as a 500.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(spec.ErrorResponse{Error: spec.ErrorDetail{Code: "internal", Message: "encoding the reply failed"}})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, spec.ErrorResponse{Error: spec.ErrorDetail{Code: code, Message: message}})
}

func methodNotAllowed(w http.ResponseWriter, allow ...string) {
	w.Header().Set("Allow", strings.Join(allow, ", "))
	writeError(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed, "use "+strings.Join(allow, " or "))
}

// quote quotes a caller-supplied string for an error message, cut to a
// bounded length so that a reply never grows with the request.
func quote(s string) string {
	const max = 128
	if len(s) > max {
		s = s[:max] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// discard drains what is left of a body a handler did not read, up to a
// bound, so that the connection can be reused without reading a huge body.
func discard(r io.Reader) { _, _ = io.CopyN(io.Discard, r, 4<<10) }
