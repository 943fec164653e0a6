package tracing_test

import (
	"context"
	"encoding/json"
	"fmt"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/tracing"
)

func ExampleMiddleware() {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))

	var reg toolkit.Registry
	_ = reg.Add(toolkit.MustNew("echo", "Echoes.", func(_ context.Context, in struct {
		S string `json:"s"`
	}) (string, error) {
		return in.S, nil
	}))
	reg.Use(tracing.Middleware(tracing.WithTracerProvider(tp)))
	_, _ = reg.Call(context.Background(), "echo", json.RawMessage(`{"s":"hi"}`))

	for _, s := range rec.Ended() {
		fmt.Println(s.Name())
	}
	// Output: execute_tool echo
}
