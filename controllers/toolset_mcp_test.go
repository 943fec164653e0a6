package controllers

import (
	"context"
	"errors"
	"os"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// mcpToolSet is toolSet with protocol MCP at the default path.
func mcpToolSet(ns, name string) *v1alpha1.ToolSet {
	ts := toolSet(ns, name)
	ts.Spec.Protocol = v1alpha1.ProtocolMCP
	return ts
}

// tsServer starts the TypeScript SDK server of hack/interop for one spec,
// serving tools. Without node and the npm packages the spec is skipped, and
// in CI it fails.
func tsServer(args []string, tools ...spec.Tool) *nodeServer {
	GinkgoHelper()
	s, err := startTSServer(context.Background(), args...)
	if errors.Is(err, errNoInterop) && os.Getenv("CI") != "true" {
		Skip(err.Error())
	}
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(s.stop)
	Expect(s.setTools(tools...)).To(Succeed())
	return s
}

// tableVersions are the resource versions of the table's ConfigMaps.
func tableVersions(ctx context.Context) []string {
	GinkgoHelper()
	_, cms, err := storedTable(ctx, tableNamespace)
	Expect(err).NotTo(HaveOccurred())
	var rvs []string
	for _, cm := range cms {
		rvs = append(rvs, cm.Name+"@"+cm.ResourceVersion)
	}
	return rvs
}

var _ = Describe("An MCP ToolSet", func() {
	var ns string
	BeforeEach(func(ctx context.Context) { ns = newNamespace(ctx) })

	It("lists a TypeScript SDK server's tools page by page, publishes them for tools/call at its MCP endpoint, and follows their changes", func(ctx context.Context) {
		srv := tsServer([]string{"--page-size", "2"}, tool("ts_alpha"), tool("ts_beta"), tool("ts_gamma"))
		createReadyPod(ctx, ns, "ts-0", map[string]string{"app": "ts"}, srv.port)
		ts := mcpToolSet(ns, "ts")
		createToolSet(ctx, ts)

		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, ts)
			g.Expect(readyCondition(got).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(got.Status.Tools).To(ConsistOf(
				toolNamed("ts_alpha", v1alpha1.ToolPublished),
				toolNamed("ts_beta", v1alpha1.ToolPublished),
				toolNamed("ts_gamma", v1alpha1.ToolPublished),
			))
			g.Expect(got.Status.Pods).To(Equal(v1alpha1.PodCounts{Selected: 1, Scraped: 1}))
			g.Expect(got.Status.Revision).To(HavePrefix("sha256:"))
		}).Should(Succeed())
		offered := eventuallyInTable(ctx, ts, HaveLen(3))
		for _, tt := range offered {
			Expect(tt.Protocol).To(Equal(spec.ProtocolMCP))
			Expect(tt.Endpoints).To(Equal(&spec.Endpoints{MCP: "http://ts." + ns + ".svc:8080/mcp"}), "no invoke endpoint: the server has none")
		}
		Expect(string(offered[0].InputSchema)).To(MatchJSON(tool("ts_alpha").InputSchema))

		Expect(srv.setTools(tool("ts_alpha"), tool("ts_delta"))).To(Succeed())
		eventuallyInTable(ctx, ts, ConsistOf(HaveField("Name", "ts_alpha"), HaveField("Name", "ts_delta")))
		st, err := srv.stats()
		Expect(err).NotTo(HaveOccurred())
		Expect(st.Sessions).To(BeNumerically(">=", 2))
		Expect(st.Open).To(BeNumerically("<=", 1), "each scrape ends its session")
	})

	It("gives Skewed tools when two replicas serve different lists, and writes nothing while nothing changes", func(ctx context.Context) {
		a := tsServer(nil, tool("sk_both"), tool("sk_new"))
		b := tsServer([]string{"--stateless"}, tool("sk_both"))
		createReadyPod(ctx, ns, "sk-0", map[string]string{"app": "sk"}, a.port)
		createReadyPod(ctx, ns, "sk-1", map[string]string{"app": "sk"}, b.port)
		ts := mcpToolSet(ns, "sk")
		createToolSet(ctx, ts)
		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, ts)
			g.Expect(got.Status.Tools).To(ConsistOf(
				toolNamed("sk_both", v1alpha1.ToolPublished),
				toolNamed("sk_new", v1alpha1.ToolSkewed),
			))
			g.Expect(condition(got, v1alpha1.ConditionDegraded).Message).To(ContainSubstring("2 revisions"))
		}).Should(Succeed())
		eventuallyInTable(ctx, ts, ConsistOf(HaveField("Name", "sk_both")))

		// Steady state: three more scrapes of both Pods write nothing.
		before := getToolSet(ctx, Default, ts)
		tableRV := tableVersions(ctx)
		lists := func() int {
			sa, errA := a.stats()
			sb, errB := b.stats()
			if errA != nil || errB != nil {
				return -1
			}
			return min(sa.Lists, sb.Lists)
		}
		start := lists()
		Eventually(lists).WithTimeout(60 * time.Second).Should(BeNumerically(">=", start+3))
		after := getToolSet(ctx, Default, ts)
		Expect(after.ResourceVersion).To(Equal(before.ResourceVersion), "no status write over 3 scrapes")
		Expect(tableVersions(ctx)).To(Equal(tableRV), "no table write over 3 scrapes")

		Expect(b.setTools(tool("sk_both"), tool("sk_new"))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(getToolSet(ctx, g, ts).Status.Tools).To(ConsistOf(
				toolNamed("sk_both", v1alpha1.ToolPublished),
				toolNamed("sk_new", v1alpha1.ToolPublished),
			))
		}).Should(Succeed())
	})
})
