package install

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// exportedMetrics are the metric names the manager and the gateway
// register, read from their Go sources.
func exportedMetrics() []string {
	GinkgoHelper()
	var names []string
	for _, dir := range []string{"controllers", "internal/gateway"} {
		files, err := filepath.Glob(filepath.Join(repoRoot, dir, "*metrics*.go"))
		Expect(err).NotTo(HaveOccurred())
		for _, f := range files {
			src, err := os.ReadFile(f)
			Expect(err).NotTo(HaveOccurred())
			// A metric's options name it, or a collector's Desc does.
			for _, m := range regexp.MustCompile(`(?:Name:\s+|NewDesc\(\s*)"(toolplane_[a-z_]+)"`).FindAllStringSubmatch(string(src), -1) {
				names = append(names, m[1])
			}
		}
	}
	Expect(names).To(ContainElement("toolplane_scrape_errors_total"), "found no metric names")
	return names
}

// unknownMetrics lists the toolplane_* names an expression uses that no
// source registers; a histogram's _bucket, _sum and _count are its own.
func unknownMetrics(expr string, known []string) []string {
	var unknown []string
	for _, name := range regexp.MustCompile(`toolplane_[a-z_]+`).FindAllString(expr, -1) {
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			base = strings.TrimSuffix(base, suffix)
		}
		found := false
		for _, k := range known {
			found = found || k == name || k == base
		}
		if !found {
			unknown = append(unknown, name)
		}
	}
	return unknown
}

var _ = Describe("The alerts and the dashboard", func() {
	It("are opt-in, admitted, and use only metrics that exist", func(ctx context.Context) {
		m := helmTemplate("t", "ns", "--api-versions", "monitoring.coreos.com/v1")
		Expect(m.ofKind("PrometheusRule")).To(BeEmpty())
		// The one ConfigMap by default is the gateway's CA, for agents.
		Expect(m.ofKind("ConfigMap").manager()).To(BeEmpty(), "the dashboard is rendered without grafanaDashboard.enabled")
		Expect(helmTemplate("t", "ns", "--set", "prometheusRule.enabled=true").ofKind("PrometheusRule")).To(BeEmpty(),
			"a PrometheusRule without monitoring.coreos.com/v1 fails the install")

		m = helmTemplate("t", "monitoring-system", "--api-versions", "monitoring.coreos.com/v1",
			"--set", "prometheusRule.enabled=true", "--set", "grafanaDashboard.enabled=true")
		Expect(dryRun(ctx, append(m.ofKind("PrometheusRule"), m.ofKind("ConfigMap")...), "")).To(Succeed())
		known := exportedMetrics()

		groups, _, err := unstructured.NestedSlice(m.named("PrometheusRule", "t-toolplane").Object, "spec", "groups")
		Expect(err).NotTo(HaveOccurred())
		var alerts []string
		for _, g := range groups {
			for _, r := range g.(map[string]any)["rules"].([]any) {
				rule := r.(map[string]any)
				alerts = append(alerts, rule["alert"].(string))
				Expect(unknownMetrics(rule["expr"].(string), known)).To(BeEmpty(), "alert %s", rule["alert"])
			}
		}
		Expect(alerts).To(ConsistOf("ToolplaneScrapesFailing", "ToolplaneToolSetStale", "ToolplaneToolSetConflicted",
			"ToolplaneTableWriteFailing", "ToolplaneTableNearCeiling", "ToolplaneGatewayErrorRate", "ToolplaneGatewayAuditDropping"))

		var dashboard struct {
			Panels []struct {
				Title   string
				Targets []struct{ Expr string }
			}
		}
		cm := m.named("ConfigMap", "t-toolplane-dashboard")
		Expect(cm.GetLabels()).To(HaveKeyWithValue("grafana_dashboard", "1"))
		data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
		Expect(json.Unmarshal([]byte(data["toolplane.json"]), &dashboard)).To(Succeed())
		Expect(dashboard.Panels).NotTo(BeEmpty())
		for _, p := range dashboard.Panels {
			for _, t := range p.Targets {
				Expect(unknownMetrics(t.Expr, known)).To(BeEmpty(), "panel %q", p.Title)
			}
		}
	})

	It("catch a metric that does not exist", func() {
		known := exportedMetrics()
		Expect(known).To(ContainElement("toolplane_toolset_tools"), "a collector's metric, named by its Desc")
		Expect(unknownMetrics(`rate(toolplane_scrape_duration_seconds_bucket[5m]) + toolplane_no_such_metric`, known)).
			To(ConsistOf("toolplane_no_such_metric"))
	})
})
