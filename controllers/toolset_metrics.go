package controllers

import (
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
	toolSetTools = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "toolplane_toolset_tools",
		Help: "The tools of each ToolSet, by state (Published, Conflicted, Invalid, Filtered, Skewed, Stale); a state the ToolSet has no tool in has no series.",
	}, []string{"namespace", "name", "state"})
)

var toolStates = []v1alpha1.ToolState{
	v1alpha1.ToolPublished, v1alpha1.ToolConflicted, v1alpha1.ToolInvalid,
	v1alpha1.ToolFiltered, v1alpha1.ToolSkewed, v1alpha1.ToolStale,
}

func init() {
	metrics.Registry.MustRegister(scrapeDuration, scrapeErrors, toolSetTools)
}

// recordTools sets the tool gauges of one ToolSet from its status. Only the
// states it has tools in have a series: most ToolSets have only Published
// tools, and a series costs some 500 bytes for as long as the ToolSet
// exists.
func recordTools(key types.NamespacedName, tools []v1alpha1.ToolStatus) {
	counts := map[v1alpha1.ToolState]int{}
	for _, t := range tools {
		counts[t.State]++
	}
	for _, s := range toolStates {
		if counts[s] == 0 {
			toolSetTools.DeleteLabelValues(key.Namespace, key.Name, string(s))
			continue
		}
		toolSetTools.WithLabelValues(key.Namespace, key.Name, string(s)).Set(float64(counts[s]))
	}
}

// forgetTools drops the tool gauges of a ToolSet that is gone.
func forgetTools(key types.NamespacedName) {
	toolSetTools.DeletePartialMatch(prometheus.Labels{"namespace": key.Namespace, "name": key.Name})
}
