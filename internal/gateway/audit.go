package gateway

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"

	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// The audit log (Options.AuditLog) has one JSON line per tools/call that
// reaches the gateway's funnel (callTool): every decision (allowed, denied,
// rate limited) and, for an allowed call, its outcome. It never holds a
// call's result, nor its arguments unless Options.AuditArguments, and then
// with every sensitive value redacted.
//
// Writing never holds up a call: lines go to a bounded buffer that one
// goroutine writes out. When the sink stalls and the buffer is full, a
// line is dropped and counted in toolplane_gateway_audit_dropped_total, so
// that a stuck log cannot stop every tool; alert on that counter.

// Decisions of an audit line.
const (
	decisionAllowed     = "allowed"
	decisionDenied      = "denied"
	decisionRateLimited = "rate_limited"
	decisionError       = "error" // authorization could not be decided
)

// Reasons of a denied or limited decision.
const (
	reasonUnknownTool  = "unknown_tool"  // no such tool in the table, or not in the view
	reasonNotPermitted = "not_permitted" // the Authorizer said no (answered as unknown)
)

// outcomeLimited is the calls metric's outcome of a call a limit refused.
const outcomeLimited = "limited"

// DefaultAuditBuffer is the default of [Options.AuditBuffer].
const DefaultAuditBuffer = 8192

// maxAuditName bounds a tool name a caller sent, in an audit line.
const maxAuditName = 256

// maxAuditArguments bounds the arguments in one audit line (after
// redaction): larger ones are replaced by a note of their size, so that a
// line stays small whatever a caller sends.
const maxAuditArguments = 16 << 10

// maxAuditBufferBytes bounds the bytes of the lines waiting for the sink,
// whatever Options.AuditBuffer: a line that would pass it is dropped.
const maxAuditBufferBytes = 16 << 20

// auditRecord is one line of the audit log.
type auditRecord struct {
	Time      time.Time    `json:"time"`
	RequestID string       `json:"requestId"`
	TraceID   string       `json:"traceId,omitempty"`
	Caller    *auditCaller `json:"caller,omitempty"`
	// Client is the address the request came from (the proxy's, behind
	// one).
	Client   string `json:"client,omitempty"`
	Method   string `json:"method"`
	View     string `json:"view"`
	Search   bool   `json:"search,omitempty"` // arrived at a search endpoint (call_tool)
	Tool     string `json:"tool"`
	ToolSet  string `json:"toolSet,omitempty"`
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
	// RetryAfterSeconds is what a rate-limited caller was told.
	RetryAfterSeconds int `json:"retryAfterSeconds,omitempty"`
	// Outcome is the calls metric's outcome: for an allowed call ok,
	// tool_error, unreachable, timeout, busy or bad_reply.
	Outcome       string          `json:"outcome"`
	DurationMs    float64         `json:"durationMs"`
	ArgumentBytes int             `json:"argumentBytes"`
	ResultBytes   int64           `json:"resultBytes"`
	Arguments     json.RawMessage `json:"arguments,omitempty"`
}

// auditCaller is who called: absent without auth.
type auditCaller struct {
	User   string   `json:"user"`
	UID    string   `json:"uid,omitempty"`
	Groups []string `json:"groups,omitempty"`
	// ServiceAccount is namespace/name when the user is one.
	ServiceAccount string `json:"serviceAccount,omitempty"`
	AuthMode       string `json:"authMode,omitempty"`
}

func auditCallerOf(c *Caller) *auditCaller {
	if c == nil {
		return nil
	}
	a := &auditCaller{User: c.User, UID: c.UID, Groups: c.Groups, AuthMode: c.AuthMode}
	if ns, name, ok := serviceAccountOf(c); ok {
		a.ServiceAccount = ns + "/" + name
	}
	return a
}

// serviceAccountOf is the ServiceAccount c is, if the API server said so:
// a user name of that form from any other authenticator (an IdP's claim)
// is not taken for one, so that it can neither pass for a ServiceAccount
// in the audit log nor make up label values of the metrics.
func serviceAccountOf(c *Caller) (namespace, name string, ok bool) {
	if c == nil || c.AuthMode != authModeKubernetes {
		return "", "", false
	}
	namespace, name, err := serviceaccount.SplitUsername(c.User)
	return namespace, name, err == nil
}

// authModeKubernetes is the Caller.AuthMode of a token the API server
// reviewed.
const authModeKubernetes = "kubernetes"

// callerNamespace is the label of the per-caller metrics: the namespace
// of a ServiceAccount caller, and "" for anyone else, so that the metrics'
// cardinality is that of namespaces, never of users.
func callerNamespace(c *Caller) string {
	ns, _, _ := serviceAccountOf(c)
	return ns
}

// auditLog writes audit lines to a sink off the request path. Its
// goroutine lives as long as the process: lines of calls that end after
// [Gateway.Close] are still written.
type auditLog struct {
	lines   chan []byte
	w       io.Writer
	pending atomic.Int64 // queued and not yet written
	bytes   atomic.Int64 // the bytes of those
	m       *metrics
	onError func(error)
}

func newAuditLog(w io.Writer, buffer int, m *metrics, onError func(error)) *auditLog {
	a := &auditLog{lines: make(chan []byte, buffer), w: w, m: m, onError: onError}
	go a.run()
	return a
}

func (a *auditLog) run() {
	var failing bool
	for line := range a.lines {
		_, err := a.w.Write(line)
		a.bytes.Add(-int64(len(line)))
		a.pending.Add(-1)
		if err != nil {
			a.m.auditDropped.Inc()
			if !failing {
				a.onError(err)
			}
			failing = true
			continue
		}
		failing = false
		a.m.auditWritten.Inc()
	}
}

// write queues r, or drops and counts it when the buffer is full.
func (a *auditLog) write(r *auditRecord) {
	b, err := json.Marshal(r)
	if err != nil {
		a.m.auditDropped.Inc()
		return
	}
	b = append(b, '\n')
	if a.bytes.Add(int64(len(b))) > maxAuditBufferBytes {
		a.bytes.Add(-int64(len(b)))
		a.m.auditDropped.Inc()
		return
	}
	a.pending.Add(1)
	select {
	case a.lines <- b:
	default:
		a.pending.Add(-1)
		a.bytes.Add(-int64(len(b)))
		a.m.auditDropped.Inc()
	}
}

// flush waits until every line queued has been written, or wait has
// passed.
func (a *auditLog) flush(wait time.Duration) {
	deadline := time.Now().Add(wait)
	for a.pending.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

// requestIDFrom returns the id the gateway gave the call of ctx (its audit
// line's requestId), or "".
func requestIDFrom(ctx context.Context) string {
	if ci := callInfoFrom(ctx); ci != nil {
		return ci.requestID
	}
	return ""
}

// callInfo is what g.call tells callTool about a routed call for its audit
// line, through the call's context, and the call's request id: one value
// of the context for both (the id's own cost two allocations a call).
type callInfo struct {
	requestID   string
	outcome     string
	resultBytes int64
}

type callInfoKey struct{}

func callInfoFrom(ctx context.Context) *callInfo {
	ci, _ := ctx.Value(callInfoKey{}).(*callInfo)
	return ci
}

// callAudit collects one call's audit line as callTool decides it.
type callAudit struct {
	rec   auditRecord
	start time.Time
	info  callInfo
	args  json.RawMessage
}

// beginCall gives a call its request id and starts its audit line.
func (g *Gateway) beginCall(ctx context.Context, name string, header http.Header, c *Caller, args json.RawMessage) (context.Context, *callAudit) {
	a := &callAudit{start: time.Now(), args: args}
	id := rand.Text()
	a.info.requestID = id
	ctx = context.WithValue(ctx, callInfoKey{}, &a.info)
	a.rec = auditRecord{
		RequestID:     id,
		Caller:        auditCallerOf(c),
		Client:        header.Get(clientHeader),
		Method:        "tools/call",
		View:          viewFrom(header).String(),
		Search:        header.Get(searchHeader) != "",
		Tool:          clip(name, maxAuditName),
		ArgumentBytes: len(args),
	}
	if g.audit != nil {
		p := g.opts.Propagator
		if sc := trace.SpanContextFromContext(p.Extract(context.Background(), headerCarrier(header))); sc.HasTraceID() {
			a.rec.TraceID = sc.TraceID().String()
		}
	}
	return ctx, a
}

// endCall writes the call's audit line and counts it by the caller's
// namespace.
func (g *Gateway) endCall(a *callAudit, c *Caller, tool *spec.TableTool) {
	g.metrics.callerCalls.WithLabelValues(callerNamespace(c), a.rec.Decision).Inc()
	if g.audit == nil {
		return
	}
	a.rec.Time = a.start.UTC()
	a.rec.DurationMs = float64(time.Since(a.start).Microseconds()) / 1000
	a.rec.ResultBytes = a.info.resultBytes
	if tool != nil {
		a.rec.ToolSet = tool.ToolSet.String()
		if g.opts.AuditArguments {
			a.rec.Arguments = g.redactors.redact(tool, a.args)
			if len(a.rec.Arguments) > maxAuditArguments {
				a.rec.Arguments = json.RawMessage(fmt.Sprintf(`"[%d bytes, over the audit log's limit of %d]"`, len(a.rec.Arguments), maxAuditArguments))
			}
		}
	}
	g.audit.write(&a.rec)
}

// redactors keeps a [toolkit.Redactor] per tool schema, so that
// --audit-arguments compiles a schema once, not per call. It is bounded:
// past maxRedactors it starts again.
type redactors struct {
	mu sync.Mutex
	m  map[string]*toolkit.Redactor
}

const maxRedactors = 4096

func (r *redactors) redact(t *spec.TableTool, args json.RawMessage) json.RawMessage {
	key := t.Name + "\x00" + t.SchemaDigest
	if t.SchemaDigest == "" {
		key = t.Name + "\x00" + string(t.InputSchema)
	}
	r.mu.Lock()
	red, ok := r.m[key]
	r.mu.Unlock()
	if !ok {
		var err error
		if red, err = toolkit.NewRedactor(t.InputSchema); err != nil {
			red = nil // Redact of a nil Redactor redacts everything
		}
		r.mu.Lock()
		if r.m == nil || len(r.m) >= maxRedactors {
			r.m = map[string]*toolkit.Redactor{}
		}
		r.m[key] = red
		r.mu.Unlock()
	}
	return red.Redact(args)
}
