//nolint:staticcheck // MCP's logging and sampling are deprecated in 2026-07-28 and still served: relaying them is the point here.
package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/toolkit/discovery"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// The relay carries what a backend says while one tools/call runs to the
// client that made the call, on that call's own response stream (the SDK
// answers with SSE when a handler notifies during the request):
//   - notifications/progress, when the client sent a progress token, under
//     the client's token;
//   - notifications/message, when the client asked for logs (a 2026-07-28
//     request's _meta logLevel, or logging/setLevel in a 2025 session);
//   - elicitation and sampling requests, when the client declared it can
//     answer them and can take a request (a 2025 session, or a 2026-07-28
//     client, to which a 2026-07-28 backend's input_required result passes
//     as it is).
//
// MCP servers are called over MCP already. A toolkit workload is called at
// its invoke endpoint, one POST and one JSON answer, unless the client
// asked for any of the above: then at its MCP endpoint, which toolkit
// serves beside invoke and where toolkit.Progress and toolkit.Log become
// notifications. A streaming form of invoke would be a second wire format
// for the same notifications, in every toolkit version and every agent that
// calls invoke; MCP already is that format, and the relay is then one code
// path for every backend.
//
// Every relayed message is bounded: at most Options.MaxNotificationsPerCall
// per call and Options.MaxNotificationBytes each (more, or larger, are
// dropped and counted); they are written as they arrive, on the SDK's
// goroutine for the backend's call, so the gateway holds no queue of its
// own, and a client that stops reading is dropped at Options.WriteTimeout,
// after which nothing more is relayed. The bytes read from the backend,
// notifications included, count against the call's MaxResultBytes and the
// results' memory budget, as its result does.

// Outcomes of a relayed notification, as the notifications metric counts
// them.
const (
	relayedOK       = "relayed"
	relayedTooMany  = "dropped_count" // past MaxNotificationsPerCall
	relayedTooLarge = "dropped_size"  // past MaxNotificationBytes
	relayedGone     = "dropped_client"
	relayedBackward = "dropped_backward" // progress that did not grow
	relayedLevel    = "dropped_level"    // a log at a level MCP does not have
	relayedToken    = "dropped_token"    // progress whose numbers show the ToolSet's token
)

type callRequestKey struct{}

// withCallRequest puts the client's tools/call request in ctx, for g.call.
func withCallRequest(ctx context.Context, req *mcp.CallToolRequest) context.Context {
	return context.WithValue(ctx, callRequestKey{}, req)
}

func callRequestFrom(ctx context.Context) *mcp.CallToolRequest {
	req, _ := ctx.Value(callRequestKey{}).(*mcp.CallToolRequest)
	return req
}

// relay is what one call relays, and how much of it so far.
type relay struct {
	g   *Gateway
	req *mcp.CallToolRequest
	// ctx is the request handler's: notifications sent with it go on the
	// request's stream.
	ctx context.Context

	token          any // the client's progress token; nil: none
	logLevel       mcp.LoggingLevel
	elicit, sample bool // the client can answer these
	modern         bool // the client speaks 2026-07-28

	mu       sync.Mutex
	sent     int
	last     float64
	progress bool // a progress notification was sent
	gone     bool // a write to the client failed
	// refused says why a backend's request could not reach the client: the
	// call then ends with an isError result that says so.
	refused string
	// park is the call's parked form, for a 2026-07-28 client that can
	// answer a 2025 backend's questions (relay_park.go).
	park *parkedCall
}

// newRelay returns the relay of the call whose context ctx is, or nil when
// the client asked for nothing that a backend could send.
func (g *Gateway) newRelay(ctx context.Context) *relay {
	req := callRequestFrom(ctx)
	if req == nil || req.Session == nil || req.Params == nil {
		return nil
	}
	r := &relay{g: g, req: req, ctx: ctx, token: req.Params.GetProgressToken()}
	ip := req.Session.InitializeParams()
	r.modern = ip == nil || ip.ProtocolVersion >= modernProtocol
	session := req.Session.ID() != ""
	if r.modern {
		if l, ok := req.Params.Meta[mcp.MetaKeyLogLevel].(string); ok && validLevel(l) {
			r.logLevel = mcp.LoggingLevel(l)
		}
	} else if session {
		r.logLevel = g.logLevelOf(req.Session)
	}
	// A 2025 client takes a request only in a session (a stateless answer
	// has no way back); a 2026-07-28 one gets input_required results.
	if ip != nil && ip.Capabilities != nil && (r.modern || session) {
		r.elicit = ip.Capabilities.Elicitation != nil
		r.sample = ip.Capabilities.Sampling != nil
	}
	if r.token == nil && r.logLevel == "" && !r.elicit && !r.sample {
		return nil
	}
	return r
}

type relayKey struct{}

func withRelay(ctx context.Context, r *relay) context.Context {
	if r == nil {
		return ctx
	}
	return context.WithValue(ctx, relayKey{}, r)
}

func relayFrom(ctx context.Context) *relay {
	r, _ := ctx.Value(relayKey{}).(*relay)
	return r
}

// mcpRoute is the MCP endpoint to call tool i of s at: an MCP server's,
// and a toolkit workload's when the client asked for progress or logs, or
// can answer the question of a tool that declares it asks (toolkit.Asks:
// the gateway calls it in the 2026-07-28 era, in which the question comes
// back as input_required); "" to call a toolkit workload's invoke
// endpoint, which costs the gateway 40% of the allocations and bytes of
// an MCP call (BenchmarkToolkitCallOfAClientThatCanAnswer), and where a
// tool that asks is told it cannot.
// Sampling alone does not: a toolkit tool does not sample.
func (r *relay) mcpRoute(s *snapshot, i int) string {
	tool := &s.table.Tools[i]
	if tool.IsMCP() {
		return s.routes[i]
	}
	asks := r != nil && r.elicit && tool.Meta[spec.MetaAsks] == true
	if r == nil || (r.token == nil && r.logLevel == "" && !asks) {
		return ""
	}
	u, err := mcpRoute(tool, s.clusterDomain)
	if err != nil {
		return ""
	}
	return u
}

// attach sets what c receives from the backend to what r relays.
func (r *relay) attach(c *discovery.MCPCaller) {
	// A 2026-07-28 backend's input_required is answered by the SDK's
	// client only where the relay can ask a 2025 client; otherwise it
	// comes back as it is: to pass on to a 2026-07-28 client, or for
	// settle to refuse clearly.
	c.KeepInputRequests = r == nil || r.modern || (!r.elicit && !r.sample)
	if r == nil {
		return
	}
	if r.token != nil {
		c.Progress = r.progressFromBackend
	}
	if r.logLevel != "" {
		c.Log, c.LogLevel = r.logFromBackend, r.logLevel
	}
	if r.elicit {
		c.Elicit = r.elicitFromBackend
	}
	if r.sample {
		c.Sample = r.sampleFromBackend
	}
}

// take counts one notification against the call's bounds, and reports
// whether it may be sent.
func (r *relay) take(kind string, size int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	outcome := relayedOK
	switch {
	case r.gone:
		outcome = relayedGone
	case size > r.g.opts.MaxNotificationBytes:
		outcome = relayedTooLarge
	case r.sent >= r.g.opts.MaxNotificationsPerCall:
		outcome = relayedTooMany
	}
	r.g.metrics.notifications.WithLabelValues(kind, outcome).Inc()
	if outcome != relayedOK {
		return false
	}
	r.sent++
	return true
}

// target is the client's request that r writes to now, with its context
// and progress token.
func (r *relay) target() (*mcp.CallToolRequest, context.Context, any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.req, r.ctx, r.token
}

// wrote notes the outcome of a write to the client.
func (r *relay) wrote(err error) {
	if err != nil {
		r.mu.Lock()
		r.gone = true
		r.mu.Unlock()
	}
}

func (r *relay) progressFromBackend(_ context.Context, p *mcp.ProgressNotificationParams) {
	r.mu.Lock()
	backward := r.progress && p.Progress <= r.last
	if !backward {
		r.last, r.progress = p.Progress, true
	}
	r.mu.Unlock()
	if backward {
		// MCP wants progress to grow; a backend whose does not would make
		// some clients fail the call.
		r.g.metrics.notifications.WithLabelValues("progress", relayedBackward).Inc()
		return
	}
	// Measured as it is sent: a short token redacted grows tenfold.
	if len(p.Message) > r.g.opts.MaxNotificationBytes {
		r.take("progress", len(p.Message)) // refused, and counted
		return
	}
	req, ctx, token := r.target()
	be := backendFrom(ctx)
	// A token of digits echoed as a number cannot be redacted from it:
	// the notification is withheld, as redactJSON withholds a value whose
	// bytes still hold the token outside any string.
	if be.inNumbers(p.Progress, p.Total) {
		r.g.metrics.notifications.WithLabelValues("progress", relayedToken).Inc()
		return
	}
	msg := be.redact(p.Message)
	if !r.take("progress", len(msg)) {
		return
	}
	r.wrote(req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
		ProgressToken: token, Progress: p.Progress, Total: p.Total, Message: msg,
	}))
}

func (r *relay) logFromBackend(_ context.Context, p *mcp.LoggingMessageParams) {
	data, err := json.Marshal(p.Data)
	if err != nil {
		return
	}
	// The session's Log applies the client's level: _meta's in 2026-07-28,
	// the session's in 2025.
	req, ctx, _ := r.target()
	// The ToolSet's token, which a workload may log, reaches no caller
	// (backend.redactResult); the notification is measured as it is sent.
	be := backendFrom(ctx)
	if len(data) > r.g.opts.MaxNotificationBytes {
		r.take("log", len(data)) // refused, and counted
		return
	}
	// The level is passed on as it came, so it must be one of MCP's: the
	// SDK takes any other for debug, and it is neither bounded nor
	// redacted as the data is.
	if !validLevel(string(p.Level)) {
		r.g.metrics.notifications.WithLabelValues("log", relayedLevel).Inc()
		return
	}
	red, ok := be.redactJSON(data, int64(r.g.opts.MaxNotificationBytes))
	if !ok {
		r.take("log", r.g.opts.MaxNotificationBytes+1) // refused, and counted
		return
	}
	logger := be.redact(p.Logger)
	if !r.take("log", len(red)+len(logger)) {
		return
	}
	r.wrote(req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: p.Level, Logger: logger, Data: json.RawMessage(red)}))
}

// errNotRelayed answers a backend's request that the gateway could not
// pass on; why is in the relay, for the call's result.
var errNotRelayed = errors.New("the gateway could not pass this request on to its client")

func (r *relay) refuse(why string) error {
	r.mu.Lock()
	if r.refused == "" {
		r.refused = why
	}
	r.mu.Unlock()
	return fmt.Errorf("%w: %s", errNotRelayed, why)
}

// redactAsk is p, a backend's question, with the ToolSet's token redacted
// from every string of it (backend.redactJSON): its message, its schema,
// its sampling messages. Nil if it is to be withheld.
func redactAsk[T any](be *backend, p *T, limit int) *T {
	raw, err := json.Marshal(p)
	if err != nil {
		return nil
	}
	red, ok := be.redactJSON(raw, int64(limit))
	if !ok {
		return nil
	}
	if len(red) == len(raw) && bytes.Equal(red, raw) {
		return p
	}
	var out T
	if json.Unmarshal(red, &out) != nil {
		return nil
	}
	return &out
}

// withheldAsk is why a backend's question does not reach the client.
const withheldAsk = "the tool's question carried its ToolSet's credentials, and the gateway withheld it"

func (r *relay) elicitFromBackend(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	// The question reaches the client, asked now or parked, without the
	// _meta keys that are not the workload's to set (askMeta), and without
	// the ToolSet's token.
	q := *p
	q.Meta = askMeta(p.Meta)
	_, rctx, _ := r.target()
	if p = redactAsk(backendFrom(rctx), &q, r.g.opts.MaxNotificationBytes); p == nil {
		return nil, r.refuse(withheldAsk)
	}
	if r.modern {
		// Only a 2025 backend asks during the call (a 2026-07-28 one's
		// input_required passes to the client as it is); a 2026-07-28
		// client takes no request during a call, and gets the question as
		// input_required from the parked call.
		if pc := r.parkOf(); pc != nil && r.take("elicitation", askSize(p)) {
			a, err := pc.ask(ctx, p)
			if err != nil {
				return nil, err
			}
			return a.(*mcp.ElicitResult), nil
		}
		return nil, r.refuse("the tool asked for user input during the call (a 2025-era elicitation), which the gateway cannot yet pass to a 2026-07-28 client: connect with protocol 2025-11-25 to a gateway with sessions")
	}
	if !r.take("elicitation", askSize(p)) {
		return nil, r.refuse("the tool asked for user input past the gateway's bounds")
	}
	// r.ctx routes the request to the client's stream; ctx ends with the
	// backend's.
	req, rctx, _ := r.target()
	ctx, stop := joined(rctx, ctx)
	defer stop()
	res, err := req.Session.Elicit(ctx, p)
	if err != nil {
		return nil, r.refuse("the tool asked for user input, and the client did not answer: " + clip(err.Error(), 256))
	}
	return res, nil
}

func (r *relay) sampleFromBackend(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	// As elicitFromBackend's question.
	q := *p
	q.Meta = askMeta(p.Meta)
	q.IncludeContext = noContext(q.IncludeContext)
	_, rctx, _ := r.target()
	if p = redactAsk(backendFrom(rctx), &q, r.g.opts.MaxNotificationBytes); p == nil {
		return nil, r.refuse(withheldAsk)
	}
	if r.modern {
		if pc := r.parkOf(); pc != nil && r.take("sampling", askSize(p)) {
			a, err := pc.ask(ctx, p)
			if err != nil {
				return nil, err
			}
			return a.(*mcp.CreateMessageResult), nil
		}
		return nil, r.refuse("the tool asked for sampling during the call (2025-era sampling/createMessage), which the gateway cannot yet pass to a 2026-07-28 client: connect with protocol 2025-11-25 to a gateway with sessions")
	}
	if !r.take("sampling", askSize(p)) {
		return nil, r.refuse("the tool asked for sampling past the gateway's bounds")
	}
	req, rctx, _ := r.target()
	ctx, stop := joined(rctx, ctx)
	defer stop()
	res, err := req.Session.CreateMessage(ctx, p)
	if err != nil {
		return nil, r.refuse("the tool asked for sampling, and the client did not answer: " + clip(err.Error(), 256))
	}
	return res, nil
}

// refusal says why a backend's request could not reach the client, or "".
func (r *relay) refusal() string {
	if r == nil {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refused
}

// settle is the call's result once the backend answered: an input_required
// result passes on only when the client can answer what it asks for.
func (r *relay) settle(res *mcp.CallToolResult) *mcp.CallToolResult {
	if res == nil || !res.NeedsInput() {
		return res
	}
	var elicit, sample bool
	if r != nil {
		elicit, sample = r.elicit, r.sample
	}
	for _, ir := range res.InputRequests {
		switch ir.(type) {
		case *mcp.ElicitParams:
			if !elicit {
				return errorResult("The tool asks the user for input (elicitation), and your client did not declare the elicitation capability (or, in the 2025 era, has no session at the gateway), so the gateway cannot pass the question on.")
			}
		case *mcp.CreateMessageParams, *mcp.CreateMessageWithToolsParams:
			if !sample {
				return errorResult("The tool asks for sampling, and your client did not declare the sampling capability (or, in the 2025 era, has no session at the gateway), so the gateway cannot pass the request on.")
			}
			// As sampleFromBackend's: no context but the prompt's.
			switch q := ir.(type) {
			case *mcp.CreateMessageParams:
				q.IncludeContext = noContext(q.IncludeContext)
			case *mcp.CreateMessageWithToolsParams:
				q.IncludeContext = noContext(q.IncludeContext)
			}
		default:
			return errorResult(fmt.Sprintf("the tool asks for input of a kind the gateway does not pass on (%T)", ir))
		}
	}
	return res
}

// callParams are the tools/call params sent to an MCP backend for the
// client's request: the arguments, a retry's inputResponses and
// requestState, and in _meta (2026-07-28, SEP-414) the trace context that
// the call's header out carries, which backendHeader built.
func callParams(ctx context.Context, name string, args json.RawMessage, out http.Header) *mcp.CallToolParams {
	p := &mcp.CallToolParams{Name: name, Arguments: args}
	for _, k := range traceMetaKeys {
		if v := out.Get(k); v != "" {
			if p.Meta == nil {
				p.Meta = mcp.Meta{}
			}
			p.Meta[k] = v
		}
	}
	if req := callRequestFrom(ctx); req != nil && req.Params != nil {
		p.InputResponses, p.RequestState = req.Params.InputResponses, req.Params.RequestState
	}
	return p
}

// traceMetaKeys are the W3C trace context keys a 2026-07-28 request
// carries in _meta (SEP-414): read there when the client's header has
// none, and passed on in the backend's header and, to MCP backends, _meta.
var traceMetaKeys = []string{"traceparent", "tracestate", "baggage"}

// maxTraceMetaBytes bounds a trace context value taken from _meta, as a
// header of the same would be by the server's header limit.
const maxTraceMetaBytes = 8 << 10

// traceHeader is the caller's header with the trace context of the
// request's _meta added where the header has none, so that the
// propagator (backendHeader) finds it either way.
func traceHeader(ctx context.Context, header http.Header) http.Header {
	req := callRequestFrom(ctx)
	if req == nil || req.Params == nil || len(req.Params.Meta) == 0 {
		return header
	}
	var out http.Header
	for _, k := range traceMetaKeys {
		v, ok := req.Params.Meta[k].(string)
		if !ok || v == "" || len(v) > maxTraceMetaBytes || header.Get(k) != "" {
			continue
		}
		if out == nil {
			out = header.Clone()
		}
		out.Set(k, v)
	}
	if out == nil {
		return header
	}
	return out
}

// stampResult sets the 2026-07-28 resultType of res for a client of that
// era: "complete", unless res is a backend's input_required, which passes
// as it is. The SDK sets it only on results of its own tool handlers, and
// keeps the field unexported; a result decoded from JSON carries it, so
// res takes it from one.
func stampResult(req *mcp.CallToolRequest, res *mcp.CallToolResult) *mcp.CallToolResult {
	if res == nil || res.NeedsInput() || req == nil || req.Session == nil {
		return res
	}
	if ip := req.Session.InitializeParams(); ip != nil && ip.ProtocolVersion < modernProtocol {
		return res
	}
	return stampComplete(res)
}

// stampComplete is stampResult for a request known to be of the
// 2026-07-28 era.
func stampComplete(res *mcp.CallToolResult) *mcp.CallToolResult {
	if res == nil || res.NeedsInput() {
		return res
	}
	out := completeStamp
	src, dst := reflect.ValueOf(res).Elem(), reflect.ValueOf(&out).Elem()
	for i := range src.NumField() {
		if dst.Field(i).CanSet() {
			dst.Field(i).Set(src.Field(i))
		}
	}
	return &out
}

// completeStamp is an empty result of resultType "complete".
var completeStamp = func() mcp.CallToolResult {
	var r mcp.CallToolResult
	if err := json.Unmarshal([]byte(`{"content":[],"resultType":"complete"}`), &r); err != nil {
		panic(err)
	}
	return r
}()

// validLevel reports whether l is an MCP logging level.
func validLevel(l string) bool {
	switch l {
	case "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency":
		return true
	}
	return false
}

// logLevels holds the level each 2025 session set with logging/setLevel,
// which the SDK keeps to itself, for the relay to ask backends at: a
// session that set none gets no logs, and backends are not asked for any.
type logLevels struct {
	m sync.Map // *mcp.ServerSession → mcp.LoggingLevel
}

// noteLogLevel records a session's logging/setLevel; the entry goes when
// the session ends.
func (g *Gateway) noteLogLevel(req *mcp.ServerRequest[*mcp.SetLoggingLevelParams]) {
	ss := req.Session
	if ss == nil || ss.ID() == "" || req.Params == nil || !validLevel(string(req.Params.Level)) {
		return
	}
	if _, loaded := g.logLevels.m.Swap(ss, req.Params.Level); !loaded {
		go func() {
			_ = ss.Wait()
			g.logLevels.m.Delete(ss)
		}()
	}
}

func (g *Gateway) logLevelOf(ss *mcp.ServerSession) mcp.LoggingLevel {
	l, _ := g.logLevels.m.Load(ss)
	level, _ := l.(mcp.LoggingLevel)
	return level
}

// joined is values's context, also cancelled when ctx is.
func joined(values, ctx context.Context) (context.Context, context.CancelFunc) {
	out, cancel := context.WithCancel(values)
	stop := context.AfterFunc(ctx, cancel)
	return out, func() { stop(); cancel() }
}

// askSize is the size of a backend's question, for the relay's bound.
func askSize(p any) int {
	b, err := json.Marshal(p)
	if err != nil {
		return int(^uint(0) >> 1)
	}
	return len(b)
}

// inNumbers reports whether any of xs, as JSON writes it, holds b's token,
// or is one JSON cannot write (NaN, an infinity), which the client's
// session could not send either.
func (b *backend) inNumbers(xs ...float64) bool {
	if b == nil || b.token == "" {
		return false
	}
	for _, x := range xs {
		raw, err := json.Marshal(x)
		if err != nil || strings.Contains(string(raw), b.token) {
			return true
		}
	}
	return false
}

// noContext is the includeContext of a sampling request the gateway passes
// on: none, or absent if it was. To its client the gateway is one server,
// whose context is what every tenant's tools said through it: a workload
// may not ask for that to go into a prompt whose answer comes back to the
// workload.
func noContext(includeContext string) string {
	if includeContext == "" {
		return ""
	}
	return "none"
}
