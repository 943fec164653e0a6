package gateway

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkCallCounterMemory is what toolplane_gateway_calls_total holds
// once each of 10,000 tools has been called with outcomes ok and denied
// (as a replica that served make bench-gateway, and then a caller that
// named every tool it may not call): the heap it keeps (B/tool) and the
// objects the collector marks (objects/tool), for a CounterVec (the
// baseline, the gateway's before) and for callCounter:
//
//	go test -run '^$' -bench BenchmarkCallCounterMemory ./internal/gateway/
func BenchmarkCallCounterMemory(b *testing.B) {
	const tools = 10_000
	names := make([]string, tools)
	for i := range names {
		names[i] = fmt.Sprintf("team%02d_lookup_records_%05d", i%50, i)
	}
	outcomes := []string{outcomeOK, outcomeDenied}
	for _, tc := range []struct {
		name  string
		count func() any
	}{
		{"countervec", func() any {
			v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolplane_gateway_calls_total", Help: "h"}, []string{"tool", "outcome"})
			for _, n := range names {
				for _, o := range outcomes {
					v.WithLabelValues(n, o).Inc()
				}
			}
			return v
		}},
		{"callcounter", func() any {
			c := newCallCounter()
			counts := c.setTable(names)
			for i, n := range names {
				for _, o := range outcomes {
					c.inc(counts[i], n, o)
				}
			}
			return c
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var bytes, objects float64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				kept := tc.count()
				runtime.GC()
				runtime.ReadMemStats(&after)
				runtime.KeepAlive(kept)
				bytes += float64(after.HeapAlloc) - float64(before.HeapAlloc)
				objects += float64(after.HeapObjects) - float64(before.HeapObjects)
			}
			b.ReportMetric(bytes/float64(b.N)/tools, "B/tool")
			b.ReportMetric(objects/float64(b.N)/tools, "objects/tool")
		})
	}
}

// The series are those counted, each once, under its tool and outcome;
// an outcome the counts have no place for is counted too.
func TestCallCounterCollectsWhatWasCounted(t *testing.T) {
	c := newCallCounter()
	counts := c.setTable([]string{"a", "b"})
	c.inc(counts[0], "a", outcomeOK)
	c.inc(counts[0], "a", outcomeOK)
	c.inc(counts[1], "b", outcomeLimited)
	c.inc(nil, "", outcomeUnknown)
	c.inc(counts[1], "b", "an_outcome_of_later")
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			ls := m.GetLabel()
			got[ls[1].GetValue()+"/"+ls[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{"a/ok": 2, "b/limited": 1, "/unknown": 1, "b/an_outcome_of_later": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("collected %v, want %v", got, want)
	}
	// A new table keeps b's counts, drops a's, and b's other outcome too
	// once b leaves.
	c.setTable([]string{"b", "c"})
	if n := testCount(t, reg); n != 3 {
		t.Errorf("%d series after a left the table, want 3 (b/limited, b/an_outcome_of_later, /unknown)", n)
	}
	c.setTable([]string{"c"})
	if n := testCount(t, reg); n != 1 {
		t.Errorf("%d series after b left the table, want 1 (/unknown)", n)
	}
}

func testCount(t *testing.T, reg *prometheus.Registry) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		n += len(mf.GetMetric())
	}
	return n
}
