package controllers

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/toolkit/discovery"
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

// everythingServer starts @modelcontextprotocol/server-everything for one
// spec, skipped as tsServer is.
func everythingServer() *nodeServer {
	GinkgoHelper()
	s, err := startEverythingServer(context.Background())
	if errors.Is(err, errNoInterop) && os.Getenv("CI") != "true" {
		Skip(err.Error())
	}
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(s.stop)
	return s
}

// agent is a Go agent with the stored table loaded, whose calls to a
// Service <name>.<ns>.svc.cluster.local:8080 reach the loopback port that ports gives for
// name, as a cluster's DNS would send them to the Pods.
func agent(ctx context.Context, ports map[string]int32) *discovery.Client {
	GinkgoHelper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, _ := net.SplitHostPort(addr)
		port, ok := ports[strings.SplitN(host, ".", 2)[0]]
		if !ok {
			return nil, errors.New("no Service " + host + " in this spec")
		}
		return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
	}
	c := &discovery.Client{Timeout: 20 * time.Second, HTTPClient: &http.Client{Transport: tr}}
	t, _, err := storedTable(ctx, tableNamespace)
	Expect(err).NotTo(HaveOccurred())
	Expect(c.SetTable(t)).To(Succeed())
	return c
}

// contentJSON is the JSON of a result's content, as an agent passes it on.
func contentJSON(res *spec.CallResult) string {
	GinkgoHelper()
	b, err := json.Marshal(res.Content)
	Expect(err).NotTo(HaveOccurred())
	return string(b)
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
			Expect(tt.Endpoints).To(Equal(&spec.Endpoints{MCP: "http://ts." + ns + ".svc.cluster.local:8080/mcp"}), "no invoke endpoint: the server has none")
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

	It("publishes server-everything's tools and a Go agent calls them with discovery.Call, content passed on unchanged", func(ctx context.Context) {
		srv := everythingServer()
		createReadyPod(ctx, ns, "everything-0", map[string]string{"app": "everything"}, srv.port)
		ts := mcpToolSet(ns, "everything")
		ts.Spec.Prefix = "ev_"
		// It tells any caller the server's environment.
		ts.Spec.Exclude = []string{"get-env"}
		createToolSet(ctx, ts)
		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, ts)
			g.Expect(readyCondition(got).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(got.Status.Tools).To(ContainElements(
				toolNamed("ev_echo", v1alpha1.ToolPublished),
				toolNamed("ev_get-tiny-image", v1alpha1.ToolPublished),
				toolNamed("ev_get-resource-reference", v1alpha1.ToolPublished),
				toolNamed("ev_get-env", v1alpha1.ToolFiltered),
			))
		}).Should(Succeed(), func() string {
			return toolSetState(ctx, ts) + "\nserver-everything's stderr, last lines:\n" + srv.tail()
		})
		eventuallyInTable(ctx, ts, ContainElement(And(HaveField("Name", "ev_get-tiny-image"), HaveField("SourceName", "get-tiny-image"))))

		c := agent(ctx, map[string]int32{"everything": srv.port})
		res, err := c.Call(ctx, "ev_echo", `{"message":"hello from Go"}`)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.IsError).To(BeFalse())
		Expect(res.Text()).To(ContainSubstring("hello from Go"))

		res, err = c.Call(ctx, "ev_get-tiny-image", nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Content).To(HaveLen(3))
		Expect(res.Content[1].Type).To(Equal(spec.ContentImage))
		Expect(res.Content[1].MIMEType).To(Equal("image/png"))
		Expect(res.Content[1].Data).To(HavePrefix("\x89PNG"))
		Expect(res.Content[2].Text).To(Equal("The image above is the MCP logo."))

		res, err = c.Call(ctx, "ev_get-resource-reference", `{"resourceType":"Text","resourceId":1}`)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.IsError).To(BeFalse(), res.Text())
		var kinds []string
		for _, block := range res.Content {
			kinds = append(kinds, block.Type)
		}
		Expect(kinds).To(ContainElement(spec.ContentResource))
	})

	It("calls a TypeScript SDK server's tools with discovery.Call, every content type unchanged, and keeps no session open", func(ctx context.Context) {
		srv := tsServer(nil, tool("ts_look"), tool("fail"))
		createReadyPod(ctx, ns, "look-0", map[string]string{"app": "look"}, srv.port)
		ts := mcpToolSet(ns, "look")
		createToolSet(ctx, ts)
		eventuallyInTable(ctx, ts, HaveLen(2))

		c := agent(ctx, map[string]int32{"look": srv.port})
		res, err := c.Call(ctx, "ts_look", map[string]any{"q": "x"})
		Expect(err).NotTo(HaveOccurred())
		// What mcp-server.mjs sends, block for block.
		Expect(contentJSON(res)).To(MatchJSON(`[
			{"type":"text","text":"ts_look {\"q\":\"x\"}"},
			{"type":"image","data":"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==","mimeType":"image/png"},
			{"type":"audio","data":"UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=","mimeType":"audio/wav","annotations":{"audience":["user"]}},
			{"type":"resource","resource":{"uri":"mem://interop/note.txt","mimeType":"text/plain","text":"an embedded note"}},
			{"type":"resource_link","uri":"mem://interop/doc","name":"doc","mimeType":"text/markdown"}
		]`))
		Expect(string(res.StructuredContent)).To(MatchJSON(`{"tool":"ts_look","arguments":{"q":"x"}}`))
		png, err := base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Content[1].Data).To(Equal(png))

		res, err = c.Call(ctx, "fail", nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.IsError).To(BeTrue())
		Expect(res.Text()).To(Equal("failed as asked"))

		Eventually(func(g Gomega) {
			st, err := srv.stats()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.Calls).To(Equal(2))
			g.Expect(st.Open).To(BeZero(), "every scrape and call ends its session")
		}).Should(Succeed())
	})

	It("owns and loses names like a toolkit ToolSet", func(ctx context.Context) {
		other := newNamespace(ctx)
		w := newWorkload(tool("own_shared"))
		createReadyPod(ctx, other, "kit-0", map[string]string{"app": "kit"}, w.port())
		first := toolSet(other, "kit")
		createToolSet(ctx, first)
		Eventually(func(g Gomega) {
			g.Expect(getToolSet(ctx, g, first).Status.PublishedTools).To(BeEquivalentTo(1))
		}).Should(Succeed())

		srv := tsServer(nil, tool("own_shared"), tool("own_mine"))
		createReadyPod(ctx, ns, "own-0", map[string]string{"app": "own"}, srv.port)
		second := mcpToolSet(ns, "own")
		createToolSet(ctx, second)
		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, second)
			g.Expect(got.Status.Tools).To(ConsistOf(
				And(toolNamed("own_shared", v1alpha1.ToolConflicted), HaveField("Owner", other+"/kit")),
				toolNamed("own_mine", v1alpha1.ToolPublished),
			))
		}).Should(Succeed())

		Expect(k8sClient.Delete(ctx, first)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(getToolSet(ctx, g, second).Status.Tools).To(ConsistOf(
				toolNamed("own_shared", v1alpha1.ToolPublished),
				toolNamed("own_mine", v1alpha1.ToolPublished),
			))
		}).Should(Succeed())
		eventuallyInTable(ctx, second, ConsistOf(
			And(HaveField("Name", "own_shared"), HaveField("Protocol", spec.ProtocolMCP)),
			And(HaveField("Name", "own_mine"), HaveField("Protocol", spec.ProtocolMCP)),
		))
	})
})
