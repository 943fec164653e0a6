package controllers

import (
	"maps"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/toolplane/toolplane/api/v1alpha1"
)

// The operator's metrics, served by the manager's metrics endpoint through
// controller-runtime's registry.
var (
	scrapeDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "toolplane_scrape_duration_seconds",
		Help:    "How long one scrape of one Pod's spec document took, failed scrapes included.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	})
	scrapeErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolplane_scrape_errors_total",
		Help: "Failed scrapes of a Pod's spec document, by reason.",
	}, []string{"reason"})
	toolSetTools = newToolCounts()
)

var toolStates = [...]v1alpha1.ToolState{
	v1alpha1.ToolPublished, v1alpha1.ToolConflicted, v1alpha1.ToolInvalid,
	v1alpha1.ToolFiltered, v1alpha1.ToolSkewed, v1alpha1.ToolStale,
}

func init() {
	metrics.Registry.MustRegister(scrapeDuration, scrapeErrors, toolSetTools)
}

// stateCounts are one ToolSet's tools in each of toolStates.
type stateCounts [len(toolStates)]int32

// toolCounts is the collector of toolplane_toolset_tools: it keeps each
// ToolSet's counts and makes the series from them when the metrics are
// gathered, a series for each state the ToolSet has tools in. A GaugeVec
// kept a child of its own for every series, its label pairs and its gauge:
// about 500 bytes a ToolSet for as long as it exists (2.4 MB at 5,000
// ToolSets in BenchmarkReconcilerMemory), where the counts take a map entry
// of about 100; and forgetting a ToolSet (DeletePartialMatch) went through
// every series.
type toolCounts struct {
	desc   *prometheus.Desc
	mu     sync.Mutex
	counts map[types.NamespacedName]stateCounts
}

func newToolCounts() *toolCounts {
	return &toolCounts{
		desc: prometheus.NewDesc("toolplane_toolset_tools",
			"The tools of each ToolSet, by state (Published, Conflicted, Invalid, Filtered, Skewed, Stale); a state the ToolSet has no tool in has no series.",
			[]string{"namespace", "name", "state"}, nil),
		counts: map[types.NamespacedName]stateCounts{},
	}
}

// Describe implements [prometheus.Collector].
func (c *toolCounts) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements [prometheus.Collector]. It sends the series from a
// copy of the counts, so that no reconcile waits for the scraper.
func (c *toolCounts) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	counts := maps.Clone(c.counts)
	c.mu.Unlock()
	for key, n := range counts {
		for i, s := range toolStates {
			if n[i] > 0 {
				ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n[i]), key.Namespace, key.Name, string(s))
			}
		}
	}
}

// recordTools sets the tool gauges of one ToolSet from its status.
func recordTools(key types.NamespacedName, tools []v1alpha1.ToolStatus) {
	toolSetTools.record(key, tools)
}

// forgetTools drops the tool gauges of a ToolSet that is gone.
func forgetTools(key types.NamespacedName) { toolSetTools.forget(key) }

// record sets the counts of one ToolSet from its status. Only the states
// it has tools in have a series, none if it has no tools in any.
func (c *toolCounts) record(key types.NamespacedName, tools []v1alpha1.ToolStatus) {
	var n stateCounts
	for _, t := range tools {
		for i, s := range toolStates {
			if t.State == s {
				n[i]++
				break
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n == (stateCounts{}) {
		delete(c.counts, key)
		return
	}
	c.counts[key] = n
}

// forget drops the counts of a ToolSet that is gone.
func (c *toolCounts) forget(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.counts, key)
}
