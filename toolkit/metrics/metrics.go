package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// Middleware registers the metrics with reg (prometheus.DefaultRegisterer
// when nil) and returns middleware that records every call. Calling it
// again with the same registerer, say for a second registry, reuses the
// metrics already registered.
func Middleware(reg prometheus.Registerer) (toolkit.Middleware, error) {
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	calls := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolkit_tool_calls_total",
		Help: "Tool calls, by tool and outcome (ok, tool_error, invalid_arguments, panic, denied, timeout, busy).",
	}, []string{"tool", "outcome"})
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "toolkit_tool_call_duration_seconds",
		Help:    "Duration of tool calls, binding included, by tool.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10), // 0.5ms to ~131s
	}, []string{"tool"})
	var err error
	if calls, err = register(reg, calls); err != nil {
		return nil, err
	}
	if duration, err = register(reg, duration); err != nil {
		return nil, err
	}
	return func(next toolkit.CallHandler) toolkit.CallHandler {
		return func(ctx context.Context, req *toolkit.Request) (*spec.CallResult, error) {
			start := time.Now()
			res, err := next(ctx, req)
			name := req.Tool.Name()
			duration.WithLabelValues(name).Observe(time.Since(start).Seconds())
			calls.WithLabelValues(name, toolkit.Outcome(res, err)).Inc()
			return res, err
		}
	}, nil
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}
