package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolplane/toolplane/toolkit/discovery"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// Outcomes of a call, as the calls metric counts them.
const (
	outcomeOK          = "ok"          // the workload answered; its result holds no error
	outcomeToolError   = "tool_error"  // the workload answered with isError
	outcomeUnreachable = "unreachable" // no connection, or it broke
	outcomeTimeout     = "timeout"     // no full answer within the call timeout
	outcomeBusy        = "busy"        // no free call slot within the call timeout
	outcomeBadReply    = "bad_reply"   // a non-200 status, or a reply that is not a result
	outcomeUnknown     = "unknown"     // no such tool (in this view)
	outcomeDenied      = "denied"      // the caller may not call it
	outcomeAuthError   = "auth_error"  // authorization could not be decided
)

// maxErrorBodyBytes bounds how much of a non-200 reply is read.
const maxErrorBodyBytes = 4 << 10

// call calls tool i of s at its workload's invoke endpoint with args as
// sent, and returns the workload's result unchanged but for the _meta keys
// that are not its to set (dropReservedMeta), or an isError result
// that names the tool and its owner when there is none. Arguments are sent
// as the client sent them, sloppy or not: the workload's binder repairs
// what can be repaired. Of the caller's header only the trace context goes
// on; its Authorization never does. c is the authenticated caller, nil
// without auth.
func (g *Gateway) call(ctx context.Context, c *Caller, s *snapshot, i int, args json.RawMessage, header http.Header) *mcp.CallToolResult {
	tool := &s.table.Tools[i]
	start := time.Now()
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, g.opts.CallTimeout)
	defer cancel()
	var res *mcp.CallToolResult
	// be is how this call reaches its ToolSet (backend.go), nil when its
	// circuit is open or its credentials cannot be had.
	be, outcome, detail := g.route(ctx, tool, s.routes[i])
	if be != nil {
		ctx = withBackend(ctx, be)
		span := noSpan
		if !g.noSpans {
			ctx, span = g.startSpan(ctx, "call "+tool.Name, trace.SpanKindClient,
				attrToolName.String(tool.Name), attrToolSet.String(tool.ToolSet.String()), attrServer.String(hostOf(s.routes[i])))
		}
		out := g.backendHeader(ctx, c, tool, header)
		// What the backend says while the call runs goes to the client
		// (relay.go): over MCP, for a toolkit workload too.
		rl := g.newRelay(ctx)
		ctx = withRelay(ctx, rl)
		switch route := rl.mcpRoute(s, i); {
		case taskCreateFrom(ctx) != nil: // a task-augmented call (tasks.go)
			res, outcome, detail = g.createTask(ctx, taskCreateFrom(ctx), s, i, args, header, out)
		case route != "" && rl.parks():
			res, outcome, detail = g.parkable(ctx, c, route, tool.SourceName, args, header, out)
		case route != "":
			res, outcome, detail = g.mcpRoundTrip(ctx, route, tool.SourceName, args, header, out)
		default:
			res, outcome, detail = g.roundTrip(ctx, s.routes[i], args, header, out)
		}
		outcome, detail = be.refused(outcome, detail)
		detail, res = be.redact(detail), dropReservedMeta(be.redactResult(res, g.opts.MaxResultBytes))
		g.circuits.record(tool.ToolSet, be.probe, callResult(parent, outcome))
		endSpan(span, outcome, detail)
	}
	elapsed := time.Since(start)
	if ci := callInfoFrom(ctx); ci != nil {
		ci.outcome = outcome
	}
	g.countCall(s, i, outcome)
	g.metrics.duration.WithLabelValues(outcome).Observe(elapsed.Seconds())
	if res == nil {
		// A call failed fast by an open circuit is logged as the circuit
		// opens, not once per call.
		level := slog.LevelWarn
		if outcome == outcomeCircuitOpen {
			level = slog.LevelDebug
		}
		g.logger.Log(ctx, level, "A tool call failed at the gateway", "tool", tool.Name, "toolSet", tool.ToolSet.String(),
			"outcome", outcome, "error", detail, "duration", elapsed, "requestId", requestIDFrom(ctx))
		return errorResult(fmt.Sprintf("The tool %s (ToolSet %s) could not be called: %s", tool.Name, tool.ToolSet, detail))
	}
	if g.logger.Enabled(ctx, slog.LevelDebug) {
		g.logger.Debug("Called a tool", "tool", tool.Name, "toolSet", tool.ToolSet.String(), "outcome", outcome, "duration", elapsed)
	}
	return res
}

// countCall counts a call of tool i of s with outcome. A call that
// outlived its table counts with its tool's counts in the table served
// now, if the tool is there: it may have left and come back meanwhile,
// with counts of its own again.
func (g *Gateway) countCall(s *snapshot, i int, outcome string) {
	if cur := g.snap.Load(); cur != nil && cur != s {
		if j, ok := cur.byName[s.table.Tools[i].Name]; ok {
			s, i = cur, j
		}
	}
	var tc *toolCalls
	if i < len(s.calls) {
		tc = s.calls[i]
	}
	g.metrics.calls.inc(tc, s.table.Tools[i].Name, outcome)
}

// callSlot is a call slot that acquire took, with its place in its
// namespace's share; release gives both back, once. The zero callSlot
// holds none. It is a value, not a closure: a call's slot cost three
// allocations.
type callSlot struct {
	slots chan struct{}
	share *callShare
}

func (s callSlot) held() bool { return s.slots != nil }

func (s callSlot) release() {
	<-s.slots
	s.share.release()
}

// acquire takes a call slot within ctx; if it cannot, it says why as an
// outcome and a detail.
func (g *Gateway) acquire(ctx context.Context) (slot callSlot, outcome, detail string) {
	// First the call's namespace's share of the slots (call_share.go).
	mine, outcome, detail := g.acquireShare(ctx)
	if outcome != "" {
		return callSlot{}, outcome, detail
	}
	select {
	case g.slots <- struct{}{}:
		return callSlot{slots: g.slots, share: mine}, "", ""
	case <-ctx.Done():
		mine.release()
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return callSlot{}, outcomeBusy, fmt.Sprintf("the gateway stayed at its limit of %d concurrent calls for the call timeout of %s", cap(g.slots), g.opts.CallTimeout)
		}
		return callSlot{}, outcomeUnreachable, "the call was cancelled"
	}
}

// backendHeader is the header a call to tool's workload carries, built
// from the caller's header and identity: the caller's trace context, which
// parents the workload's spans, and, under auth with Options.TxnTokens, a
// transaction token naming c (txntoken.go); nothing else of the caller's
// header (never its Authorization, nor a Txn-Token of its own).
func (g *Gateway) backendHeader(ctx context.Context, c *Caller, tool *spec.TableTool, header http.Header) http.Header {
	out := http.Header{}
	p := g.opts.Propagator
	// The gateway's span of the call parents the workload's; without one
	// (no trace anywhere) the caller's header passes on as it came.
	if !trace.SpanContextFromContext(ctx).IsValid() {
		ctx = p.Extract(ctx, headerCarrier(traceHeader(ctx, header)))
	}
	p.Inject(ctx, headerCarrier(out))
	// The ToolSet's own token (never the caller's), which route has
	// checked goes over https to the ToolSet's endpoint only.
	if b := backendFrom(ctx); b != nil && b.token != "" {
		out.Set("Authorization", "Bearer "+b.token)
	}
	if g.opts.Auth != nil && c != nil && g.opts.TxnTokens != nil {
		g.addTxnToken(ctx, out, c, tool)
	}
	return out
}

// roundTrip posts args to url with the header out and reads the result.
// header is the caller's, for its answer's memory ledger. It returns nil,
// the outcome and why when there is no result to pass on.
func (g *Gateway) roundTrip(ctx context.Context, url string, args json.RawMessage, header, out http.Header) (*mcp.CallToolResult, string, string) {
	slot, outcome, detail := g.acquire(ctx)
	if !slot.held() {
		return nil, outcome, detail
	}
	defer slot.release()
	if len(bytes.TrimSpace(args)) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(args))
	if err != nil {
		return nil, outcomeUnreachable, err.Error()
	}
	for k, v := range out {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")

	resp, err := clientFor(ctx, g.client).Do(req)
	if err != nil {
		return g.failure(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBodyBytes))
		return nil, outcomeBadReply, "the workload answered " + statusDetail(backendFrom(ctx), resp.StatusCode, b)
	}
	// The reply is held within the budget of every call's replies, not
	// only the per-call limit: 256 calls of 4 MiB each would be a gigabyte.
	b, held, err := g.results.read(ctx, io.LimitReader(resp.Body, g.opts.MaxResultBytes+1), resp.ContentLength, g.opts.MaxResultBytes)
	defer func() { g.results.release(held) }()
	if errors.Is(err, errBudget) {
		g.metrics.refused.WithLabelValues(refusedResultMemory).Inc()
		return nil, outcomeBusy, fmt.Sprintf("the gateway's budget of %d bytes for the results of calls in flight is spent; retry", g.opts.MaxResultMemory)
	}
	if err != nil {
		return g.failure(ctx, err)
	}
	if ci := callInfoFrom(ctx); ci != nil {
		ci.resultBytes = int64(len(b))
	}
	if int64(len(b)) > g.opts.MaxResultBytes {
		return nil, outcomeBadReply, fmt.Sprintf("the workload's result is over the gateway's limit of %d bytes", g.opts.MaxResultBytes)
	}
	res, err := decodeResult(b)
	if err != nil {
		return nil, outcomeBadReply, "the workload's reply is not a tool result: " + err.Error()
	}
	if l := g.ledgerOf(header); l != nil {
		// Charged until the answer is written, not only until it is decoded.
		l.add(held)
		held = 0
	}
	if res.IsError {
		return res, outcomeToolError, ""
	}
	return res, outcomeOK, ""
}

// mcpRoundTrip calls the tool name of an MCP server that toolkit did not
// write, at its MCP endpoint url, with tools/call through the Go SDK client:
// the server's own protocol era, with a session for the call where the
// server keeps sessions, and the header out. The result passes on as the
// SDK decodes it, every content type included.
func (g *Gateway) mcpRoundTrip(ctx context.Context, url, name string, args json.RawMessage, header, out http.Header) (*mcp.CallToolResult, string, string) {
	slot, outcome, detail := g.acquire(ctx)
	if !slot.held() {
		return nil, outcome, detail
	}
	defer slot.release()
	// The replies are charged to the results' budget as the SDK reads them,
	// and stay charged until the caller's answer is written.
	client := clientFor(ctx, g.client)
	mt := &meteredTransport{base: client.Transport, b: g.results}
	defer func() {
		if ci := callInfoFrom(ctx); ci != nil {
			ci.resultBytes = mt.bytesRead()
		}
		held, _ := mt.take()
		if l := g.ledgerOf(header); l != nil {
			l.add(held)
		} else {
			g.results.release(held)
		}
	}()
	hc := *client
	hc.Transport = mt
	caller := discovery.MCPCaller{HTTPClient: &hc, Header: out, MaxResponseBytes: g.opts.MaxResultBytes}
	rl := relayFrom(ctx)
	rl.attach(&caller)
	res, err := caller.CallTool(ctx, url, callParams(ctx, name, args, out))
	if why := rl.refusal(); why != "" {
		return errorResult(why), outcomeToolError, ""
	}
	if err == nil {
		res = rl.settle(res)
	}
	if err != nil && mt.wasSpent() {
		g.metrics.refused.WithLabelValues(refusedResultMemory).Inc()
		return nil, outcomeBusy, fmt.Sprintf("the gateway's budget of %d bytes for the results of calls in flight is spent; retry", g.opts.MaxResultMemory)
	}
	switch {
	case errors.Is(err, discovery.ErrResponseTooLarge):
		return nil, outcomeBadReply, fmt.Sprintf("the workload's result is over the gateway's limit of %d bytes", g.opts.MaxResultBytes)
	case errors.Is(err, discovery.ErrRedirect):
		return nil, outcomeBadReply, "the workload answered with a redirect, which the gateway does not follow"
	case err != nil && ctx.Err() != nil:
		return g.failure(ctx, err)
	case err != nil:
		// The SDK wraps a failed connection in a JSON-RPC error too: the
		// network error decides first.
		var netErr *net.OpError
		var rpcErr *jsonrpc.Error
		if !errors.As(err, &netErr) && errors.As(err, &rpcErr) {
			return nil, outcomeBadReply, "the MCP server answered with an error: " + backendFrom(ctx).clipRedacted(err.Error(), 512)
		}
		return nil, outcomeUnreachable, "the MCP server is unreachable: " + backendFrom(ctx).clipRedacted(err.Error(), 512)
	case res.IsError:
		return res, outcomeToolError, ""
	}
	return res, outcomeOK, ""
}

func (g *Gateway) failure(ctx context.Context, err error) (*mcp.CallToolResult, string, string) {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return nil, outcomeTimeout, fmt.Sprintf("the workload did not answer within the gateway's call timeout of %s", g.opts.CallTimeout)
	}
	if ctx.Err() != nil {
		return nil, outcomeUnreachable, "the call was cancelled"
	}
	return nil, outcomeUnreachable, "the workload is unreachable: " + err.Error()
}

// decodeResult reads a CallToolResult as the workload sent it. The SDK's
// decoding keeps every content type; structuredContent is kept as raw JSON,
// so that numbers pass through exactly. The common result of a toolkit
// workload, text content only, is read by decodeTextResult without the
// SDK's decoder, whose every use costs a 32 KiB buffer; anything else
// takes the SDK's.
func decodeResult(b []byte) (*mcp.CallToolResult, error) {
	if res := decodeTextResult(b); res != nil {
		return res, nil
	}
	return decodeAnyResult(b)
}

// decodeAnyResult is decodeResult with the SDK's decoder.
func decodeAnyResult(b []byte) (*mcp.CallToolResult, error) {
	var res mcp.CallToolResult
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, err
	}
	if res.Content == nil {
		return nil, errors.New("no content")
	}
	if res.StructuredContent != nil {
		// The member as sent, so that its numbers pass on exact, found
		// as the SDK found it.
		if raw := discovery.RawStructuredContent(b); raw != nil {
			res.StructuredContent = raw
		}
	}
	return &res, nil
}

// decodeTextResult reads b as a result of the members content (of text
// blocks that have only type and text), structuredContent, isError and
// _meta, spelled exactly so, as the SDK reads them; it returns nil for any
// other result, or one that does not decode, for the SDK to decide. It
// reads with objectMembers, so a result with a key twice or invalid UTF-8
// goes to the SDK as well.
func decodeTextResult(b []byte) *mcp.CallToolResult {
	// Nested past the SDK's bound, or a number a float64 cannot hold:
	// the SDK refuses the result, so the fast path must not pass it on.
	if bytes.Count(b, []byte{'{'})+bytes.Count(b, []byte{'['}) > sdkMaxDepth {
		return nil
	}
	var known [4]member
	members, ok := objectMembers(b, known[:0])
	if !ok {
		return nil
	}
	var res mcp.CallToolResult
	for _, m := range members {
		switch string(m.key) {
		case "content":
			content, ok := textBlocks(m.value)
			if !ok {
				return nil
			}
			res.Content = content
		case "structuredContent":
			if !floatNumbers(m.value) {
				return nil
			}
			if string(m.value) != "null" {
				res.StructuredContent = m.value
			}
		case "isError":
			// Every toolkit result has one: read its two literals as
			// they are, anything else as the SDK's decoder does.
			switch string(m.value) {
			case "false":
			case "true":
				res.IsError = true
			default:
				if json.Unmarshal(m.value, &res.IsError) != nil {
					return nil
				}
			}
		case "_meta":
			if json.Unmarshal(m.value, &res.Meta) != nil {
				return nil
			}
		default:
			return nil
		}
	}
	if res.Content == nil {
		return nil
	}
	return &res
}

// floatNumbers reports whether every number in the JSON value raw is one a
// float64 holds, as the SDK's decoder requires of structuredContent (it
// refuses 1e400, where the raw bytes would pass it on).
func floatNumbers(raw []byte) bool {
	mr := readerOf(raw)
	defer mr.release()
	dec := mr.dec
	for {
		switch dec.PeekKind() {
		case '0':
			v, err := dec.ReadValue()
			if err != nil {
				return false
			}
			// Only an exponent or a long run of digits can leave a
			// float64.
			if len(v) > 15 || bytes.ContainsAny(v, "eE") {
				if _, err := strconv.ParseFloat(string(v), 64); err != nil {
					return false
				}
			}
		case 0: // the end, or an error
			_, err := dec.ReadToken()
			return errors.Is(err, io.EOF)
		default:
			if _, err := dec.ReadToken(); err != nil {
				return false
			}
		}
	}
}

// textBlocks reads raw as an array of text blocks of exactly the members
// type ("text") and text; ok is false for anything else.
func textBlocks(raw []byte) ([]mcp.Content, bool) {
	mr := readerOf(raw)
	defer mr.release()
	dec := mr.dec
	if t, err := dec.ReadToken(); err != nil || t.Kind() != '[' {
		return nil, false
	}
	content := []mcp.Content{}
	for dec.PeekKind() == '{' {
		blk, err := dec.ReadValue()
		if err != nil {
			return nil, false
		}
		var known [2]member
		members, ok := objectMembers(blk, known[:0])
		if !ok || len(members) != 2 {
			return nil, false
		}
		var typed, text bool
		tc := &mcp.TextContent{}
		for _, m := range members {
			switch string(m.key) {
			case "type":
				typed = string(m.value) == `"text"`
			case "text":
				if m.value[0] != '"' {
					return nil, false
				}
				s, err := jsontext.AppendUnquote(nil, m.value)
				if err != nil {
					return nil, false
				}
				tc.Text, text = string(s), true
			}
		}
		if !typed || !text {
			return nil, false
		}
		content = append(content, tc)
	}
	if t, err := dec.ReadToken(); err != nil || t.Kind() != ']' {
		return nil, false
	}
	return content, true
}

// statusDetail says what a workload's error reply said, its message clipped
// and be's token redacted before the cut.
func statusDetail(be *backend, status int, body []byte) string {
	var er spec.ErrorResponse
	if err := json.Unmarshal(body, &er); err == nil && er.Error.Code != "" {
		return fmt.Sprintf("%d %s: %s", status, be.redact(er.Error.Code), be.clipRedacted(er.Error.Message, 512))
	}
	return fmt.Sprintf("%d %s", status, http.StatusText(status))
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

func errorResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}
