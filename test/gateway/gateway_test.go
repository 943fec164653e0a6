package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/test/harness"
	"github.com/toolplane/toolplane/toolkit/spec"
)

var _ = Describe("The gateway binary", func() {
	It("lists exactly the table's tools to the TypeScript client (2025-11-25) and the Go client (2026-07-28), and calls them", func() {
		tbl, _, err := harness.ReadTable(ctx, cp.Client, tableNamespace, tableName)
		Expect(err).NotTo(HaveOccurred())

		By("the Go SDK client at 2026-07-28")
		cs := connect(gw.URL()+"/mcp", "2026-07-28", nil, nil)
		Expect(cs.InitializeResult().ProtocolVersion).To(Equal("2026-07-28"))
		Expect(listNames(cs)).To(Equal(names(tbl)))
		res, err := call(cs, "forecast", map[string]any{"city": "Oslo", "days": "3"})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.IsError).To(BeFalse(), text(res))
		Expect(text(res)).To(Equal("Oslo: sunny for 3 days"))

		By("the TypeScript SDK client at 2025-11-25, with sloppy arguments")
		ev := typeScriptClient(gw.URL()+"/mcp", "forecast", `{"city":"Oslo","days":"3"}`)
		Expect(ev["connected"].ProtocolVersion).To(Equal("2025-11-25"))
		var listed []string
		for _, t := range ev["tools"].Tools {
			listed = append(listed, t.Name)
		}
		Expect(listed).To(Equal(names(tbl)))
		var tsRes spec.CallResult
		Expect(json.Unmarshal(ev["called"].Result, &tsRes)).To(Succeed())
		Expect(tsRes.IsError).To(BeFalse(), tsRes.Text())
		Expect(tsRes.Text()).To(Equal("Oslo: sunny for 3 days"))
	})

	It("routes a prefixed tool to its workload under its source name, and never forwards the caller's Authorization", func() {
		hc := bearer("caller-secret")
		cs := connect(gw.URL()+"/mcp", "2026-07-28", nil, hc)
		res, err := call(cs, "crm_echo", map[string]any{"text": "ab", "count": "2"})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.IsError).To(BeFalse(), text(res))
		Expect(text(res)).To(MatchJSON(`{"echo":"abab","server":"crm"}`))
		res, err = call(cs, "crm_headers", nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(text(res)).NotTo(ContainSubstring("Authorization"))
		_, err = call(cs, "echo", map[string]any{"text": "x"})
		Expect(err).To(HaveOccurred(), "the source name is not a published name")
	})

	It("sends list_changed to a listening 2026 client when a new ToolSet is published", func() {
		// before is read once it holds still: a stream of an earlier spec
		// whose client has gone may still be closing at the gateway, and
		// would otherwise hide the one this client opens.
		var before float64
		Eventually(func(g Gomega) {
			first := gatewayGauge(g, gw, "toolplane_gateway_mcp_requests_in_flight")
			time.Sleep(500 * time.Millisecond)
			before = gatewayGauge(g, gw, "toolplane_gateway_mcp_requests_in_flight")
			g.Expect(before).To(Equal(first))
		}, settle).Should(Succeed())
		changed := make(chan struct{}, 1)
		cs := connect(gw.URL()+"/mcp", "2026-07-28", changed, nil)
		Expect(listNames(cs)).NotTo(ContainElement("late_tool"))
		// The notification goes to listeners present when the table
		// changes: wait until the client's subscriptions/listen stream is
		// open: one more MCP request in flight at the gateway than before.
		Eventually(func(g Gomega) {
			g.Expect(gatewayGauge(g, gw, "toolplane_gateway_mcp_requests_in_flight")).To(BeNumerically(">", before))
		}, settle, 100*time.Millisecond).Should(Succeed())
		wls["late-tools"].apply(ctx)
		Eventually(changed, settle).Should(Receive())
		Expect(listNames(cs)).To(ContainElement("late_tool"))
		res, err := call(cs, "late_tool", nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(text(res)).To(Equal("late"))
	})

	It("moves the route when the owner of a name changes", func() {
		cs := connect(gw.URL()+"/mcp/namespaces/owners", "2026-07-28", nil, nil)
		res, err := call(cs, "shared", nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(text(res)).To(Equal("served by a"))

		By("a second claimant, then the owner's ToolSet deleted")
		wls["owner-b"].apply(ctx)
		Eventually(func(g Gomega) {
			ts := &v1alpha1.ToolSet{}
			g.Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: "owners", Name: "owner-b"}, ts)).To(Succeed())
			g.Expect(ts.Status.Tools).To(ContainElement(HaveField("State", v1alpha1.ToolConflicted)))
		}, settle).Should(Succeed())
		Expect(cp.Client.Delete(ctx, &v1alpha1.ToolSet{ObjectMeta: metav1.ObjectMeta{Namespace: "owners", Name: "owner-a"}})).To(Succeed())
		waitForTable(func(owners map[string]string) bool { return owners["shared"] == "owners/owner-b" })

		Eventually(func(g Gomega) {
			res, err := call(cs, "shared", nil)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(text(res)).To(Equal("served by b"))
		}, settle).Should(Succeed())
	})

	It("gives an error result naming the tool and its owner, within the timeout, for a hung and for a dead workload", func() {
		wls["dead-tools"].close()
		cs := connect(gw.URL()+"/mcp", "2025-11-25", nil, nil)
		for _, tc := range []struct{ tool, owner, why string }{
			{"hang", "faulty/slow-tools", "did not answer within the gateway's call timeout of " + callTimeout.String()},
			{"dead_echo", "faulty/dead-tools", "unreachable"},
		} {
			start := time.Now()
			res, err := call(cs, tc.tool, nil)
			Expect(err).NotTo(HaveOccurred())
			Expect(res.IsError).To(BeTrue())
			Expect(text(res)).To(And(ContainSubstring(tc.tool), ContainSubstring(tc.owner), ContainSubstring(tc.why)))
			// Not a timing assertion: the result came, and well before
			// the client's own bound.
			Expect(time.Since(start)).To(BeNumerically("<", settle))
		}
	})

	It("lists 10,000 tools completely through pagination, from a split table", func() {
		tools := make([]spec.TableTool, 10_000)
		for i := range tools {
			n := fmt.Sprintf("bulk_%05d", i)
			ns := fmt.Sprintf("team-%d", i%11)
			tools[i] = spec.TableTool{
				Name: n, SourceName: n, Description: "Looks up records of one kind; returns at most limit matches.",
				InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer","minimum":1,"maximum":100}},"required":["query"]}`),
				ToolSet:     spec.ObjectReference{Namespace: ns, Name: "bulk"},
				Endpoints:   &spec.Endpoints{Invoke: "http://bulk." + ns + ".svc:8080/tools/" + n, MCP: "http://bulk." + ns + ".svc:8080/mcp"},
			}
		}
		parts, err := spec.EncodeTable(&spec.Table{Tools: tools}, tableName)
		Expect(err).NotTo(HaveOccurred())
		for _, p := range parts {
			Expect(cp.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "big-table", Name: p.Name}, Data: p.Data, BinaryData: p.BinaryData})).To(Succeed())
		}
		big := &harness.Gateway{Bin: gatewayBin, Kubeconfig: cp.Kubeconfig, TableNamespace: "big-table",
			Args: []string{"--page-size", "500"}, LogPath: filepath.Join(workDir, "gateway-big.log")}
		Expect(big.Start(ctx)).To(Succeed())
		DeferCleanup(func() { Expect(big.Stop(30 * time.Second)).To(Succeed()) })

		want := make([]string, len(tools))
		for i := range tools {
			want[i] = tools[i].Name
		}
		for _, era := range []string{"2026-07-28", "2025-11-25"} {
			cs := connect(big.URL()+"/mcp", era, nil, nil)
			pages, cursor := 0, ""
			var got []string
			for {
				res, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
				Expect(err).NotTo(HaveOccurred())
				pages++
				for _, t := range res.Tools {
					got = append(got, t.Name)
				}
				if cursor = res.NextCursor; cursor == "" {
					break
				}
			}
			Expect(got).To(Equal(want), era)
			Expect(pages).To(Equal(20), era)
		}
		// Memory is measured, not asserted (make bench and
		// BenchmarkTableMemory have the figures); it is reported here for
		// the binary as it runs.
		st, err := harness.ReadProcStats(big.Pid())
		Expect(err).NotTo(HaveOccurred())
		AddReportEntry("gateway RSS holding 10,000 tools", fmt.Sprintf("%.1f MiB (peak %.1f MiB)", float64(st.RSS)/(1<<20), float64(st.PeakRSS)/(1<<20)))
	})
})

// gatewayGauge reads one gauge from a gateway's metrics endpoint.
func gatewayGauge(g Gomega, gw *harness.Gateway, name string) float64 {
	resp, err := http.Get("http://" + gw.MetricsAddr + "/metrics")
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	fams, err := harness.ParseMetrics(string(b))
	g.Expect(err).NotTo(HaveOccurred())
	return harness.Sum(fams, name, nil)
}
