package tracing_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/tracing"
)

type in struct {
	N int `json:"n"`
}

func TestMiddleware(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	var reg toolkit.Registry
	_ = reg.Add(toolkit.MustNew("square", "", func(_ context.Context, in in) (int, error) {
		if in.N < 0 {
			return 0, errors.New("negative")
		}
		return in.N * in.N, nil
	}))
	reg.Use(tracing.Middleware(tracing.WithTracerProvider(tp)))

	ctx, parent := tp.Tracer("test").Start(context.Background(), "POST /tools/square")
	for _, args := range []string{`{"n":3}`, `{"n":-1}`, `{"n":"x"}`} {
		if _, err := reg.Call(ctx, "square", json.RawMessage(args)); err != nil {
			t.Fatal(err)
		}
	}
	parent.End()

	spans := rec.Ended()
	if len(spans) != 4 {
		t.Fatalf("got %d spans, want 3 calls and the parent", len(spans))
	}
	want := []struct {
		outcome string
		status  codes.Code
	}{{"ok", codes.Unset}, {"tool_error", codes.Error}, {"invalid_arguments", codes.Error}}
	for i, w := range want {
		s := spans[i]
		if s.Name() != "execute_tool square" {
			t.Errorf("span %d name %q", i, s.Name())
		}
		if s.Parent().SpanID() != parent.SpanContext().SpanID() || s.SpanContext().TraceID() != parent.SpanContext().TraceID() {
			t.Errorf("span %d is not a child of the caller's span", i)
		}
		attrs := map[string]string{}
		for _, kv := range s.Attributes() {
			attrs[string(kv.Key)] = kv.Value.AsString()
		}
		if attrs["gen_ai.tool.name"] != "square" || attrs["gen_ai.operation.name"] != "execute_tool" || attrs["toolkit.outcome"] != w.outcome {
			t.Errorf("span %d attributes %v, want outcome %s", i, attrs, w.outcome)
		}
		if s.Status().Code != w.status {
			t.Errorf("span %d status %v, want %v", i, s.Status(), w.status)
		}
	}
}
