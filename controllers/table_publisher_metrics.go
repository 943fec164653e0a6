package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics of the tool table, served on the manager's metrics endpoint.
var (
	tableTools = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "toolplane_table_tools",
		Help: "Tools in the published tool table.",
	})
	tableBytes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "toolplane_table_bytes",
		Help: "Bytes of the published tool table, summed over its ConfigMaps as stored.",
	})
	tableJSONBytes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "toolplane_table_json_bytes",
		Help: "Bytes of the published tool table's JSON once decoded: what --max-table-bytes bounds.",
	})
	tableParts = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "toolplane_table_parts",
		Help: "ConfigMaps that hold the published tool table.",
	})
	tableWriteFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "toolplane_table_write_failures_total",
		Help: "Writes of the tool table that failed; each is retried with backoff.",
	})
	conflictsGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "toolplane_conflicts",
		Help: "Tool names offered by a ToolSet that another ToolSet owns, summed over all names.",
	})
)

// tableGauges are the gauges a publisher sets of the table it wrote: the
// registered ones, which the one publisher of a manager sets. A spec's
// publisher sets gauges of its own, since every publisher of the test
// process (the suite's manager's among them) would set the registered ones.
//
// bytes is the table as stored (gzip, past the plain form), jsonBytes its
// JSON, which the budget (--max-table-bytes) counts: a ceiling alert
// compares jsonBytes with it.
type tableGauges struct{ tools, bytes, jsonBytes, parts prometheus.Gauge }

var registeredTableGauges = &tableGauges{tools: tableTools, bytes: tableBytes, jsonBytes: tableJSONBytes, parts: tableParts}

func init() {
	metrics.Registry.MustRegister(tableTools, tableBytes, tableJSONBytes, tableParts, conflictsGauge, tableWriteFailures)
}

func setConflictsMetric(n int) { conflictsGauge.Set(float64(n)) }
