package tracing

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// ScopeName is the instrumentation scope of the spans.
const ScopeName = "github.com/toolplane/toolplane/toolkit/tracing"

// Attribute keys, from OpenTelemetry's semantic conventions for generative
// AI (execute_tool spans), plus toolkit's outcome.
const (
	KeyOperationName = attribute.Key("gen_ai.operation.name")
	KeyToolName      = attribute.Key("gen_ai.tool.name")
	KeyToolType      = attribute.Key("gen_ai.tool.type")
	KeyOutcome       = attribute.Key("toolkit.outcome")
)

// Option configures [Middleware].
type Option func(*config)

type config struct {
	provider trace.TracerProvider
}

// WithTracerProvider sets the tracer provider; the default is the global
// one (otel.GetTracerProvider), looked up when Middleware is called.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.provider = tp }
}

// Middleware records one span per call, named "execute_tool {tool}", with
// the tool's name and the call's outcome (see [toolkit.Outcome]). A call
// that fails, or returns a result with IsError set, ends its span with
// status Error; the error's message is recorded with sensitive values
// scrubbed ([toolkit.Request.Redact]), the arguments are not, since they
// may hold personal data.
func Middleware(opts ...Option) toolkit.Middleware {
	c := config{}
	for _, o := range opts {
		o(&c)
	}
	if c.provider == nil {
		c.provider = otel.GetTracerProvider()
	}
	tracer := c.provider.Tracer(ScopeName)
	return func(next toolkit.CallHandler) toolkit.CallHandler {
		return func(ctx context.Context, req *toolkit.Request) (*spec.CallResult, error) {
			name := req.Tool.Name()
			ctx, span := tracer.Start(ctx, "execute_tool "+name,
				trace.WithSpanKind(trace.SpanKindInternal),
				trace.WithAttributes(
					KeyOperationName.String("execute_tool"),
					KeyToolName.String(name),
					KeyToolType.String("function"),
				))
			defer span.End()
			res, err := next(ctx, req)
			span.SetAttributes(KeyOutcome.String(toolkit.Outcome(res, err)))
			switch {
			case err != nil:
				msg := req.Redact(err.Error())
				span.RecordError(errors.New(msg))
				span.SetStatus(codes.Error, msg)
			case res != nil && res.IsError:
				span.SetStatus(codes.Error, req.Redact(res.Text()))
			}
			return res, err
		}
	}
}
