package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/controllers/ownership"
	"github.com/toolplane/toolplane/toolkit/discovery"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// tableWrite is one write the publisher made, in order.
type tableWrite struct {
	verb string // create, update, delete
	cm   *corev1.ConfigMap
}

// writeLog records every ConfigMap write a publisher makes through its
// client, so that specs count writes and check their order.
type writeLog struct {
	mu     sync.Mutex
	writes []tableWrite
	// gate, if set, holds every write until it is closed; each held write
	// first says so on held.
	gate, held chan struct{}
}

func (l *writeLog) wait(ctx context.Context) {
	if l.gate == nil {
		return
	}
	select {
	case l.held <- struct{}{}:
	default:
	}
	select {
	case <-l.gate:
	case <-ctx.Done():
	}
}

// record logs a write before making it, so that the log holds a write by the
// time its effect can be seen, and forgets it if it fails. The publisher
// writes from one goroutine, so the entry is still the last one then.
func (l *writeLog) record(verb string, obj client.Object, write func() error) error {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return write()
	}
	l.mu.Lock()
	l.writes = append(l.writes, tableWrite{verb: verb, cm: cm.DeepCopy()})
	l.mu.Unlock()
	err := write()
	if err != nil {
		l.mu.Lock()
		l.writes = l.writes[:len(l.writes)-1]
		l.mu.Unlock()
	}
	return err
}

func (l *writeLog) all() []tableWrite {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.writes)
}

func (l *writeLog) count() int { return len(l.all()) }

// tableOnly returns the writes of the table's ConfigMaps among writes;
// ledgerOnly those of the ledger's chunks.
func tableOnly(writes []tableWrite) []tableWrite {
	return slices.DeleteFunc(slices.Clone(writes), isLedgerWrite)
}

func ledgerOnly(writes []tableWrite) []tableWrite {
	return slices.DeleteFunc(slices.Clone(writes), func(w tableWrite) bool { return !isLedgerWrite(w) })
}

func isLedgerWrite(w tableWrite) bool {
	_, _, ok := spec.ParseTableLedgerName("tools", w.cm.Name)
	return ok
}

// countingClient is a client on the test API server that logs successful
// writes.
func countingClient(log *writeLog) client.Client {
	GinkgoHelper()
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			log.wait(ctx)
			return log.record("create", obj, func() error { return c.Create(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			log.wait(ctx)
			return log.record("update", obj, func() error { return c.Update(ctx, obj, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			log.wait(ctx)
			return log.record("delete", obj, func() error { return c.Delete(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			log.wait(ctx)
			return log.record("patch", obj, func() error { return c.Patch(ctx, obj, patch, opts...) })
		},
	})
}

// runningPublisher is a TablePublisher started for one spec, with the writes
// it made and the Changed events it sent.
type runningPublisher struct {
	*TablePublisher
	writes *writeLog

	mu      sync.Mutex
	changed []types.NamespacedName
}

// startPublisher starts a publisher of the table in namespace ns. It stops
// when the spec ends, or earlier through stop.
func startPublisher(ns string, restoreTimeout time.Duration) (rp *runningPublisher, stop func()) {
	GinkgoHelper()
	return startGatedPublisher(ns, restoreTimeout, nil)
}

// startGatedPublisher is startPublisher whose writes each wait for gate, if
// not nil.
func startGatedPublisher(ns string, restoreTimeout time.Duration, gate chan struct{}) (rp *runningPublisher, stop func()) {
	GinkgoHelper()
	writes := &writeLog{gate: gate, held: make(chan struct{}, 1)}
	return startPublisherWith(ns, ns, restoreTimeout, writes, countingClient(writes))
}

// startPublisherWith is startPublisher writing through c, which logs its
// writes to writes, in a cluster of the ToolSets of namespace toolSets
// (see scopedReader).
func startPublisherWith(ns, toolSets string, restoreTimeout time.Duration, writes *writeLog, c client.Client, configure ...func(*TablePublisher)) (rp *runningPublisher, stop func()) {
	GinkgoHelper()
	rp = &runningPublisher{writes: writes}
	rp.TablePublisher = &TablePublisher{
		Client:         c,
		APIReader:      scopedReader{Reader: k8sClient, namespace: toolSets},
		Namespace:      ns,
		Name:           "tools",
		RestoreTimeout: restoreTimeout,
		// Short, so specs run fast; no spec depends on them.
		Debounce:        10 * time.Millisecond,
		MaxDelay:        100 * time.Millisecond,
		PartGracePeriod: 200 * time.Millisecond,
	}
	for _, f := range configure {
		f(rp.TablePublisher)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() {
		defer GinkgoRecover()
		defer func() { done <- struct{}{} }()
		Expect(rp.Start(ctx)).To(Succeed())
	}()
	go func() {
		defer func() { done <- struct{}{} }()
		for {
			select {
			case ev := <-rp.Changed():
				rp.mu.Lock()
				rp.changed = append(rp.changed, client.ObjectKeyFromObject(ev.Object))
				rp.mu.Unlock()
			case <-ctx.Done():
				return
			}
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
			<-done
		})
	}
	DeferCleanup(stop)
	// Read back before the spec goes on, so that what it creates next is
	// new to the publisher.
	Expect(rp.waitLoaded(ctx)).To(Succeed())
	return rp, stop
}

// newTableGauges returns table gauges of a spec's own, registered nowhere.
func newTableGauges() *tableGauges {
	return &tableGauges{
		tools:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "spec_table_tools"}),
		bytes:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "spec_table_bytes"}),
		jsonBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "spec_table_json_bytes"}),
		parts:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "spec_table_parts"}),
	}
}

// withGauges has a publisher set g rather than the registered gauges, which
// every publisher of the test process sets (the suite manager's too).
func withGauges(g *tableGauges) func(*TablePublisher) {
	return func(p *TablePublisher) { p.gauges = g }
}

// scopedReader lists only the ToolSets of one namespace, so that a spec's
// publisher sees a cluster of the spec's own ToolSets: the publisher waits
// after a restart for every ToolSet it lists, and the suite's other specs
// leave ToolSets that no spec's publisher hears from.
type scopedReader struct {
	client.Reader
	namespace string
}

func (r scopedReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*v1alpha1.ToolSetList); ok {
		opts = append(opts, client.InNamespace(r.namespace))
	}
	return r.Reader.List(ctx, list, opts...)
}

// changedEvents returns the ToolSets told of a change, in order.
func (rp *runningPublisher) changedEvents() []types.NamespacedName {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return slices.Clone(rp.changed)
}

// offer offers tools and returns the owner of each name, as the verdicts
// name it (nobody while it is Pending or denied to every claimant).
func (rp *runningPublisher) offer(ctx context.Context, ts types.NamespacedName, created time.Time, tools ...spec.TableTool) map[string]types.NamespacedName {
	GinkgoHelper()
	verdicts, err := rp.Offer(ctx, Offer{ToolSet: ts, Created: metav1.NewTime(created), Tools: tools})
	Expect(err).NotTo(HaveOccurred())
	owners := make(map[string]types.NamespacedName, len(verdicts))
	for name, v := range verdicts {
		owners[name] = v.Owner
	}
	return owners
}

// entry returns a table entry for a tool served by ts, reachable through a
// Service of the same name.
func entry(ts types.NamespacedName, name, sourceName string) spec.TableTool {
	base := fmt.Sprintf("http://%s.%s.svc:8080", ts.Name, ts.Namespace)
	return spec.TableTool{
		Name:        name,
		SourceName:  sourceName,
		Description: "Does " + sourceName + ".",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
		ToolSet:     spec.ObjectReference{Namespace: ts.Namespace, Name: ts.Name},
		Endpoints:   &spec.Endpoints{Invoke: base + "/tools/" + sourceName, MCP: base + "/mcp"},
	}
}

// bigTableTimeout bounds the wait for a table of thousands of tools, which
// takes seconds to encode and store under the race detector.
const bigTableTimeout = 30 * time.Second

// manyTools returns n distinct tools of ts named prefix_0000 on.
func manyTools(ts types.NamespacedName, prefix string, n int) []spec.TableTool {
	tools := make([]spec.TableTool, n)
	for j := range tools {
		name := fmt.Sprintf("%s_%04d", prefix, j)
		tools[j] = entry(ts, name, name)
		// Digests compress poorly, as the descriptions and schemas of many
		// distinct tools do.
		sum := sha256.Sum256([]byte(name))
		tools[j].Description = "Looks up " + hex.EncodeToString(sum[:]) + " in the catalogue."
	}
	return tools
}

// storedTable reads the table in ns as the API server stores it now, with
// its ConfigMaps.
func storedTable(ctx context.Context, ns string) (*spec.Table, []corev1.ConfigMap, error) {
	var list corev1.ConfigMapList
	if err := k8sClient.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, nil, err
	}
	var parts, ledger []spec.TablePart
	var cms []corev1.ConfigMap
	for _, cm := range list.Items {
		if cm.Name == "kube-root-ca.crt" {
			continue
		}
		part := spec.TablePart{Name: cm.Name, Data: cm.Data, BinaryData: cm.BinaryData}
		// The ledger's chunks are not the table's; they give its entries
		// their owners' UIDs, as to the gateway.
		if _, _, ok := spec.ParseTableLedgerName("tools", cm.Name); ok {
			ledger = append(ledger, part)
			continue
		}
		cms = append(cms, cm)
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		return nil, nil, fmt.Errorf("no table in %s", ns)
	}
	t, err := spec.DecodeTableParts(parts...)
	if err != nil {
		return nil, cms, err
	}
	if _, err := spec.DecodeTableLedgerChunks(t.Tools, "tools", ledger...); err != nil {
		return nil, cms, err
	}
	return t, cms, nil
}

// publishedNames returns name → owner "namespace/name" of the table in ns.
func publishedNames(ctx context.Context, ns string) (map[string]string, error) {
	t, _, err := storedTable(ctx, ns)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(t.Tools))
	for _, tt := range t.Tools {
		out[tt.Name] = tt.ToolSet.String()
	}
	return out, nil
}

var _ = Describe("The table publisher", func() {
	var (
		ns    string
		epoch time.Time
	)
	BeforeEach(func(ctx context.Context) {
		ns = newNamespace(ctx)
		epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	})
	at := func(minutes int) time.Time { return epoch.Add(time.Duration(minutes) * time.Minute) }
	key := func(namespace, name string) types.NamespacedName {
		return types.NamespacedName{Namespace: ns + "-" + namespace, Name: name}
	}

	It("reports the owner to a ToolSet of another namespace that offers the same name", func(ctx context.Context) {
		p, _ := startPublisher(ns, 0)
		weather, travel := key("weather", "weather-tools"), key("travel", "travel-tools")

		Expect(p.offer(ctx, weather, at(5), entry(weather, "get_weather", "get_weather"))).
			To(Equal(map[string]types.NamespacedName{"get_weather": weather}))
		// travel was created earlier, but weather claimed the name first.
		Expect(p.offer(ctx, travel, at(0), entry(travel, "get_weather", "get_weather"), entry(travel, "book_trip", "book_trip"))).
			To(Equal(map[string]types.NamespacedName{"get_weather": weather, "book_trip": travel}))
		Expect(testutil.ToFloat64(conflictsGauge)).To(BeEquivalentTo(1))

		// The loser's other tools are still published.
		Eventually(publishedNames).WithArguments(ctx, ns).Should(Equal(map[string]string{
			"get_weather": weather.String(), "book_trip": travel.String(),
		}))
		Expect(p.changedEvents()).To(BeEmpty(), "nobody's outcome changed through another's action")
	})

	It("keeps the owner's name while it offers its stale tools", func(ctx context.Context) {
		p, _ := startPublisher(ns, 0)
		owner, rival := key("a", "late"), key("b", "early")
		held := entry(owner, "get_weather", "get_weather")
		p.offer(ctx, owner, at(10), held)
		p.offer(ctx, rival, at(0), entry(rival, "get_weather", "get_weather"))

		// The reconciler keeps offering the last good tools through a scrape
		// outage; an earlier-created rival never takes the name meanwhile.
		for range 3 {
			Expect(p.offer(ctx, owner, at(10), held)).To(HaveKeyWithValue("get_weather", owner))
			Expect(p.offer(ctx, rival, at(0), entry(rival, "get_weather", "get_weather"))).To(HaveKeyWithValue("get_weather", owner))
		}
		Eventually(publishedNames).WithArguments(ctx, ns).Should(Equal(map[string]string{"get_weather": owner.String()}))
		Expect(p.changedEvents()).To(BeEmpty())
	})

	DescribeTable("hands a name over to the earliest-created claimant when the owner lets go",
		func(ctx context.Context, letGo func(p *runningPublisher, owner types.NamespacedName)) {
			p, _ := startPublisher(ns, 0)
			owner, later, earlier := key("a", "owner"), key("b", "later"), key("c", "earlier")
			p.offer(ctx, owner, at(30), entry(owner, "x", "x"), entry(owner, "y", "y"))
			p.offer(ctx, later, at(20), entry(later, "x", "x"))
			p.offer(ctx, earlier, at(10), entry(earlier, "x", "x"))
			Eventually(publishedNames).WithArguments(ctx, ns).Should(HaveKeyWithValue("x", owner.String()))

			letGo(p, owner)

			Expect(p.offer(ctx, later, at(20), entry(later, "x", "x"))).To(HaveKeyWithValue("x", earlier))
			Eventually(publishedNames).WithArguments(ctx, ns).Should(HaveKeyWithValue("x", earlier.String()))
			// Both claimants' outcomes changed through the owner's action:
			// one won the name, the other has a new owner to report.
			Eventually(p.changedEvents).Should(ConsistOf(earlier, later))
		},
		Entry("withdrawn", func(p *runningPublisher, owner types.NamespacedName) {
			Expect(p.Withdraw(context.Background(), owner)).To(Succeed())
		}),
		Entry("drops the tool", func(p *runningPublisher, owner types.NamespacedName) {
			Expect(p.offer(context.Background(), owner, at(30), entry(owner, "y", "y"))).
				To(Equal(map[string]types.NamespacedName{"y": owner}))
		}),
		Entry("offers nothing", func(p *runningPublisher, owner types.NamespacedName) {
			Expect(p.offer(context.Background(), owner, at(30))).To(BeEmpty())
		}),
	)

	It("breaks a tie in creation time by namespace, then name", func(ctx context.Context) {
		p, _ := startPublisher(ns, 0)
		owner := key("a", "owner")
		second, first, firstOfNs := key("z", "a"), key("m", "z"), key("m", "y")
		p.offer(ctx, owner, at(0), entry(owner, "x", "x"))
		for _, ts := range []types.NamespacedName{second, first, firstOfNs} {
			p.offer(ctx, ts, at(5), entry(ts, "x", "x"))
		}
		Expect(p.Withdraw(ctx, owner)).To(Succeed())
		Expect(p.offer(ctx, second, at(5), entry(second, "x", "x"))).To(HaveKeyWithValue("x", firstOfNs))

		Expect(p.Withdraw(ctx, firstOfNs)).To(Succeed())
		Expect(p.offer(ctx, second, at(5), entry(second, "x", "x"))).To(HaveKeyWithValue("x", first))
		Eventually(publishedNames).WithArguments(ctx, ns).Should(Equal(map[string]string{"x": first.String()}))
	})

	It("publishes both tools when a prefix resolves a conflict", func(ctx context.Context) {
		p, _ := startPublisher(ns, 0)
		weather, travel := key("weather", "weather-tools"), key("travel", "travel-tools")
		p.offer(ctx, weather, at(0), entry(weather, "get_weather", "get_weather"))
		Expect(p.offer(ctx, travel, at(1), entry(travel, "travel_get_weather", "get_weather"))).
			To(Equal(map[string]types.NamespacedName{"travel_get_weather": travel}))

		Eventually(publishedNames).WithArguments(ctx, ns).Should(Equal(map[string]string{
			"get_weather": weather.String(), "travel_get_weather": travel.String(),
		}))
		t, _, err := storedTable(ctx, ns)
		Expect(err).NotTo(HaveOccurred())
		Expect(t.Tools[1].SourceName).To(Equal("get_weather"))
		Expect(t.Tools[1].Endpoints.Invoke).To(Equal("http://travel-tools." + travel.Namespace + ".svc:8080/tools/get_weather"))
	})

	It("publishes each entry whole, sorted, with its endpoints and the revision over the tools", func(ctx context.Context) {
		gauges := newTableGauges()
		writes := &writeLog{held: make(chan struct{}, 1)}
		p, _ := startPublisherWith(ns, ns, 0, writes, countingClient(writes), withGauges(gauges))
		crm := key("crm", "crm-tools")
		readOnly := true
		query := entry(crm, "crm_query_customer", "query_customer")
		query.Title = "Query customer"
		query.OutputSchema = json.RawMessage(`{"type":"object"}`)
		query.Annotations = &spec.Annotations{ReadOnlyHint: &readOnly}
		query.Meta = map[string]any{spec.MetaCategory: "crm"}
		// The entry names its owner, whatever the offer said.
		query.ToolSet = spec.ObjectReference{Namespace: "elsewhere", Name: "other"}
		noService := entry(crm, "crm_add_note", "add_note")
		noService.Endpoints = nil
		p.offer(ctx, crm, at(0), query, noService)

		var t *spec.Table
		Eventually(func(g Gomega) {
			var err error
			t, _, err = storedTable(ctx, ns)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(t.Tools).To(HaveLen(2))
		}).Should(Succeed())
		query.ToolSet = spec.ObjectReference{Namespace: crm.Namespace, Name: crm.Name}
		noService.ToolSet = query.ToolSet
		want := []spec.TableTool{noService, query}
		Expect(t.SchemaVersion).To(Equal(spec.SchemaVersion))
		Expect(t.Revision).To(Equal(spec.TableRevision(want)))
		got, _ := json.Marshal(t.Tools)
		wantJSON, _ := json.Marshal(want)
		Expect(got).To(MatchJSON(wantJSON))
		Expect(t.Tools[1].Endpoints).To(Equal(&spec.Endpoints{
			Invoke: "http://crm-tools." + crm.Namespace + ".svc:8080/tools/query_customer",
			MCP:    "http://crm-tools." + crm.Namespace + ".svc:8080/mcp",
		}))
		Expect(t.Tools[0].Endpoints).To(BeNil())
		// Set once the write is done, after readers see the table.
		Eventually(func() []float64 {
			return []float64{testutil.ToFloat64(gauges.tools), testutil.ToFloat64(gauges.parts)}
		}).Should(Equal([]float64{2, 1}))
		// A plain table is its JSON, stored as it is.
		_, cms, err := storedTable(ctx, ns)
		Expect(err).NotTo(HaveOccurred())
		Expect(cms).To(HaveLen(1))
		Expect(testutil.ToFloat64(gauges.jsonBytes)).To(BeEquivalentTo(len(cms[0].Data[spec.TableKey])))
		Expect(testutil.ToFloat64(gauges.bytes)).To(BeNumerically(">=", testutil.ToFloat64(gauges.jsonBytes)))
	})

	It("writes byte-identical tables for identical offers, whatever their order", func(ctx context.Context) {
		other := newNamespace(ctx)
		p1, _ := startPublisher(ns, 0)
		p2, _ := startPublisher(other, 0)
		a, b, c := key("a", "a"), key("b", "b"), key("c", "c")
		offers := []Offer{
			{ToolSet: a, Created: metav1.NewTime(at(0)), Tools: []spec.TableTool{entry(a, "x", "x"), entry(a, "y", "y")}},
			{ToolSet: b, Created: metav1.NewTime(at(1)), Tools: []spec.TableTool{entry(b, "z", "z"), entry(b, "b_x", "x")}},
			{ToolSet: c, Created: metav1.NewTime(at(2)), Tools: []spec.TableTool{entry(c, "w", "w")}},
		}
		for _, o := range offers {
			_, err := p1.Offer(ctx, o)
			Expect(err).NotTo(HaveOccurred())
		}
		for _, o := range slices.Backward(offers) {
			// Reversed, tools too.
			o.Tools = slices.Clone(o.Tools)
			slices.Reverse(o.Tools)
			_, err := p2.Offer(ctx, o)
			Expect(err).NotTo(HaveOccurred())
		}
		data := func(ns string) func(g Gomega) string {
			return func(g Gomega) string {
				cm := &corev1.ConfigMap{}
				g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "tools"}, cm)).To(Succeed())
				t, err := spec.DecodeTableParts(spec.TablePart{Data: cm.Data})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(t.Tools).To(HaveLen(5))
				return cm.Data[spec.TableKey]
			}
		}
		var first, second string
		Eventually(func(g Gomega) { first = data(ns)(g) }).Should(Succeed())
		Eventually(func(g Gomega) { second = data(other)(g) }).Should(Succeed())
		Expect(first).To(Equal(second))
	})

	It("does not write in steady state", func(ctx context.Context) {
		p, _ := startPublisher(ns, 0)
		a, b := key("a", "a"), key("b", "b")
		p.offer(ctx, a, at(0), entry(a, "x", "x"))
		p.offer(ctx, b, at(1), entry(b, "x", "x"), entry(b, "y", "y"))
		Eventually(publishedNames).WithArguments(ctx, ns).Should(HaveLen(2))
		writes := p.writes.count()

		// Scrapes repeat the same offers: nothing to write.
		for range 20 {
			p.offer(ctx, a, at(0), entry(a, "x", "x"))
			p.offer(ctx, b, at(1), entry(b, "y", "y"), entry(b, "x", "x"))
		}
		// A real change is written; writes are ordered, so by the time it is
		// visible any write the repeated offers caused would have happened.
		p.offer(ctx, a, at(0), entry(a, "x", "x"), entry(a, "v", "v"))
		Eventually(publishedNames).WithArguments(ctx, ns).Should(HaveKey("v"))
		verbs := func(writes []tableWrite) []string {
			var out []string
			for _, w := range writes {
				out = append(out, w.verb)
			}
			return out
		}
		Expect(verbs(tableOnly(p.writes.all()[writes:]))).To(Equal([]string{"update"}))
		Expect(verbs(ledgerOnly(p.writes.all()[writes:]))).To(Equal([]string{"update"}), "v's record")
	})

	It("coalesces a burst of changes into one write", func(ctx context.Context) {
		gate := make(chan struct{})
		p, _ := startGatedPublisher(ns, 0, gate)
		// The empty table's create waits at the gate while the burst comes.
		Eventually(p.writes.held).Should(Receive())
		a := key("a", "a")
		for i := range 50 {
			p.offer(ctx, a, at(0), manyTools(a, "t", i+1)...)
		}
		close(gate)
		Eventually(publishedNames).WithArguments(ctx, ns).Should(HaveLen(50))
		Expect(tableOnly(p.writes.all())).To(HaveLen(2), "the empty table, then the whole burst")
		Expect(ledgerOnly(p.writes.all())).To(HaveLen(1), "the records of the whole burst")
	})

	It("splits a 10,000-tool table into parts within 512 KiB that read back whole, and cleans up after it shrinks", func(ctx context.Context) {
		gauges := newTableGauges()
		writes := &writeLog{held: make(chan struct{}, 1)}
		p, _ := startPublisherWith(ns, ns, 0, writes, countingClient(writes), withGauges(gauges))
		const toolSets, perToolSet = 20, 500
		for i := range toolSets {
			ts := key("big", fmt.Sprintf("ts-%02d", i))
			p.offer(ctx, ts, at(i), manyTools(ts, fmt.Sprintf("tool_%02d", i), perToolSet)...)
		}

		var cms []corev1.ConfigMap
		// listed is how many writes came before cms was listed, less the
		// one that may be in flight (a write is logged before it is made):
		// a part in its grace may be deleted from then on, before the
		// shrink starts, and a table spread over many parts often has one.
		var listed int
		Eventually(func(g Gomega) {
			listed = max(p.writes.count()-1, 0)
			t, parts, err := storedTable(ctx, ns)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(t.Tools).To(HaveLen(toolSets * perToolSet))
			cms = parts
		}).WithTimeout(bigTableTimeout).Should(Succeed())
		Expect(len(cms)).To(BeNumerically(">", 1), "the table is split")
		dir := GinkgoT().TempDir()
		for _, cm := range cms {
			Expect(cm.Labels).To(HaveKeyWithValue(TableManagedByLabel, "toolplane"))
			size := spec.TablePart{Data: cm.Data, BinaryData: cm.BinaryData}.StoredSize()
			Expect(size).To(BeNumerically("<=", spec.MaxTablePartBytes), cm.Name)
			for k, v := range cm.Data {
				Expect(os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600)).To(Succeed())
			}
			for k, v := range cm.BinaryData {
				Expect(os.WriteFile(filepath.Join(dir, k), v, 0o600)).To(Succeed())
			}
		}
		// As an agent reads it from a projected volume.
		t, err := discovery.ReadDir(dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(t.Tools).To(HaveLen(toolSets * perToolSet))
		Expect(slices.IsSortedFunc(t.Tools, func(a, b spec.TableTool) int { return strings.Compare(a.Name, b.Name) })).To(BeTrue())
		Expect(t.Revision).To(Equal(spec.TableRevision(t.Tools)))
		// The parts the index names: a part it named before may still be
		// stored, in its grace, and holds nothing of this table.
		var base *corev1.ConfigMap
		for i := range cms {
			if cms[i].Name == "tools" {
				base = &cms[i]
			}
		}
		Expect(base).NotTo(BeNil())
		parts := 1 + len(indexedParts(base))
		Expect(parts).To(BeNumerically(">", 1), "the index names parts")
		// Set once the write is done, after readers see the table.
		Eventually(func() []float64 {
			return []float64{testutil.ToFloat64(gauges.tools), testutil.ToFloat64(gauges.parts)}
		}).Should(Equal([]float64{toolSets * perToolSet, float64(parts)}))
		// The JSON the budget counts, as the index says it, not the gzip
		// stored: a ceiling alert on the stored bytes would never fire.
		idx, err := spec.ParseTableIndex([]byte(base.Data[spec.TableIndexKey]))
		Expect(err).NotTo(HaveOccurred())
		Expect(testutil.ToFloat64(gauges.jsonBytes)).To(BeEquivalentTo(idx.Size))
		Expect(testutil.ToFloat64(gauges.jsonBytes)).To(BeNumerically(">", 2*testutil.ToFloat64(gauges.bytes)))

		// Shrinking: the plain table replaces the index, and only then are
		// the parts it no longer names deleted.
		before := p.writes.count()
		for i := range toolSets {
			ts := key("big", fmt.Sprintf("ts-%02d", i))
			if i == 0 {
				p.offer(ctx, ts, at(i), entry(ts, "only", "only"))
				continue
			}
			Expect(p.Withdraw(ctx, ts)).To(Succeed())
		}
		Eventually(func(g Gomega) {
			t, parts, err := storedTable(ctx, ns)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(t.Tools).To(HaveLen(1))
			g.Expect(parts).To(HaveLen(1))
		}).WithTimeout(bigTableTimeout).Should(Succeed())
		// The withdrawals may be flushed in one write or several, as the
		// debounce falls; whatever the split, no part is deleted while the
		// index stored at that moment still names it.
		named := map[string]bool{}
		for _, cm := range cms {
			if cm.Name != "tools" {
				named[cm.Name] = true
			}
		}
		deleted := map[string]bool{}
		for _, w := range p.writes.all()[listed:before] {
			if w.verb == "delete" {
				deleted[w.cm.Name] = true
			}
		}
		var last *corev1.ConfigMap
		for _, w := range p.writes.all()[before:] {
			switch {
			case w.verb == "delete":
				Expect(named).NotTo(HaveKey(w.cm.Name), "a part was deleted while the index named it")
				deleted[w.cm.Name] = true
			case w.cm.Name == "tools":
				last = w.cm
				named = indexedParts(w.cm)
			}
		}
		Expect(last).NotTo(BeNil())
		Expect(last.Data).To(HaveKey(spec.TableKey), "the last index write is the plain table")
		for _, cm := range cms {
			if cm.Name != "tools" {
				Expect(deleted).To(HaveKey(cm.Name), "every leftover part is deleted")
			}
		}
	})

	It("writes the parts of a growing table before the index that names them", func(ctx context.Context) {
		p, _ := startPublisher(ns, 0)
		ts := key("big", "ts")
		p.offer(ctx, ts, at(0), entry(ts, "small", "small"))
		Eventually(publishedNames).WithArguments(ctx, ns).Should(HaveLen(1))
		before := p.writes.count()

		tools := manyTools(ts, "tool", 10000)
		p.offer(ctx, ts, at(0), tools...)
		Eventually(publishedNames).WithArguments(ctx, ns).WithTimeout(bigTableTimeout).Should(HaveLen(len(tools)))
		after := tableOnly(p.writes.all()[before:])
		Expect(len(after)).To(BeNumerically(">", 1))
		for _, w := range after[:len(after)-1] {
			Expect(w.verb).To(Equal("create"))
			Expect(w.cm.Name).NotTo(Equal("tools"))
		}
		last := after[len(after)-1]
		Expect(last.verb).To(Equal("update"))
		Expect(last.cm.Data).To(HaveKey(spec.TableIndexKey))
	})

	It("waits for the table to be read back before answering an offer", func(ctx context.Context) {
		p := &TablePublisher{Client: k8sClient, Namespace: ns, Name: "tools"}
		canceled, cancel := context.WithCancel(ctx)
		cancel()
		_, err := p.Offer(canceled, Offer{ToolSet: key("a", "a"), Tools: []spec.TableTool{entry(key("a", "a"), "x", "x")}})
		Expect(err).To(MatchError(context.Canceled))
		Expect(p.Withdraw(canceled, key("a", "a"))).To(MatchError(context.Canceled))
	})

	It("refuses an offer that names a tool twice", func(ctx context.Context) {
		p, _ := startPublisher(ns, 0)
		a := key("a", "a")
		_, err := p.Offer(ctx, Offer{ToolSet: a, Tools: []spec.TableTool{entry(a, "x", "x"), entry(a, "x", "y")}})
		Expect(err).To(MatchError(ErrInvalidOffer))
	})

	It("denies a reserved name to other namespaces whatever the claim order, and hands it over when a policy comes", func(ctx context.Context) {
		p, _ := startPublisher(ns, 0)
		outsider, payments := key("shop", "shop-tools"), key("payments", "pay-tools")
		p.offer(ctx, outsider, at(0), entry(outsider, "refund", "refund"), entry(outsider, "list", "list"))
		Expect(p.offer(ctx, payments, at(50), entry(payments, "refund", "refund"))).To(HaveKeyWithValue("refund", outsider))

		reserve := []ownership.Policy{{Name: "payments", Names: []string{"refund", "pay_*"}, Namespaces: []string{payments.Namespace}}}
		Expect(p.SetPolicies(ctx, reserve)).To(Succeed())
		Eventually(publishedNames).WithArguments(ctx, ns).Should(Equal(map[string]string{
			"refund": payments.String(), "list": outsider.String(),
		}))
		Eventually(p.changedEvents).Should(ConsistOf(outsider, payments), "both verdicts changed through the policy")
		verdicts, err := p.Offer(ctx, Offer{ToolSet: outsider, Created: metav1.NewTime(at(0)), Tools: []spec.TableTool{
			entry(outsider, "refund", "refund"), entry(outsider, "list", "list"),
		}})
		Expect(err).NotTo(HaveOccurred())
		Expect(verdicts).To(Equal(map[string]ownership.Verdict{
			"refund": {State: ownership.Denied, Owner: payments, Policy: "payments", Reason: "the policy reserves the name for other namespaces"},
			"list":   {State: ownership.Owned, Owner: outsider},
		}))

		// The policy goes: the owner keeps the name, the outsider is only
		// Conflicted again.
		Expect(p.SetPolicies(ctx, nil)).To(Succeed())
		Expect(p.offer(ctx, outsider, at(0), entry(outsider, "refund", "refund"))).To(HaveKeyWithValue("refund", payments))
		Expect(p.SetPolicies(ctx, []ownership.Policy{{Name: "bad", Names: []string{"["}}})).To(MatchError(ContainSubstring("bad")))
	})

	It("denies a name the caller denied before the rule, and the owner loses it", func(ctx context.Context) {
		p, _ := startPublisher(ns, 0)
		a, b := key("a", "a"), key("b", "b")
		p.offer(ctx, a, at(0), entry(a, "x", "x"))
		p.offer(ctx, b, at(5), entry(b, "x", "x"))
		over := ownership.Denial{Policy: "OverBudget", Reason: "more tools than namespace a may publish"}
		verdicts, err := p.Offer(ctx, Offer{ToolSet: a, Created: metav1.NewTime(at(0)), Tools: []spec.TableTool{entry(a, "x", "x")},
			Denied: map[string]ownership.Denial{"x": over}})
		Expect(err).NotTo(HaveOccurred())
		Expect(verdicts).To(HaveKeyWithValue("x", ownership.Verdict{State: ownership.Denied, Owner: b, Policy: over.Policy, Reason: over.Reason}))
		Eventually(publishedNames).WithArguments(ctx, ns).Should(Equal(map[string]string{"x": b.String()}))
		_, err = p.Offer(ctx, Offer{ToolSet: a, Tools: []spec.TableTool{entry(a, "x", "x")}, Denied: map[string]ownership.Denial{"y": over}})
		Expect(err).To(MatchError(ErrInvalidOffer), "a denial of a name not offered")
	})

	Context("across a restart", func() {
		// Real ToolSets: the publisher keeps restored entries only for
		// ToolSets that still exist.
		create := func(ctx context.Context, name string) (types.NamespacedName, time.Time) {
			ts := minimalToolSet(ns, name)
			Expect(k8sClient.Create(ctx, ts)).To(Succeed())
			return client.ObjectKeyFromObject(ts), ts.CreationTimestamp.Time
		}

		It("moves no owner and never publishes a smaller table", func(ctx context.Context) {
			// Started before the ToolSets exist: no restore window of its own.
			p1, stop1 := startPublisher(ns, 0)
			// early is created first, so it would win x in a fresh contest.
			early, earlyAt := create(ctx, "a-early")
			late, lateAt := create(ctx, "b-late")
			quiet, quietAt := create(ctx, "c-quiet")
			gone, goneAt := create(ctx, "d-gone")

			p1.offer(ctx, late, lateAt, entry(late, "x", "x"))
			Expect(p1.offer(ctx, early, earlyAt, entry(early, "x", "x"), entry(early, "e", "e"))).To(HaveKeyWithValue("x", late))
			p1.offer(ctx, quiet, quietAt, entry(quiet, "q", "q"))
			p1.offer(ctx, gone, goneAt, entry(gone, "g", "g"))
			Eventually(publishedNames).WithArguments(ctx, ns).Should(HaveLen(4))
			stop1()
			Expect(k8sClient.Delete(ctx, &v1alpha1.ToolSet{ObjectMeta: metav1.ObjectMeta{Namespace: gone.Namespace, Name: gone.Name}})).To(Succeed())

			// The new leader: the loser offers first, and the owner, the
			// quiet ToolSet, are not scraped yet.
			p2, _ := startPublisher(ns, time.Hour)
			Expect(p2.offer(ctx, early, earlyAt, entry(early, "x", "x"), entry(early, "e", "e"))).To(HaveKeyWithValue("x", late))
			published, err := p2.Published(ctx, quiet)
			Expect(err).NotTo(HaveOccurred())
			Expect(published).To(HaveLen(1))
			Expect(published[0].Name).To(Equal("q"))
			Eventually(publishedNames).WithArguments(ctx, ns).Should(Equal(map[string]string{
				"x": late.String(), "e": early.String(), "q": quiet.String(),
			}), "the deleted ToolSet's entry is dropped, the others are kept")
			Expect(p2.offer(ctx, late, lateAt, entry(late, "x", "x"))).To(HaveKeyWithValue("x", late))
			// A new name is handed out once every ToolSet has been heard
			// from since the restart.
			p2.offer(ctx, quiet, quietAt, entry(quiet, "q", "q"))

			// A change made after the restart shows that every write so far
			// kept every entry of a ToolSet that still exists.
			p2.offer(ctx, late, lateAt, entry(late, "x", "x"), entry(late, "l", "l"))
			Eventually(publishedNames).WithArguments(ctx, ns).Should(HaveKey("l"))
			for _, w := range tableOnly(p2.writes.all()) {
				if w.verb == "delete" {
					continue
				}
				t, err := spec.DecodeTableParts(spec.TablePart{Data: w.cm.Data, BinaryData: w.cm.BinaryData})
				Expect(err).NotTo(HaveOccurred())
				names := make([]string, 0, len(t.Tools))
				for _, tt := range t.Tools {
					names = append(names, tt.Name)
				}
				Expect(names).To(ContainElements("x", "e", "q"))
			}
		})

		It("drops the restored entries of a ToolSet that does not offer within the bound", func(ctx context.Context) {
			// Started before the ToolSets exist: no restore window of its own.
			p1, stop1 := startPublisher(ns, 0)
			owner, ownerAt := create(ctx, "owner")
			rival, rivalAt := create(ctx, "rival")
			p1.offer(ctx, owner, ownerAt, entry(owner, "x", "x"), entry(owner, "o", "o"))
			p1.offer(ctx, rival, rivalAt, entry(rival, "x", "x"))
			Eventually(publishedNames).WithArguments(ctx, ns).Should(HaveKeyWithValue("x", owner.String()))
			stop1()

			p2, _ := startPublisher(ns, time.Second)
			first := p2.offer(ctx, rival, rivalAt, entry(rival, "x", "x"))
			// The owner never offers: once the bound passes, its entries are
			// dropped and the rival takes the name.
			Eventually(publishedNames).WithArguments(ctx, ns).WithTimeout(10 * time.Second).
				Should(Equal(map[string]string{"x": rival.String()}))
			Expect(p2.offer(ctx, rival, rivalAt, entry(rival, "x", "x"))).To(HaveKeyWithValue("x", rival))
			// Offered within the bound (on a loaded machine it may not be),
			// the rival was told the restored owner, and then of the change.
			if first["x"] == owner {
				Eventually(p2.changedEvents).Should(ConsistOf(rival))
			} else {
				Expect(first).To(HaveKeyWithValue("x", rival))
			}
		})

		It("hands a name whose owner went while it was down to the earliest-created claimant, whatever order they offer in", func(ctx context.Context) {
			// Started before the ToolSets exist: no restore window of its own.
			p1, stop1 := startPublisher(ns, 0)
			owner, ownerAt := create(ctx, "owner")
			c1, c1At := create(ctx, "claimant-1")
			c2, c2At := create(ctx, "claimant-2")
			// The rule's order, whatever the clock's resolution made of
			// the creation times.
			first, firstAt, second, secondAt := c1, c1At, c2, c2At
			if ownership.Earlier(c2, c2At, c1, c1At) {
				first, firstAt, second, secondAt = c2, c2At, c1, c1At
			}
			p1.offer(ctx, owner, ownerAt, entry(owner, "x", "x"))
			p1.offer(ctx, second, secondAt, entry(second, "x", "x"))
			p1.offer(ctx, first, firstAt, entry(first, "x", "x"))
			Eventually(publishedNames).WithArguments(ctx, ns).Should(Equal(map[string]string{"x": owner.String()}))
			stop1()
			Expect(k8sClient.Delete(ctx, &v1alpha1.ToolSet{ObjectMeta: metav1.ObjectMeta{Namespace: owner.Namespace, Name: owner.Name}})).To(Succeed())

			// The later claimant is scraped first: the name waits for the
			// other instead of going to whoever comes first.
			p2, _ := startPublisher(ns, time.Hour)
			verdicts, err := p2.Offer(ctx, Offer{ToolSet: second, Created: metav1.NewTime(secondAt), Tools: []spec.TableTool{entry(second, "x", "x")}})
			Expect(err).NotTo(HaveOccurred())
			Expect(verdicts["x"].State).To(Equal(ownership.Pending))
			Expect(verdicts["x"].Owner).To(BeZero())
			Eventually(publishedNames).WithArguments(ctx, ns).Should(BeEmpty(), "the deleted owner's entry goes")

			Expect(p2.offer(ctx, first, firstAt, entry(first, "x", "x"))).To(HaveKeyWithValue("x", first))
			Eventually(publishedNames).WithArguments(ctx, ns).Should(Equal(map[string]string{"x": first.String()}))
			Eventually(p2.changedEvents).Should(ContainElement(second), "the waiting claimant is told the owner")
		})

		It("keeps the restored names of a ToolSet that retains them past the restore window", func(ctx context.Context) {
			// Started before the ToolSets exist: no restore window of its own.
			p1, stop1 := startPublisher(ns, 0)
			a, aAt := create(ctx, "invalid-spec")
			rival, rivalAt := create(ctx, "rival")
			// Never heard from: the restore window ends by its bound.
			create(ctx, "silent")
			p1.offer(ctx, a, aAt, entry(a, "x", "x"))
			p1.offer(ctx, rival, rivalAt, entry(rival, "x", "x"))
			Eventually(publishedNames).WithArguments(ctx, ns).Should(HaveLen(1))
			stop1()

			p2, _ := startPublisher(ns, time.Second)
			// A ToolSet whose spec is invalid is never scraped: it retains
			// what it had.
			verdicts, err := p2.Retain(ctx, a)
			Expect(err).NotTo(HaveOccurred())
			Expect(verdicts).To(Equal(map[string]ownership.Verdict{"x": {State: ownership.Owned, Owner: a}}))
			p2.offer(ctx, rival, rivalAt, entry(rival, "x", "x"))
			Eventually(func() bool {
				p2.TablePublisher.mu.Lock()
				defer p2.TablePublisher.mu.Unlock()
				return p2.restoring()
			}).Should(BeFalse())
			Expect(p2.offer(ctx, rival, rivalAt, entry(rival, "x", "x"))).To(HaveKeyWithValue("x", a))
			Eventually(publishedNames).WithArguments(ctx, ns).Should(Equal(map[string]string{"x": a.String()}))
			Consistently(publishedNames).WithArguments(ctx, ns).WithTimeout(2 * time.Second).Should(Equal(map[string]string{"x": a.String()}))
		})

		It("is ready once it has read the table back and the caches have synced, and starts the restore window only then", func(ctx context.Context) {
			// Started before the ToolSets exist: no restore window of its own.
			p1, stop1 := startPublisher(ns, 0)
			a, aAt := create(ctx, "a")
			p1.offer(ctx, a, aAt, entry(a, "x", "x"))
			Eventually(publishedNames).WithArguments(ctx, ns).Should(HaveLen(1))
			stop1()

			synced := make(chan struct{})
			p2 := &TablePublisher{
				Client: k8sClient, APIReader: scopedReader{Reader: k8sClient, namespace: ns}, Namespace: ns, Name: "tools",
				RestoreTimeout: 100 * time.Millisecond,
				CacheSynced: func(ctx context.Context) bool {
					select {
					case <-synced:
						return true
					case <-ctx.Done():
						return false
					}
				},
			}
			elected := make(chan struct{})
			ready := p2.ReadyzCheck(elected)
			Expect(ready(nil)).To(Succeed(), "a standby is ready: only the leader publishes")
			close(elected)
			Expect(ready(nil)).To(MatchError(ContainSubstring("read back")))

			runCtx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer GinkgoRecover()
				defer close(done)
				Expect(p2.Start(runCtx)).To(Succeed())
			}()
			DeferCleanup(func() { cancel(); <-done })
			Eventually(func() error { return ready(nil) }).Should(MatchError(ContainSubstring("caches")))
			// Far past the restore timeout, but the caches have not synced:
			// a's restored entry is kept.
			Consistently(func(g Gomega) {
				g.Expect(p2.Published(ctx, a)).To(HaveLen(1))
			}).WithTimeout(time.Second).Should(Succeed())

			close(synced)
			Eventually(func() error { return ready(nil) }).Should(Succeed())
			// a never offers: once the window has run from the sync, its
			// entry goes.
			Eventually(func(g Gomega) {
				g.Expect(p2.Published(ctx, a)).To(BeEmpty())
			}).Should(Succeed())
		})

		It("keeps each owner's since and why across a restart, stored beside the table", func(ctx context.Context) {
			// Started before the ToolSets exist: no restore window of its own.
			p1, stop1 := startPublisher(ns, 0)
			a, aAt := create(ctx, "a")
			b, bAt := create(ctx, "b")
			p1.offer(ctx, a, aAt, entry(a, "x", "x"), entry(a, "h", "h"))
			p1.offer(ctx, b, bAt, entry(b, "h", "h"))
			// a lets go of h: it passes to b.
			Expect(p1.offer(ctx, a, aAt, entry(a, "x", "x"))).To(Equal(map[string]types.NamespacedName{"x": a}))
			Eventually(publishedNames).WithArguments(ctx, ns).Should(Equal(map[string]string{"x": a.String(), "h": b.String()}))
			p1.mu.Lock()
			before := maps.Clone(p1.ledger)
			p1.mu.Unlock()
			Expect(before["x"].Why).To(Equal(ownership.Claimed))
			Expect(before["h"].Why).To(Equal(ownership.HandedOver))
			// The records go to the ledger's chunk, apart from the table.
			_, cms, err := storedTable(ctx, ns)
			Expect(err).NotTo(HaveOccurred())
			Expect(cms).NotTo(ContainElement(HaveField("BinaryData", HaveKey(spec.TableLedgerKey))))
			Expect(ledgerConfigMaps(ctx, ns)).To(ConsistOf(SatisfyAll(
				HaveField("Name", spec.TableLedgerName("tools", 0, 1)),
				HaveField("BinaryData", HaveKey(spec.TableLedgerChunkKey)))))
			stop1()

			p2, _ := startPublisher(ns, time.Hour)
			want := func(name string) ownership.Record {
				rec := before[name]
				rec.Since = rec.Since.Truncate(time.Second)
				return rec
			}
			check := func(where string) {
				GinkgoHelper()
				p2.mu.Lock()
				defer p2.mu.Unlock()
				for _, name := range []string{"x", "h"} {
					got := p2.ledger[name]
					Expect(got.Since.Equal(want(name).Since)).To(BeTrue(), "%s: since of %s: %v, want %v", where, name, got.Since, want(name).Since)
					Expect(got.Owner).To(Equal(want(name).Owner), "%s: the owner of %s", where, name)
					Expect(got.Why).To(Equal(want(name).Why), "%s: why %s owns %s", where, got.Owner, name)
				}
			}
			check("read back")
			p2.offer(ctx, b, bAt, entry(b, "h", "h"))
			p2.offer(ctx, a, aAt, entry(a, "x", "x"))
			check("heard from every ToolSet")
			Consistently(func() int { return p2.writes.count() }).WithTimeout(300*time.Millisecond).Should(BeZero(),
				"the table read back, records and all, is what it writes")
		})

		It("reads its own table back unchanged without writing", func(ctx context.Context) {
			// Started before the ToolSets exist: no restore window of its own.
			p1, stop1 := startPublisher(ns, 0)
			a, aAt := create(ctx, "a")
			p1.offer(ctx, a, aAt, entry(a, "x", "x"))
			Eventually(publishedNames).WithArguments(ctx, ns).Should(HaveLen(1))
			stop1()

			p2, _ := startPublisher(ns, time.Hour)
			p2.offer(ctx, a, aAt, entry(a, "x", "x"))
			p2.offer(ctx, a, aAt, entry(a, "x", "x"), entry(a, "y", "y"))
			Eventually(publishedNames).WithArguments(ctx, ns).Should(HaveLen(2))
			// The table's base, and the ledger's chunk with y's record.
			var written []string
			for _, w := range p2.writes.all() {
				written = append(written, w.verb+" "+w.cm.Name)
			}
			Expect(written).To(Equal([]string{"update " + spec.TableLedgerName("tools", 0, 1), "update tools"}), "only the change is written")
		})
	})
})

var _ = Describe("The tool table, end to end", func() {
	// The suite's manager runs the reconciler with the real publisher; every
	// spec shares its table, so tool names carry the spec's namespace.
	lookup := func(ctx context.Context, name string) func(g Gomega) spec.TableTool {
		return func(g Gomega) spec.TableTool {
			t, _, err := storedTable(ctx, tableNamespace)
			g.Expect(err).NotTo(HaveOccurred())
			i := slices.IndexFunc(t.Tools, func(tt spec.TableTool) bool { return tt.Name == name })
			g.Expect(i).NotTo(BeNumerically("<", 0), "%s is published", name)
			return t.Tools[i]
		}
	}

	It("publishes scraped tools with their endpoints, one owner per name, and hands a name over", func(ctx context.Context) {
		weatherNs, travelNs := newNamespace(ctx), newNamespace(ctx)
		shared := "get_weather_" + weatherNs

		w := newWorkload(tool(shared))
		createReadyPod(ctx, weatherNs, "weather-0", map[string]string{"app": "weather"}, w.port())
		weather := toolSet(weatherNs, "weather")
		Expect(k8sClient.Create(ctx, weather)).To(Succeed())
		Eventually(lookup(ctx, shared)).Should(And(
			HaveField("ToolSet", spec.ObjectReference{Namespace: weatherNs, Name: "weather"}),
			HaveField("SourceName", shared),
			HaveField("Endpoints", &spec.Endpoints{
				Invoke: "http://weather." + weatherNs + ".svc.cluster.local:8080/tools/" + shared,
				MCP:    "http://weather." + weatherNs + ".svc.cluster.local:8080/mcp",
			}),
		))

		// In another namespace, one ToolSet exposes the same name and loses
		// it; another publishes it under a prefix.
		t := newWorkload(tool(shared))
		createReadyPod(ctx, travelNs, "rival-0", map[string]string{"app": "rival"}, t.port())
		createReadyPod(ctx, travelNs, "travel-0", map[string]string{"app": "travel"}, t.port())
		rival := toolSet(travelNs, "rival")
		Expect(k8sClient.Create(ctx, rival)).To(Succeed())
		travel := toolSet(travelNs, "travel")
		travel.Spec.Prefix = "travel_"
		Expect(k8sClient.Create(ctx, travel)).To(Succeed())

		Eventually(lookup(ctx, "travel_"+shared)).Should(And(
			HaveField("ToolSet", spec.ObjectReference{Namespace: travelNs, Name: "travel"}),
			HaveField("SourceName", shared),
			HaveField("Endpoints.Invoke", "http://travel."+travelNs+".svc.cluster.local:8080/tools/"+shared),
		))
		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, rival)
			g.Expect(got.Status.Tools).To(ConsistOf(And(toolNamed(shared, v1alpha1.ToolConflicted), HaveField("Owner", weatherNs+"/weather"))))
		}).Should(Succeed())
		Expect(lookup(ctx, shared)(Default)).To(HaveField("ToolSet.Namespace", weatherNs), "the loser does not take the name")

		// The owner goes: the name moves to the remaining claimant, in the
		// table and in its status.
		Expect(k8sClient.Delete(ctx, weather)).To(Succeed())
		Eventually(lookup(ctx, shared)).Should(And(
			HaveField("ToolSet", spec.ObjectReference{Namespace: travelNs, Name: "rival"}),
			HaveField("Endpoints.Invoke", "http://rival."+travelNs+".svc.cluster.local:8080/tools/"+shared),
		))
		Eventually(func(g Gomega) {
			g.Expect(getToolSet(ctx, g, rival).Status.Tools).To(ConsistOf(toolNamed(shared, v1alpha1.ToolPublished)))
		}).Should(Succeed())
	})
})

// indexedParts returns the extra part ConfigMaps that a stored index names;
// none for a plain table.
func indexedParts(index *corev1.ConfigMap) map[string]bool {
	GinkgoHelper()
	named := map[string]bool{}
	raw, ok := index.Data[spec.TableIndexKey]
	if !ok {
		return named
	}
	var idx spec.TableIndex
	Expect(json.Unmarshal([]byte(raw), &idx)).To(Succeed())
	for _, part := range idx.Parts {
		if part.ConfigMap != index.Name {
			named[part.ConfigMap] = true
		}
	}
	return named
}
