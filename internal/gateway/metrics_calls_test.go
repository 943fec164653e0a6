package gateway_test

import (
	"context"
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit"
)

// callsCounted is toolplane_gateway_calls_total of reg: the value of
// each series by tool and outcome.
func callsCounted(t *testing.T, reg *prometheus.Registry) map[[2]string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[[2]string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "toolplane_gateway_calls_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var key [2]string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "tool":
					key[0] = l.GetValue()
				case "outcome":
					key[1] = l.GetValue()
				}
			}
			out[key] = m.GetCounter().GetValue()
		}
	}
	return out
}

// The calls counter counts each call under its own tool and outcome, in
// both eras, and still does after a new table moves every tool's place in
// it: the counter of a tool's successful calls is kept with the table it
// was found in (Gateway.countCall), not by the tool's index.
func TestCallsAreCountedByToolAcrossTables(t *testing.T) {
	fail := toolkit.MustNew("fail", "Fails", func(context.Context, echoIn) (string, error) {
		return "", errors.New("failed as asked")
	})
	crm := newWorkload(t, "crm", "crm-tools", "crm_", echoTool("crm"), fail)
	first := newWorkload(t, "aaa", "aaa-tools", "aaa_", echoTool("aaa"))
	reg := prometheus.NewRegistry()
	g, url := newGateway(t, new(routes).add(crm, first), gateway.Options{Registerer: reg})
	if err := g.SetTable(table(crm.tableTools())); err != nil {
		t.Fatal(err)
	}
	call := func(cs *mcp.ClientSession, name string, n int) {
		t.Helper()
		for range n {
			if _, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: name, Arguments: map[string]any{"text": "x"}}); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
	}
	sessions := make([]*mcp.ClientSession, len(eras))
	for i, era := range eras {
		sessions[i] = connect(t, url+"/mcp", era, nil, nil)
	}
	for _, cs := range sessions {
		call(cs, "crm_echo", 3)
		call(cs, "crm_fail", 1)
	}
	// aaa_echo sorts first: crm_echo and crm_fail move one place down.
	if err := g.SetTable(table(crm.tableTools(), first.tableTools())); err != nil {
		t.Fatal(err)
	}
	for _, cs := range sessions {
		call(cs, "crm_echo", 1)
		call(cs, "aaa_echo", 2)
	}
	got := callsCounted(t, reg)
	want := map[[2]string]float64{
		{"crm_echo", "ok"}:         8,
		{"crm_fail", "tool_error"}: 2,
		{"aaa_echo", "ok"}:         4,
	}
	if len(got) != len(want) {
		t.Errorf("calls counted %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("calls of %s with outcome %s: %v, want %v (all: %v)", k[0], k[1], got[k], n, got)
		}
	}

	// A call of a name the table does not hold counts under tool="";
	// a tool that leaves the table leaves the metric, and one that stays
	// keeps its counts.
	if _, err := sessions[0].CallTool(bounded(t), &mcp.CallToolParams{Name: "no_such_tool", Arguments: map[string]any{}}); err == nil {
		t.Fatal("a call of an unknown tool did not fail")
	}
	if err := g.SetTable(table(first.tableTools())); err != nil {
		t.Fatal(err)
	}
	got = callsCounted(t, reg)
	want = map[[2]string]float64{
		{"aaa_echo", "ok"}: 4,
		{"", "unknown"}:    1,
	}
	if len(got) != len(want) || got[[2]string{"aaa_echo", "ok"}] != 4 || got[[2]string{"", "unknown"}] != 1 {
		t.Errorf("after crm's tools left the table: calls counted %v, want %v", got, want)
	}
}
