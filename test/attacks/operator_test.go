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
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

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
			g.Expect(ts.Status.Conditions).To(ContainElement(HaveField("Message", ContainSubstring("_meta would decode to more than"))))
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
			g.Expect(ts.Status.Conditions).To(ContainElement(HaveField("Message", ContainSubstring("decode to more than"))))
		}).WithTimeout(settle).Should(Succeed())
		expectManagerBounded(m)
	})
})
