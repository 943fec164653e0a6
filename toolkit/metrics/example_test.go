package metrics_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/metrics"
)

func ExampleMiddleware() {
	promReg := prometheus.NewRegistry()
	mw, err := metrics.Middleware(promReg)
	if err != nil {
		panic(err)
	}
	var reg toolkit.Registry
	_ = reg.Add(toolkit.MustNew("echo", "Echoes.", func(_ context.Context, in struct {
		S string `json:"s"`
	}) (string, error) {
		return in.S, nil
	}))
	reg.Use(mw)
	_, _ = reg.Call(context.Background(), "echo", json.RawMessage(`{"s":"hi"}`))
	_, _ = reg.Call(context.Background(), "echo", json.RawMessage(`{"x":1}`))

	n, _ := testutil.GatherAndCount(promReg, "toolkit_tool_calls_total")
	fmt.Println(n, "series")
	// Output: 2 series
}
