package attacks

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/test/harness"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// managerRSSBound is the manager's peak RSS allowed under any attack: its
// chart limit (resources.limits.memory, 256Mi) minus 20%.
const managerRSSBound = 256 << 20 * 8 / 10

// mapsPage is one tools/list reply of JSON-RPC id of about size bytes: one
// tool whose inputSchema holds {"a":0} objects, the JSON that costs the
// most to decode into maps (some 45 times its size).
func mapsPage(id json.RawMessage, size int) []byte {
	head := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"t","inputSchema":{"type":"object","x":[`, id)
	const item = `{"a":0},`
	var b strings.Builder
	b.Grow(size)
	b.WriteString(head)
	for b.Len() < size-len(item)-16 {
		b.WriteString(item)
	}
	b.WriteString(`{}]}}]}}`)
	return []byte(b.String())
}

// hostileMCP is an MCP server that answers the handshake and gives every
// tools/list a page of maps of pageBytes, counting the pages it served.
func hostileMCP(pageBytes int, pages *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if r.Method != http.MethodPost || json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req) != nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch req.Method {
		case "server/discover", "initialize":
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"maps","version":"1"}}}`, req.ID)
		case "tools/list":
			pages.Add(1)
			_, _ = w.Write(mapsPage(req.ID, pageBytes))
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	})
}

// nearBudgetPage is one tools/list reply of JSON-RPC id that stays within
// --max-response-bytes (4 MiB, with the handshake) and whose estimated
// decode (spec.DecodeMeter) is just under the scrape's decode budget (2 ×
// it, 8 MiB, with the handshake): a description of 3.5 MiB, then as many
// {"a":0} objects as the rest of the decode budget admits. Each scrape of
// it passes every per-scrape bound and holds ~16 MiB. It lists two tools,
// so that a ToolSet of limits.maxTools 1 fails the scrape once it is
// decoded and keeps no document between rounds: what the attack costs is
// the scrapes in flight alone.
func nearBudgetPage(id json.RawMessage) []byte {
	const decodeBudget = 8<<20 - 64<<10
	page := func(items int) []byte {
		var b strings.Builder
		fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"t","description":"`, id)
		b.WriteString(strings.Repeat("d", 3<<20+512<<10))
		b.WriteString(`","inputSchema":{"type":"object","x":[`)
		b.WriteString(strings.Repeat(`{"a":0},`, items))
		b.WriteString(`{}]}},{"name":"u","inputSchema":{"type":"object"}}]}}`)
		return []byte(b.String())
	}
	base := spec.DecodeCost(page(0))
	per := (spec.DecodeCost(page(1000)) - base) / 1000
	return page(int((decodeBudget - base) / per))
}

// nearBudgetMCP is an MCP server that answers the handshake and gives every
// tools/list a nearBudgetPage, counting the pages it served.
func nearBudgetMCP(pages *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if r.Method != http.MethodPost || json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req) != nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch req.Method {
		case "server/discover", "initialize":
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"near","version":"1"}}}`, req.ID)
		case "tools/list":
			pages.Add(1)
			page := nearBudgetPage(req.ID)
			// Every reply at once: the scrapes asking within the same 4 s
			// (their timeout is 5 s) are all answered at its end, so that
			// they are all in flight together.
			time.Sleep(time.Until(time.Now().Truncate(4 * time.Second).Add(4 * time.Second)))
			_, _ = w.Write(page)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	})
}

// metaDocument is a spec document of about size bytes whose one tool's
// _meta holds {"a":0} objects: the one field of a spec document that
// decodes into maps.
func metaDocument(size int) []byte {
	head := `{"schemaVersion":"` + spec.SchemaVersion + `","tools":[{"name":"t","inputSchema":{"type":"object"},"_meta":{"x":[`
	const item = `{"a":0},`
	var b strings.Builder
	b.Grow(size)
	b.WriteString(head)
	for b.Len() < size-len(item)-16 {
		b.WriteString(item)
	}
	b.WriteString(`{}]}}]}`)
	return []byte(b.String())
}

// serve serves h on a loopback port until the spec ends.
func serve(h http.Handler) int {
	GinkgoHelper()
	srv := httptest.NewServer(h)
	DeferCleanup(srv.Close)
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	Expect(err).NotTo(HaveOccurred())
	p, err := strconv.Atoi(port)
	Expect(err).NotTo(HaveOccurred())
	return p
}

// harnessPod creates a ready Pod at 127.0.0.1 whose port is port.
func harnessPod(ns, name, app string, port int) error {
	_, err := harness.CreateReadyPod(ctx, cp.Client, ns, name, app, port)
	return err
}

func keyOf(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

// startManager starts a manager of the spec's own, with the chart's
// GOMEMLIMIT, watching only namespaces and publishing into a table
// namespace of its own, so that its peak RSS is this attack's alone.
func startManager(name string, namespaces ...string) (*harness.Manager, string) {
	GinkgoHelper()
	table := newNamespace(name + "-table")
	bin := managerBin
	// ATTACKS_MANAGER_BIN runs the manager's attacks against another build,
	// such as one of an older commit, to see a bound that it lacks fail.
	if b := os.Getenv("ATTACKS_MANAGER_BIN"); b != "" {
		bin = b
	}
	m := &harness.Manager{Bin: bin, Kubeconfig: cp.Kubeconfig, TableNamespace: table,
		Args: []string{"--watch-namespaces=" + strings.Join(namespaces, ",")},
		Env:  []string{chartGoMemLimit}, LogPath: filepath.Join(workDir, name+"-manager.log")}
	Expect(m.Start(ctx)).To(Succeed())
	DeferCleanup(func() { _ = m.Stop(30 * time.Second) })
	return m, table
}

// expectManagerBounded checks that the manager still runs and that its peak
// RSS stayed within managerRSSBound.
func expectManagerBounded(m *harness.Manager) {
	GinkgoHelper()
	exited, err := m.Exited()
	Expect(exited).To(BeFalse(), "the manager exited: %v", err)
	st, err := harness.ReadProcStats(m.Pid())
	Expect(err).NotTo(HaveOccurred())
	AddReportEntry("manager peak RSS", fmt.Sprintf("%d MiB", st.PeakRSS>>20))
	Expect(st.PeakRSS).To(BeNumerically("<=", managerRSSBound), "the manager's peak RSS, %d MiB", st.PeakRSS>>20)
}

var _ = Describe("The manager", func() {
	It("keeps its peak RSS within its limit less 20% while a tenant serves 4 MiB spec documents whose _meta is maps to 8 concurrent scrapes", Label("heavy"), func() {
		evil := newNamespace("meta-pages")
		m, _ := startManager("meta-pages", evil)
		var served atomic.Int64
		doc := metaDocument(4<<20 - 1024)
		port := serve(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			served.Add(1)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(doc)
		}))
		for i := range 8 {
			app := fmt.Sprintf("meta-%d", i)
			Expect(harnessPod(evil, app+"-0", app, port)).To(Succeed())
			Expect(cp.Client.Create(ctx, harness.NewToolSet(evil, app, app, spec.DefaultPath, 5*time.Second))).To(Succeed())
		}
		Eventually(served.Load).WithTimeout(settle).Should(BeNumerically(">=", 32))
		Eventually(func(g Gomega) {
			ts := &v1alpha1.ToolSet{}
			g.Expect(cp.Client.Get(ctx, keyOf(evil, "meta-0"), ts)).To(Succeed())
			// Refused by its own decode budget, or, when the other scrapes
			// hold the manager's, by that.
			g.Expect(ts.Status.Conditions).To(ContainElement(HaveField("Message", Or(ContainSubstring("_meta would decode to more than"), ContainSubstring("--scrape-memory-budget")))))
		}).WithTimeout(settle).Should(Succeed())
		expectManagerBounded(m)
	})

	It("keeps its peak RSS within its limit less 20% while a tenant serves 4 MiB tools/list pages of maps to 8 concurrent scrapes, and publishes a healthy tenant's change", Label("heavy"), func() {
		const pageBytes = 4<<20 - 64<<10 // within --max-response-bytes, with the handshake
		evil, healthy := newNamespace("mcp-pages"), newNamespace("mcp-healthy")
		m, table := startManager("mcp-pages", evil, healthy)

		By("a healthy tenant publishing through the same manager")
		w := harness.NewWorkload("healthy", harness.Tools("healthy_", 3))
		Expect(harnessPod(healthy, "healthy-0", "healthy", serve(w))).To(Succeed())
		Expect(cp.Client.Create(ctx, harness.NewToolSet(healthy, "healthy", "healthy", spec.DefaultPath, 5*time.Second))).To(Succeed())
		Eventually(func(g Gomega) {
			t, _, err := harness.ReadTable(ctx, cp.Client, table, tableName)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(t.Tools).To(HaveLen(3))
		}).WithTimeout(settle).Should(Succeed())

		By("8 MCP ToolSets of one namespace, each a Pod serving 4 MiB pages of maps")
		var pages atomic.Int64
		port := serve(hostileMCP(pageBytes, &pages))
		for i := range 8 {
			app := fmt.Sprintf("maps-%d", i)
			Expect(harnessPod(evil, app+"-0", app, port)).To(Succeed())
			ts := harness.NewToolSet(evil, app, app, "/mcp", 5*time.Second)
			ts.Spec.Protocol = v1alpha1.ProtocolMCP
			Expect(cp.Client.Create(ctx, ts)).To(Succeed())
		}
		// Several rounds of 8 scrapes each (the interval is 5 s).
		Eventually(pages.Load).WithTimeout(settle).Should(BeNumerically(">=", 32))

		By("a change of the healthy tenant's tools published during the attack")
		w.SetTools(append(harness.Tools("healthy_", 3), spec.Tool{Name: "healthy_new", Description: "New.", InputSchema: json.RawMessage(`{"type":"object"}`)}))
		Eventually(func(g Gomega) {
			t, _, err := harness.ReadTable(ctx, cp.Client, table, tableName)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(t.Tools).To(HaveLen(4))
		}).WithTimeout(settle).Should(Succeed())

		By("the hostile ToolSets failing their scrapes as too large")
		Eventually(func(g Gomega) {
			ts := &v1alpha1.ToolSet{}
			g.Expect(cp.Client.Get(ctx, keyOf(evil, "maps-0"), ts)).To(Succeed())
			g.Expect(ts.Status.Conditions).To(ContainElement(HaveField("Message", Or(ContainSubstring("decode to more than"), ContainSubstring("--scrape-memory-budget")))))
		}).WithTimeout(settle).Should(Succeed())
		expectManagerBounded(m)
	})
	It("keeps its peak RSS within its limit less 20% while four namespaces each serve 8 concurrent scrapes tools/list pages just under the decode budget, and publishes a healthy tenant's change", Label("heavy"), func() {
		namespaces := []string{}
		for i := range 4 {
			namespaces = append(namespaces, newNamespace(fmt.Sprintf("near-budget-%d", i)))
		}
		healthy := newNamespace("near-budget-healthy")
		m, table := startManager("near-budget", append(slices.Clone(namespaces), healthy)...)

		By("a healthy tenant publishing through the same manager")
		w := harness.NewWorkload("healthy", harness.Tools("healthy_", 3))
		Expect(harnessPod(healthy, "healthy-0", "healthy", serve(w))).To(Succeed())
		Expect(cp.Client.Create(ctx, harness.NewToolSet(healthy, "healthy", "healthy", spec.DefaultPath, 5*time.Second))).To(Succeed())
		Eventually(func(g Gomega) {
			t, _, err := harness.ReadTable(ctx, cp.Client, table, tableName)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(t.Tools).To(HaveLen(3))
		}).WithTimeout(settle).Should(Succeed())

		By("four namespaces of 8 MCP ToolSets each, every Pod serving pages just under the decode budget")
		var pages atomic.Int64
		port := serve(nearBudgetMCP(&pages))
		for _, ns := range namespaces {
			for i := range 8 {
				app := fmt.Sprintf("near-%d", i)
				Expect(harnessPod(ns, app+"-0", app, port)).To(Succeed())
				ts := harness.NewToolSet(ns, app, app, "/mcp", 5*time.Second)
				ts.Spec.Protocol = v1alpha1.ProtocolMCP
				ts.Spec.Limits.MaxTools = 1
				Expect(cp.Client.Create(ctx, ts)).To(Succeed())
			}
		}
		// Three rounds of 32 scrapes (the interval is 5 s).
		Eventually(pages.Load).WithTimeout(settle).Should(BeNumerically(">=", 96))

		By("a change of the healthy tenant's tools published during the attack")
		w.SetTools(append(harness.Tools("healthy_", 3), spec.Tool{Name: "healthy_new", Description: "New.", InputSchema: json.RawMessage(`{"type":"object"}`)}))
		Eventually(func(g Gomega) {
			t, _, err := harness.ReadTable(ctx, cp.Client, table, tableName)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(t.Tools).To(HaveLen(4))
		}).WithTimeout(settle).Should(Succeed())

		By("hostile scrapes refused by the manager's scrape memory budget")
		Eventually(func(g Gomega) {
			refused := 0
			for _, ns := range namespaces {
				list := &v1alpha1.ToolSetList{}
				g.Expect(cp.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
				for _, ts := range list.Items {
					for _, c := range ts.Status.Conditions {
						if strings.Contains(c.Message, "--scrape-memory-budget") {
							refused++
							break
						}
					}
				}
			}
			AddReportEntry("hostile ToolSets refused by the budget", refused)
			g.Expect(refused).To(BeNumerically(">", 0))
		}).WithTimeout(settle).Should(Succeed())
		expectManagerBounded(m)
	})
})
