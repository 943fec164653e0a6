package metrics_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/metrics"
)

type in struct {
	N int `json:"n"`
}

func TestMiddleware(t *testing.T) {
	promReg := prometheus.NewPedanticRegistry()
	mw, err := metrics.Middleware(promReg)
	if err != nil {
		t.Fatal(err)
	}
	var reg toolkit.Registry
	_ = reg.Add(toolkit.MustNew("square", "", func(_ context.Context, in in) (int, error) {
		if in.N < 0 {
			return 0, errors.New("negative")
		}
		return in.N * in.N, nil
	}))
	reg.Use(mw)
	for _, args := range []string{`{"n":3}`, `{"n":4}`, `{"n":-1}`, `{"n":"x"}`} {
		if _, err := reg.Call(context.Background(), "square", json.RawMessage(args)); err != nil {
			t.Fatal(err)
		}
	}
	want := `
# HELP toolkit_tool_calls_total Tool calls, by tool and outcome (ok, tool_error, invalid_arguments, panic, denied, timeout, busy).
# TYPE toolkit_tool_calls_total counter
toolkit_tool_calls_total{outcome="invalid_arguments",tool="square"} 1
toolkit_tool_calls_total{outcome="ok",tool="square"} 2
toolkit_tool_calls_total{outcome="tool_error",tool="square"} 1
`
	if err := testutil.GatherAndCompare(promReg, strings.NewReader(want), "toolkit_tool_calls_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(promReg, "toolkit_tool_call_duration_seconds"); n != 1 {
		t.Errorf("%d duration series, want 1", n)
	}

	// A second registry on the same registerer shares the metrics.
	mw2, err := metrics.Middleware(promReg)
	if err != nil {
		t.Fatalf("second Middleware: %v", err)
	}
	var reg2 toolkit.Registry
	_ = reg2.Add(toolkit.MustNew("square", "", func(_ context.Context, in in) (int, error) { return 0, nil }))
	reg2.Use(mw2)
	_, _ = reg2.Call(context.Background(), "square", json.RawMessage(`{"n":1}`))
	if got := testutil.ToFloat64(mustCounter(t, promReg)); got != 3 {
		t.Errorf("ok calls = %v, want 3", got)
	}
}

// mustCounter finds the ok counter of square through a fresh middleware,
// which returns the already registered vector.
func mustCounter(t *testing.T, reg *prometheus.Registry) prometheus.Collector {
	t.Helper()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolkit_tool_calls_total",
		Help: "Tool calls, by tool and outcome (ok, tool_error, invalid_arguments, panic, denied, timeout, busy).",
	}, []string{"tool", "outcome"})
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) {
		t.Fatalf("Register = %v", err)
	}
	return are.ExistingCollector.(*prometheus.CounterVec).WithLabelValues("square", "ok")
}
