package gateway

import (
	"context"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// tracerName is the instrumentation scope of the gateway's spans.
const tracerName = "github.com/toolplane/toolplane/internal/gateway"

// Attributes of the gateway's spans: OpenTelemetry's semantic conventions
// for MCP and generative AI, plus the gateway's own.
const (
	attrMCPMethod = attribute.Key("mcp.method.name")
	attrToolName  = attribute.Key("gen_ai.tool.name")
	attrOperation = attribute.Key("gen_ai.operation.name")
	attrToolSet   = attribute.Key("toolplane.toolset")
	attrOutcome   = attribute.Key("toolplane.outcome")
	attrView      = attribute.Key("toolplane.view")
	attrTools     = attribute.Key("toolplane.tools")
	attrServer    = attribute.Key("server.address")
)

// traceContext is ctx with the trace context the client sent: the
// request's header (traceparent, tracestate, baggage), and over it the
// _meta.traceparent (and tracestate) of the request's params, where the
// 2026-07-28 revision carries it; _meta's baggage where the header has
// none, if the propagator carries baggage.
func (g *Gateway) traceContext(ctx context.Context, header http.Header, meta map[string]any) context.Context {
	ctx = g.opts.Propagator.Extract(ctx, headerCarrier(header))
	if b, _ := meta["baggage"].(string); b != "" && len(b) <= maxTraceMetaBytes && header.Get("baggage") == "" {
		// A carrier of baggage alone: the trace context's part of the
		// propagator finds no traceparent in it, and leaves ctx's.
		ctx = g.opts.Propagator.Extract(ctx, propagation.MapCarrier{"baggage": b})
	}
	tp, _ := meta["traceparent"].(string)
	if tp == "" || len(tp) > 256 {
		return ctx
	}
	carrier := propagation.MapCarrier{"traceparent": tp}
	if ts, _ := meta["tracestate"].(string); ts != "" && len(ts) <= 512 {
		carrier["tracestate"] = ts
	}
	if c := (propagation.TraceContext{}).Extract(ctx, carrier); trace.SpanContextFromContext(c).IsValid() {
		return c
	}
	return ctx
}

// headerCarrier is [propagation.HeaderCarrier] with the W3C keys the
// propagators ask for (traceparent, tracestate, baggage, spelled lower
// case) looked up as http.Header stores them: http.Header canonicalizes a
// key into a new string on every lookup, which was three allocations of
// every call for the propagators' Extract of a header without a trace.
type headerCarrier http.Header

var _ propagation.ValuesGetter = headerCarrier{}

// headerKey is key as http.Header stores it, without a copy for the keys
// the propagators ask for; any other is canonicalized by http.Header, as
// before.
func headerKey(key string) string {
	switch key {
	case "traceparent":
		return "Traceparent"
	case "tracestate":
		return "Tracestate"
	case "baggage":
		return "Baggage"
	}
	return key
}

func (c headerCarrier) Get(key string) string { return http.Header(c).Get(headerKey(key)) }

func (c headerCarrier) Values(key string) []string { return http.Header(c).Values(headerKey(key)) }

func (c headerCarrier) Set(key, value string) { http.Header(c).Set(headerKey(key), value) }

func (c headerCarrier) Keys() []string { return propagation.HeaderCarrier(c).Keys() }

// startSpan starts one of the gateway's spans.
func (g *Gateway) startSpan(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if g.noSpans {
		return ctx, noSpan
	}
	return g.tracer.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}

// noSpan is the span of every call when the gateway records none
// (Gateway.noSpans): its context stays the caller's, which the workload's
// request carries on, as a no-op tracer's span would.
var noSpan trace.Span = noop.Span{}

// endSpan ends span with outcome, as status Error when it is a failure of
// the gateway's or the workload's (a tool's own isError is not: the
// workload's span says so).
func endSpan(span trace.Span, outcome, detail string) {
	if outcome != "" {
		span.SetAttributes(attrOutcome.String(outcome))
	}
	switch outcome {
	case "", outcomeOK, outcomeToolError:
	default:
		span.SetStatus(codes.Error, clip(detail, 512))
	}
	span.End()
}

// serverSpan starts the span of one MCP request the gateway answers itself
// (tools/list, tools/call of name), parented to the client's trace, and
// returns the function that ends it with the request's result.
func (g *Gateway) serverSpan(ctx context.Context, req mcp.Request, method, name string) (context.Context, func(mcp.Result, error)) {
	header, _ := extraOf(req)
	var meta map[string]any
	if p := req.GetParams(); p != nil && !isNilParams(p) {
		meta = p.GetMeta()
	}
	ctx = g.traceContext(ctx, header, meta)
	if g.noSpans {
		return ctx, func(mcp.Result, error) {}
	}
	spanName := method
	attrs := []attribute.KeyValue{attrMCPMethod.String(method), attrView.String(viewFrom(header).String())}
	if name != "" {
		name = clip(name, 128)
		spanName += " " + name
		attrs = append(attrs, attrToolName.String(name), attrOperation.String("execute_tool"))
	}
	ctx, span := g.startSpan(ctx, spanName, trace.SpanKindServer, attrs...)
	return ctx, func(res mcp.Result, err error) {
		switch r := res.(type) {
		case *mcp.CallToolResult:
			if err == nil && r != nil && r.IsError {
				// The gateway answered; the detail is the result's text,
				// which the workload's own span has too.
				span.SetAttributes(attrOutcome.String(outcomeToolError))
			}
		case *mcp.ListToolsResult:
			if r != nil {
				span.SetAttributes(attrTools.Int(len(r.Tools)))
			}
		}
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, clip(err.Error(), 512))
		}
		span.End()
	}
}

// isNilParams reports whether p is a typed nil, as a request without
// params carries.
func isNilParams(p mcp.Params) bool {
	switch v := p.(type) {
	case *mcp.CallToolParamsRaw:
		return v == nil
	case *mcp.ListToolsParams:
		return v == nil
	}
	return false
}

// authorizeSpan starts the span of one authorization of n tools, and
// returns the function that ends it with how many were decided.
func (g *Gateway) authorizeSpan(ctx context.Context, n int) (context.Context, func(decided int, err error)) {
	ctx, span := g.startSpan(ctx, "authorize", trace.SpanKindInternal, attrTools.Int(n))
	return ctx, func(decided int, err error) {
		span.SetAttributes(attribute.Int("toolplane.decided", decided))
		if err != nil {
			span.SetStatus(codes.Error, clip(err.Error(), 512))
		}
		span.End()
	}
}
