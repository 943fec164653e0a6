package controllers

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// toolSet is minimalToolSet scraped every 5s, within 2s, reached through
// a Service of its name.
func toolSet(ns, name string) *v1alpha1.ToolSet {
	ts := minimalToolSet(ns, name)
	ts.Spec.Interval = &metav1.Duration{Duration: 5 * time.Second}
	ts.Spec.Timeout = &metav1.Duration{Duration: 2 * time.Second}
	ts.Spec.Service = &v1alpha1.ServiceReference{Name: name, Port: 8080}
	return ts
}

// createToolSet creates a ToolSet and deletes it when the spec ends, so
// that it stops being scraped in the background of later specs.
func createToolSet(ctx context.Context, ts *v1alpha1.ToolSet) {
	GinkgoHelper()
	Expect(k8sClient.Create(ctx, ts)).To(Succeed())
	DeferCleanup(func(ctx context.Context) {
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, ts))).To(Succeed())
	})
}

func getToolSet(ctx context.Context, g Gomega, ts *v1alpha1.ToolSet) *v1alpha1.ToolSet {
	got := &v1alpha1.ToolSet{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(ts), got)).To(Succeed())
	return got
}

// editToolSet changes ts's spec with edit and updates it, read afresh and
// edited again on a conflict: the manager writes the ToolSet's status at
// any moment (once its table is written, say), and a status write moves
// the object's resourceVersion.
func editToolSet(ctx context.Context, ts *v1alpha1.ToolSet, edit func(*v1alpha1.ToolSet)) {
	GinkgoHelper()
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got := &v1alpha1.ToolSet{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(ts), got); err != nil {
			return err
		}
		edit(got)
		return k8sClient.Update(ctx, got)
	})).To(Succeed())
}

// readyCondition returns the ToolSet's Ready condition, or an empty one.
func readyCondition(ts *v1alpha1.ToolSet) metav1.Condition {
	return condition(ts, v1alpha1.ConditionReady)
}

// toolSetState is what ts's status says now, in a few lines: its
// conditions and its Pods, for the message of a wait that failed.
func toolSetState(ctx context.Context, ts *v1alpha1.ToolSet) string {
	got := &v1alpha1.ToolSet{}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(ts), got); err != nil {
		return "ToolSet " + ts.Namespace + "/" + ts.Name + ": " + err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ToolSet %s/%s: generation %d, observed %d, pods %+v, %d tools in status",
		got.Namespace, got.Name, got.Generation, got.Status.ObservedGeneration, got.Status.Pods, len(got.Status.Tools))
	for _, c := range got.Status.Conditions {
		fmt.Fprintf(&b, "\n  %s=%s %s (%s, generation %d): %s", c.Type, c.Status, c.Reason, c.LastTransitionTime.Format(time.RFC3339), c.ObservedGeneration, c.Message)
	}
	return b.String()
}

func toolNamed(name string, state v1alpha1.ToolState) OmegaMatcher {
	return And(HaveField("Name", name), HaveField("State", state))
}

// publishedThenDown publishes the tools of one Pod through a ToolSet named
// app, then makes the Pod answer 503 and waits until the ToolSet holds its
// tools as Stale.
func publishedThenDown(ctx context.Context, ns, app string, tools ...string) (*workload, *v1alpha1.ToolSet) {
	GinkgoHelper()
	var specs []spec.Tool
	for _, name := range tools {
		specs = append(specs, tool(name))
	}
	w := newWorkload(specs...)
	createReadyPod(ctx, ns, app+"-0", map[string]string{"app": app}, w.port())
	ts := toolSet(ns, app)
	createToolSet(ctx, ts)
	Eventually(func(g Gomega) {
		g.Expect(getToolSet(ctx, g, ts).Status.PublishedTools).To(BeEquivalentTo(len(tools)))
	}).Should(Succeed())
	w.setHandler(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "down", http.StatusServiceUnavailable) })
	Eventually(func(g Gomega) {
		g.Expect(condition(getToolSet(ctx, g, ts), v1alpha1.ConditionStale).Status).To(Equal(metav1.ConditionTrue))
	}).Should(Succeed())
	return w, ts
}

// eventuallyInTable waits until the ToolSet's entries in the stored tool
// table satisfy m, and returns them.
func eventuallyInTable(ctx context.Context, ts *v1alpha1.ToolSet, m OmegaMatcher) []spec.TableTool {
	GinkgoHelper()
	var tools []spec.TableTool
	Eventually(func(g Gomega) {
		tools = tableEntries(ctx, g, client.ObjectKeyFromObject(ts))
		g.Expect(tools).To(m)
	}).Should(Succeed())
	return tools
}

var _ = Describe("The ToolSet reconciler", func() {
	var ns string
	BeforeEach(func(ctx context.Context) { ns = newNamespace(ctx) })

	It("lists the tools, offers them with endpoints and is Ready with observedGeneration", func(ctx context.Context) {
		w := newWorkload(tool("query_customer"), tool("get_order"))
		createReadyPod(ctx, ns, "crm-0", map[string]string{"app": "crm"}, w.port())
		ts := toolSet(ns, "crm")
		createToolSet(ctx, ts)

		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, ts)
			g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
			ready := readyCondition(got)
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonPublished))
			g.Expect(ready.ObservedGeneration).To(Equal(got.Generation))
			g.Expect(got.Status.Tools).To(ConsistOf(
				toolNamed("get_order", v1alpha1.ToolPublished),
				toolNamed("query_customer", v1alpha1.ToolPublished),
			))
			g.Expect(got.Status.PublishedTools).To(BeEquivalentTo(2))
			g.Expect(got.Status.Pods).To(Equal(v1alpha1.PodCounts{Selected: 1, Scraped: 1}))
			g.Expect(got.Status.Revision).To(HavePrefix("sha256:"))
		}).Should(Succeed())

		offered := eventuallyInTable(ctx, ts, HaveLen(2))
		Expect(offered[0].Name).To(Equal("get_order"))
		Expect(offered[0].Endpoints).To(Equal(&spec.Endpoints{
			Invoke: "http://crm." + ns + ".svc.cluster.local:8080/tools/get_order",
			MCP:    "http://crm." + ns + ".svc.cluster.local:8080/mcp",
		}))
		Expect(offered[0].ToolSet).To(Equal(spec.ObjectReference{Namespace: ns, Name: "crm"}))
		Expect(string(offered[0].InputSchema)).To(MatchJSON(tool("get_order").InputSchema))
	})

	It("scrapes a new ready Pod at once, not at the next interval", func(ctx context.Context) {
		w1 := newWorkload(tool("pod_a"))
		createReadyPod(ctx, ns, "p-0", map[string]string{"app": "p"}, w1.port())
		ts := toolSet(ns, "p")
		ts.Spec.Interval = &metav1.Duration{Duration: time.Hour}
		createToolSet(ctx, ts)
		Eventually(func(g Gomega) {
			g.Expect(getToolSet(ctx, g, ts).Status.Pods.Scraped).To(BeEquivalentTo(1))
		}).Should(Succeed())

		w2 := newWorkload(tool("pod_a"))
		createReadyPod(ctx, ns, "p-1", map[string]string{"app": "p"}, w2.port())
		// The interval is an hour: only the Pod watch can get this scrape.
		Eventually(w2.hits.Load).Should(BeNumerically(">=", 1))
		Eventually(func(g Gomega) {
			g.Expect(getToolSet(ctx, g, ts).Status.Pods).To(Equal(v1alpha1.PodCounts{Selected: 2, Scraped: 2}))
		}).Should(Succeed())

		// A Pod that stops being ready, or goes, is let go at once too.
		p1 := &corev1.Pod{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "p-1"}, p1)).To(Succeed())
		setPodReady(ctx, p1, false)
		Eventually(func(g Gomega) {
			g.Expect(getToolSet(ctx, g, ts).Status.Pods).To(Equal(v1alpha1.PodCounts{Selected: 1, Scraped: 1}))
		}).Should(Succeed())
		Expect(k8sClient.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p-0"}})).To(Succeed())
		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, ts)
			g.Expect(got.Status.Pods).To(Equal(v1alpha1.PodCounts{}))
			g.Expect(readyCondition(got).Reason).To(Equal(v1alpha1.ReasonNoPods))
			g.Expect(got.Status.Tools).To(ConsistOf(toolNamed("pod_a", v1alpha1.ToolStale)))
		}).Should(Succeed())
	})

	It("scrapes over https, trusting a CA from a ConfigMap", func(ctx context.Context) {
		doc := encodeDoc(GinkgoT(), tool("tls_a"))
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(doc) }))
		DeferCleanup(srv.Close)
		_, portStr, _ := net.SplitHostPort(srv.Listener.Addr().String())
		port, _ := strconv.Atoi(portStr)
		createReadyPod(ctx, ns, "tls-0", map[string]string{"app": "tls"}, int32(port))
		ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
		Expect(k8sClient.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tools-ca"},
			Data:       map[string]string{"ca.crt": string(ca)},
		})).To(Succeed())

		ts := toolSet(ns, "tls")
		ts.Spec.Scheme = "https"
		ts.Spec.TLS = &v1alpha1.TLSConfig{CA: &v1alpha1.CASource{ConfigMap: &v1alpha1.KeyReference{Name: "tools-ca", Key: "ca.crt"}}}
		createToolSet(ctx, ts)
		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, ts)
			g.Expect(readyCondition(got).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(got.Status.Tools).To(ConsistOf(toolNamed("tls_a", v1alpha1.ToolPublished)))
		}).Should(Succeed())

		// Without the CA the certificate is not trusted, and status says so.
		plain := toolSet(ns, "tls-untrusted")
		plain.Spec.Selector = ts.Spec.Selector
		plain.Spec.Scheme = "https"
		createToolSet(ctx, plain)
		Eventually(func(g Gomega) {
			ready := readyCondition(getToolSet(ctx, g, plain))
			g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonScrapeFailed))
			g.Expect(ready.Message).To(ContainSubstring("certificate"))
		}).Should(Succeed())
	})

	It("refuses a spec no scrape can fix, and says why", func(ctx context.Context) {
		// The API server refuses what it can check (a bad glob, say); what
		// is left, such as a label value Kubernetes would not accept, is
		// refused here.
		ts := toolSet(ns, "glob")
		ts.Spec.Selector.MatchLabels["tier"] = "not a label value"
		createToolSet(ctx, ts)
		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, ts)
			ready := readyCondition(got)
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonInvalidSpec))
			g.Expect(ready.Message).To(ContainSubstring(`spec.selector: values[0][tier]: Invalid value: "not a label value"`))
			g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		}).Should(Succeed())

		// Fixing the spec is what brings it back.
		w := newWorkload(tool("query_glob"))
		createReadyPod(ctx, ns, "glob-0", map[string]string{"app": "glob"}, w.port())
		editToolSet(ctx, ts, func(got *v1alpha1.ToolSet) { delete(got.Spec.Selector.MatchLabels, "tier") })
		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, ts)
			g.Expect(readyCondition(got).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(got.Status.Tools).To(ConsistOf(toolNamed("query_glob", v1alpha1.ToolPublished)))
		}).Should(Succeed())
	})

	It("keeps publishing the tools of a spec that became invalid, and says so", func(ctx context.Context) {
		w := newWorkload(tool("kept_" + ns))
		createReadyPod(ctx, ns, "kept-0", map[string]string{"app": "kept"}, w.port())
		ts := toolSet(ns, "kept")
		createToolSet(ctx, ts)
		eventuallyInTable(ctx, ts, HaveLen(1))

		// The status write that follows the table's may come at any moment.
		editToolSet(ctx, ts, func(got *v1alpha1.ToolSet) { got.Spec.Selector.MatchLabels["tier"] = "not a label value" })
		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, ts)
			ready := readyCondition(got)
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonInvalidSpec))
			g.Expect(ready.Message).To(ContainSubstring("1 tool of the last valid spec still published"))
			g.Expect(got.Status.Tools).To(ConsistOf(And(toolNamed("kept_"+ns, v1alpha1.ToolPublished), HaveField("Reason", retainedReason))))
			g.Expect(got.Status.PublishedTools).To(BeEquivalentTo(1))
		}).Should(Succeed())
		// The table still holds what status says is published.
		eventuallyInTable(ctx, ts, ConsistOf(HaveField("Name", "kept_"+ns)))
	})

	It("says clearly why a failing Pod is not Ready while the manager carries on", func(ctx context.Context) {
		bad := newWorkload()
		bad.setHandler(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) })
		createReadyPod(ctx, ns, "bad-0", map[string]string{"app": "bad"}, bad.port())
		good := newWorkload(tool("good_fine"))
		createReadyPod(ctx, ns, "good-0", map[string]string{"app": "good"}, good.port())
		badTS, goodTS := toolSet(ns, "bad"), toolSet(ns, "good")
		createToolSet(ctx, badTS)
		createToolSet(ctx, goodTS)

		Eventually(func(g Gomega) {
			ready := readyCondition(getToolSet(ctx, g, badTS))
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonScrapeFailed))
			g.Expect(ready.Message).To(ContainSubstring("pod bad-0"))
			g.Expect(ready.Message).To(ContainSubstring("HTTP 500"))
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(readyCondition(getToolSet(ctx, g, goodTS)).Status).To(Equal(metav1.ConditionTrue))
		}).Should(Succeed())
		Expect(meta.IsStatusConditionTrue(getToolSet(ctx, Default, badTS).Status.Conditions, v1alpha1.ConditionDegraded)).To(BeTrue())
	})
})

// eventsFor lists the events recorded about a ToolSet.
func eventsFor(ctx context.Context, g Gomega, ts *v1alpha1.ToolSet) []eventsv1.Event {
	var list eventsv1.EventList
	g.Expect(k8sClient.List(ctx, &list, client.InNamespace(ts.Namespace))).To(Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == ts.Name && e.Regarding.Kind == "ToolSet" {
			out = append(out, e)
		}
	}
	return out
}

func eventReasons(ctx context.Context, g Gomega, ts *v1alpha1.ToolSet) []string {
	var reasons []string
	for _, e := range eventsFor(ctx, g, ts) {
		reasons = append(reasons, e.Reason)
	}
	return reasons
}

// Tool names are cluster-wide, as in a real cluster: each spec serves names
// of its own so that no spec conflicts with another's.
var _ = Describe("The ToolSet reconciler's limits and rules", func() {
	var ns string
	BeforeEach(func(ctx context.Context) { ns = newNamespace(ctx) })

	It("is not held up by a hung server, whose scrape ends at the timeout", func(ctx context.Context) {
		hung := newWorkload()
		var held atomic.Int64 // how long the last hung request was held, in ms
		hung.setHandler(func(_ http.ResponseWriter, r *http.Request) {
			start := time.Now()
			<-r.Context().Done() // only the operator giving up ends it
			held.Store(time.Since(start).Milliseconds())
		})
		createReadyPod(ctx, ns, "hung-0", map[string]string{"app": "hung"}, hung.port())
		hungTS := toolSet(ns, "hung")
		hungTS.Spec.Interval = &metav1.Duration{Duration: 30 * time.Second}
		hungTS.Spec.Timeout = &metav1.Duration{Duration: 8 * time.Second}
		createToolSet(ctx, hungTS)
		Eventually(hung.inflight.Load).Should(BeEquivalentTo(1))

		good := newWorkload(tool("hung_fine"))
		createReadyPod(ctx, ns, "good-0", map[string]string{"app": "good"}, good.port())
		goodTS := toolSet(ns, "good")
		createToolSet(ctx, goodTS)
		Eventually(func(g Gomega) {
			g.Expect(readyCondition(getToolSet(ctx, g, goodTS)).Status).To(Equal(metav1.ConditionTrue))
		}).Should(Succeed())
		Expect(held.Load()).To(BeZero(), "the other ToolSet was published while the hung scrape was still waiting")

		Eventually(func(g Gomega) {
			ready := readyCondition(getToolSet(ctx, g, hungTS))
			g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonScrapeFailed))
			g.Expect(ready.Message).To(ContainSubstring("timed out"))
		}).Should(Succeed())
		Expect(hung.inflight.Load()).To(BeZero())
		// The operator gave up at its timeout: the request was not held
		// for long past it.
		Expect(time.Duration(held.Load()) * time.Millisecond).To(BeNumerically("<", 8*time.Second+3*time.Second))
	})

	DescribeTable("names a document it rejects whole in status",
		func(ctx context.Context, serve http.HandlerFunc, maxTools int32, message, reason string) {
			errorsBefore := testutil.ToFloat64(scrapeErrors.WithLabelValues(reason))
			w := newWorkload()
			w.setHandler(serve)
			createReadyPod(ctx, ns, "w-0", map[string]string{"app": "w"}, w.port())
			ts := toolSet(ns, "w")
			if maxTools > 0 {
				ts.Spec.Limits.MaxTools = maxTools
			}
			createToolSet(ctx, ts)
			Eventually(func(g Gomega) {
				ready := readyCondition(getToolSet(ctx, g, ts))
				g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonScrapeFailed))
				g.Expect(ready.Message).To(ContainSubstring(message))
			}).Should(Succeed())
			Eventually(func(g Gomega) {
				g.Expect(eventReasons(ctx, g, ts)).To(ContainElement(eventScrapeFailed))
			}).Should(Succeed())
			Expect(testutil.ToFloat64(scrapeErrors.WithLabelValues(reason))).To(BeNumerically(">", errorsBefore))
		},
		Entry("a body over --max-response-bytes", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write(bytes.Repeat([]byte(" "), testMaxResponseBytes+1))
		}, int32(0), "more than 65536 bytes (--max-response-bytes)", scrapeErrTooLarge),
		Entry("invalid JSON", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"schemaVersion": "toolplane.io/v1alpha1", "tools": [`))
		}, int32(0), "decoding spec document", scrapeErrDocument),
		Entry("another schema version", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"schemaVersion": "toolplane.io/v9", "tools": []}`))
		}, int32(0), `unsupported schemaVersion "toolplane.io/v9"`, scrapeErrDocument),
		Entry("more tools than limits.maxTools", func(w http.ResponseWriter, _ *http.Request) {
			tools := []spec.Tool{tool("a"), tool("b"), tool("c")}
			_ = json.NewEncoder(w).Encode(spec.Document{SchemaVersion: spec.SchemaVersion, Revision: spec.Revision(tools), Tools: tools})
		}, int32(2), "3 tools, more than limits.maxTools 2", scrapeErrTooMany),
		Entry("a redirect to another host", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://127.0.0.2:1/elsewhere", http.StatusFound)
		}, int32(0), "redirect to another host refused", scrapeErrRedirect),
	)

	It("rejects invalid tools one by one, each with its reason, and publishes the rest", func(ctx context.Context) {
		stringSchema := tool("string_input")
		stringSchema.InputSchema = json.RawMessage(`{"type":"string"}`)
		remoteRef := tool("remote_ref")
		remoteRef.InputSchema = json.RawMessage(`{"type":"object","properties":{"x":{"$ref":"https://schemas.example.com/x.json"}}}`)
		broken := tool("broken_schema")
		broken.InputSchema = json.RawMessage(`{"type":"object","properties":{"x":{"type":7}}}`)
		huge := tool("huge_schema")
		huge.InputSchema = json.RawMessage(`{"type":"object","description":"` + strings.Repeat("x", 400) + `"}`)
		// A toolkit server refuses to serve such tools; a hand-written one is
		// what the operator must not trust.
		w := newHandWrittenWorkload(tool("fine"), tool("bad name!"), stringSchema, remoteRef, broken, huge)
		createReadyPod(ctx, ns, "w-0", map[string]string{"app": "w"}, w.port())
		ts := toolSet(ns, "w")
		ts.Spec.Limits.MaxSchemaBytes = 256
		createToolSet(ctx, ts)

		reason := func(s string) OmegaMatcher { return HaveField("Reason", ContainSubstring(s)) }
		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, ts)
			g.Expect(got.Status.Tools).To(ConsistOf(
				toolNamed("fine", v1alpha1.ToolPublished),
				And(toolNamed("bad name!", v1alpha1.ToolInvalid), reason("does not match")),
				And(toolNamed("string_input", v1alpha1.ToolInvalid), reason(`"type": "object"`)),
				And(toolNamed("remote_ref", v1alpha1.ToolInvalid), reason("external $ref is not allowed")),
				And(toolNamed("broken_schema", v1alpha1.ToolInvalid), reason("does not compile")),
				And(toolNamed("huge_schema", v1alpha1.ToolInvalid), reason("more than limits.maxSchemaBytes 256")),
			))
			g.Expect(readyCondition(got).Status).To(Equal(metav1.ConditionTrue))
			degraded := condition(got, v1alpha1.ConditionDegraded)
			g.Expect(degraded.Reason).To(Equal(v1alpha1.ReasonInvalidTools))
			g.Expect(degraded.Message).To(ContainSubstring("5 tools are invalid"))
		}).Should(Succeed())
		eventuallyInTable(ctx, ts, ConsistOf(HaveField("Name", "fine")))
		// Only the states the ToolSet has tools in have a series. The
		// reconciler sets the gauges once its status write returns, which
		// may be after this spec has seen the status.
		Eventually(func(g Gomega) map[string]float64 { return toolSeries(g, ns, "w") }).
			Should(Equal(map[string]float64{"Invalid": 5, "Published": 1}))
	})

	It("publishes only the tools every ready replica serves, in the majority form, during a rollout", func(ctx context.Context) {
		oldA := tool("roll_a")
		newA := tool("roll_a")
		newA.Description = "The new a."
		w0 := newWorkload(oldA, tool("roll_b"))
		w1 := newWorkload(oldA, tool("roll_b"))
		w2 := newWorkload(newA, tool("roll_c"))
		for i, w := range []*workload{w0, w1, w2} {
			createReadyPod(ctx, ns, fmt.Sprintf("r-%d", i), map[string]string{"app": "r"}, w.port())
		}
		ts := toolSet(ns, "r")
		createToolSet(ctx, ts)

		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, ts)
			g.Expect(got.Status.Tools).To(ConsistOf(
				toolNamed("roll_a", v1alpha1.ToolPublished),
				And(toolNamed("roll_b", v1alpha1.ToolSkewed), HaveField("Reason", ContainSubstring("served by 2 of 3"))),
				And(toolNamed("roll_c", v1alpha1.ToolSkewed), HaveField("Reason", ContainSubstring("served by 1 of 3"))),
			))
			degraded := condition(got, v1alpha1.ConditionDegraded)
			g.Expect(degraded.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(degraded.Reason).To(Equal(v1alpha1.ReasonRolloutSkew))
			g.Expect(degraded.Message).To(ContainSubstring("2 revisions"))
			g.Expect(got.Status.Revision).To(Equal(w0.revision()))
		}).Should(Succeed())
		offered := eventuallyInTable(ctx, ts, HaveLen(1))
		Expect(offered[0].Description).To(Equal(oldA.Description))

		// The rollout completes: every replica serves the new tools.
		w0.setTools(newA, tool("roll_c"))
		w1.setTools(newA, tool("roll_c"))
		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, ts)
			g.Expect(got.Status.Tools).To(ConsistOf(toolNamed("roll_a", v1alpha1.ToolPublished), toolNamed("roll_c", v1alpha1.ToolPublished)))
			g.Expect(condition(got, v1alpha1.ConditionDegraded).Status).To(Equal(metav1.ConditionFalse))
		}).Should(Succeed())
		eventuallyInTable(ctx, ts, ContainElement(And(HaveField("Name", "roll_a"), HaveField("Description", newA.Description))))
	})

	It("counts a ready replica whose scrape fails with its last document, and one never scraped as serving nothing", func(ctx context.Context) {
		full := newWorkload(tool("sk_x"), tool("sk_y"))
		partial := newWorkload(tool("sk_x"))
		createReadyPod(ctx, ns, "sk-0", map[string]string{"app": "sk"}, full.port())
		createReadyPod(ctx, ns, "sk-1", map[string]string{"app": "sk"}, partial.port())
		ts := toolSet(ns, "sk")
		createToolSet(ctx, ts)
		skewed := func(name, reason string) OmegaMatcher {
			return And(toolNamed(name, v1alpha1.ToolSkewed), HaveField("Reason", ContainSubstring(reason)))
		}
		Eventually(func(g Gomega) {
			g.Expect(getToolSet(ctx, g, ts).Status.Tools).To(ConsistOf(
				toolNamed("sk_x", v1alpha1.ToolPublished), skewed("sk_y", "served by 1 of 2 ready Pods")))
		}).Should(Succeed())

		// The replica that lacks sk_y stays ready but stops answering: it
		// still lacks sk_y as far as anyone knows.
		partial.setHandler(func(rw http.ResponseWriter, _ *http.Request) { http.Error(rw, "down", http.StatusInternalServerError) })
		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, ts)
			g.Expect(got.Status.Pods.Failed).To(BeEquivalentTo(1))
			g.Expect(got.Status.Tools).To(ConsistOf(
				toolNamed("sk_x", v1alpha1.ToolPublished), skewed("sk_y", "served by 1 of 2 ready Pods")))
		}).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(getToolSet(ctx, g, ts).Status.Tools).To(ContainElement(toolNamed("sk_y", v1alpha1.ToolSkewed)))
		}).WithTimeout(6 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		eventuallyInTable(ctx, ts, ConsistOf(HaveField("Name", "sk_x")))

		// A ready replica that was never scraped may lack any tool.
		never := newWorkload()
		never.setHandler(func(rw http.ResponseWriter, _ *http.Request) { http.Error(rw, "down", http.StatusInternalServerError) })
		blind := createReadyPod(ctx, ns, "sk-2", map[string]string{"app": "sk"}, never.port())
		Eventually(func(g Gomega) {
			g.Expect(getToolSet(ctx, g, ts).Status.Tools).To(ConsistOf(
				skewed("sk_x", "1 Pod never scraped"), skewed("sk_y", "served by 1 of 3 ready Pods")))
		}).Should(Succeed())
		eventuallyInTable(ctx, ts, BeEmpty())

		setPodReady(ctx, blind, false)
		Eventually(func(g Gomega) {
			g.Expect(getToolSet(ctx, g, ts).Status.Tools).To(ContainElement(toolNamed("sk_x", v1alpha1.ToolPublished)))
		}).Should(Succeed())
	})

	It("holds the last good tools as Stale through an outage, then drops them", func(ctx context.Context) {
		w, ts := publishedThenDown(ctx, ns, "s", "stale_a", "stale_b")
		got := getToolSet(ctx, Default, ts)
		Expect(got.Status.Tools).To(ConsistOf(toolNamed("stale_a", v1alpha1.ToolStale), toolNamed("stale_b", v1alpha1.ToolStale)))
		Expect(condition(got, v1alpha1.ConditionStale).Reason).To(Equal(v1alpha1.ReasonToolsStale))
		Expect(readyCondition(got).Reason).To(Equal(v1alpha1.ReasonScrapeFailed))
		Expect(publisher.Published(ctx, client.ObjectKeyFromObject(ts))).To(HaveLen(2), "held tools stay in the table")
		Eventually(func(g Gomega) map[string]float64 { return toolSeries(g, ns, "s") }).
			Should(Equal(map[string]float64{"Stale": 2}))

		// Three intervals of 5s later the held tools go.
		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, ts)
			g.Expect(got.Status.Tools).To(BeEmpty())
			stale := condition(got, v1alpha1.ConditionStale)
			g.Expect(stale.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(stale.Reason).To(Equal(v1alpha1.ReasonToolsDropped))
			g.Expect(toolSeries(g, ns, "s")).To(BeEmpty(), "no tools, no series")
		}).WithTimeout(40 * time.Second).Should(Succeed())
		eventuallyInTable(ctx, ts, BeEmpty())
		Eventually(func(g Gomega) {
			g.Expect(eventReasons(ctx, g, ts)).To(ContainElements(eventToolsStale, eventToolsDropped, eventScrapeFailed))
		}).Should(Succeed())

		w.setHandler(nil)
		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, ts)
			g.Expect(got.Status.PublishedTools).To(BeEquivalentTo(2))
			g.Expect(condition(got, v1alpha1.ConditionStale).Reason).To(Equal(v1alpha1.ReasonHealthy))
			g.Expect(eventReasons(ctx, g, ts)).To(ContainElement(eventScrapeRecovered))
			g.Expect(toolSeries(g, ns, "s")).To(Equal(map[string]float64{"Published": 2}))
		}).Should(Succeed())
	})

	It("holds the tools through an outage that spans an operator restart", func(ctx context.Context) {
		_, ts := publishedThenDown(ctx, ns, "rs", "restart_a", "restart_b")

		// A reconciler that remembers nothing, as after a restart, with the
		// publisher that read the table back.
		restarted := &ToolSetReconciler{Client: k8sClient, APIReader: k8sClient, Recorder: &events.FakeRecorder{}, Publisher: publisher}
		res, err := restarted.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ts)})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.RequeueAfter).To(BeNumerically(">", 0))
		Expect(res.RequeueAfter).To(BeNumerically("<=", 5*time.Second))
		Expect(publisher.Published(ctx, client.ObjectKeyFromObject(ts))).To(HaveLen(2), "the held tools were not dropped")
		got := getToolSet(ctx, Default, ts)
		Expect(got.Status.Tools).To(ConsistOf(toolNamed("restart_a", v1alpha1.ToolStale), toolNamed("restart_b", v1alpha1.ToolStale)))
	})

	It("neither patches nor announces a transition twice when the cache has not caught up with its status write", func(ctx context.Context) {
		ts := toolSet(ns, "lag")
		ts.Spec.Selector.MatchLabels["tier"] = "not a label value"
		createToolSet(ctx, ts)
		// A cache that lags: every read returns the object as created,
		// whatever was written since.
		created := ts.DeepCopy()
		var patches int
		caughtUp := false
		direct, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		lagging := interceptor.NewClient(direct, interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if got, ok := obj.(*v1alpha1.ToolSet); ok && key == client.ObjectKeyFromObject(created) && !caughtUp {
					created.DeepCopyInto(got)
					return nil
				}
				return c.Get(ctx, key, obj, opts...)
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				patches++
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		})
		recorder := events.NewFakeRecorder(10)
		r := &ToolSetReconciler{Client: lagging, APIReader: k8sClient, Recorder: recorder, Publisher: publisher}
		req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ts)}
		_, err = r.Reconcile(ctx, req)
		Expect(err).To(MatchError(ContainSubstring("spec.selector")))
		for i := range maxCacheLagRetries {
			// The object read predates the write: the round waits for the
			// cache instead of computing the status against it, longer
			// each time.
			res, err := r.Reconcile(ctx, req)
			Expect(err).NotTo(HaveOccurred())
			Expect(res.RequeueAfter).To(Equal(cacheLagRetry << i))
		}
		Expect(patches).To(Equal(1), "one status write, however often the stale object is read")
		Expect(recorder.Events).To(HaveLen(1), "one InvalidSpec event")
		Expect(<-recorder.Events).To(ContainSubstring(eventInvalidSpec))

		// Behind for seconds: the round reads the object from the API
		// server, and finds nothing to write or announce, round after
		// round while the cache stays behind.
		for range 2 {
			_, err = r.Reconcile(ctx, req)
			Expect(err).To(MatchError(ContainSubstring("spec.selector")))
		}
		Expect(patches).To(Equal(1))
		Expect(recorder.Events).To(BeEmpty())

		// The spec changes while the cache is behind: the round read past
		// it writes the status over the new object, and the object the
		// cache still shows stays stale; the next round writes nothing.
		current := &v1alpha1.ToolSet{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(ts), current)).To(Succeed())
		current.Spec.Interval = &metav1.Duration{Duration: 47 * time.Second}
		Expect(k8sClient.Update(ctx, current)).To(Succeed())
		_, err = r.Reconcile(ctx, req)
		Expect(err).To(MatchError(ContainSubstring("spec.selector")))
		// The suite's manager reconciles this ToolSet too, and may have
		// written the new generation's status first (CI, 2026-12-06):
		// then this round finds nothing to write. Either way the status
		// observes the new generation, written once by this reconciler
		// at most.
		Expect(patches).To(BeNumerically("<=", 2))
		Expect(getToolSet(ctx, Default, ts).Status.ObservedGeneration).To(Equal(current.Generation), "the new generation observed")
		written := patches
		for len(recorder.Events) > 0 {
			<-recorder.Events
		}
		_, err = r.Reconcile(ctx, req)
		Expect(err).To(MatchError(ContainSubstring("spec.selector")))
		Expect(patches).To(Equal(written), "the object the cache shows predates both writes")
		Expect(recorder.Events).To(BeEmpty())

		// Once the cache shows the write, the round runs on it.
		caughtUp = true
		_, err = r.Reconcile(ctx, req)
		Expect(err).To(MatchError(ContainSubstring("spec.selector")))
		Expect(patches).To(Equal(written))
		Expect(recorder.Events).To(BeEmpty())
	})

	It("applies prefix, include and exclude", func(ctx context.Context) {
		w := newWorkload(tool("query_customer"), tool("get_order"), tool("get_secret"), tool("delete_all"))
		createReadyPod(ctx, ns, "f-0", map[string]string{"app": "f"}, w.port())
		ts := toolSet(ns, "f")
		ts.Spec.Prefix = "crm_"
		ts.Spec.Include = []string{"query_*", "get_*"}
		ts.Spec.Exclude = []string{"get_secret"}
		createToolSet(ctx, ts)

		Eventually(func(g Gomega) {
			g.Expect(getToolSet(ctx, g, ts).Status.Tools).To(ConsistOf(
				And(toolNamed("crm_query_customer", v1alpha1.ToolPublished), HaveField("SourceName", "query_customer")),
				toolNamed("crm_get_order", v1alpha1.ToolPublished),
				And(toolNamed("crm_get_secret", v1alpha1.ToolFiltered), HaveField("Reason", ContainSubstring(`spec.exclude pattern "get_secret"`))),
				And(toolNamed("crm_delete_all", v1alpha1.ToolFiltered), HaveField("Reason", "matches no spec.include pattern")),
			))
		}).Should(Succeed())
		offered := eventuallyInTable(ctx, ts, HaveLen(2))
		Expect(offered[0].Name).To(Equal("crm_get_order"))
		Expect(offered[0].SourceName).To(Equal("get_order"))
		Expect(offered[0].Endpoints.Invoke).To(HaveSuffix("/tools/get_order"))
	})

	It("never scrapes a Pod in another namespace", func(ctx context.Context) {
		other := newNamespace(ctx)
		foreign := newWorkload(tool("foreign"))
		createReadyPod(ctx, other, "x-0", map[string]string{"app": "x"}, foreign.port())
		own := newWorkload(tool("own"))
		createReadyPod(ctx, ns, "x-0", map[string]string{"app": "x"}, own.port())
		ts := toolSet(ns, "x")
		createToolSet(ctx, ts)

		Eventually(func(g Gomega) {
			g.Expect(getToolSet(ctx, g, ts).Status.Tools).To(ConsistOf(toolNamed("own", v1alpha1.ToolPublished)))
		}).Should(Succeed())
		// Wait for a second round, at the interval, before looking.
		Eventually(own.hits.Load).Should(BeNumerically(">=", 2))
		Expect(foreign.hits.Load()).To(BeZero())
	})

	It("sends the bearer token from a Secret and never shows it in status, events or logs", func(ctx context.Context) {
		const token = "tok-3b1f9c2e-never-show-me"
		w := newTLSWorkload(tool("private"))
		w.requireToken(token)
		createReadyPod(ctx, ns, "bearer-0", map[string]string{"app": "bearer"}, w.port())
		ts := toolSet(ns, "bearer")
		ts.Spec.Scheme = "https"
		ts.Spec.TLS = &v1alpha1.TLSConfig{InsecureSkipVerify: true}
		ts.Spec.Authorization = &v1alpha1.Authorization{BearerToken: v1alpha1.KeyReference{Name: "scrape-token", Key: "token"}}
		createToolSet(ctx, ts)

		// Without the Secret the user is told what is missing.
		Eventually(func(g Gomega) {
			ready := readyCondition(getToolSet(ctx, g, ts))
			g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonSecretNotFound))
			g.Expect(ready.Message).To(ContainSubstring("Secret scrape-token not found"))
		}).Should(Succeed())

		// A wrong token is refused by the workload, and not shown either.
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scrape-token"},
			Data:       map[string][]byte{"token": []byte("wrong-" + token)},
		}
		Expect(k8sClient.Create(ctx, secret)).To(Succeed())
		Eventually(func(g Gomega) {
			ready := readyCondition(getToolSet(ctx, g, ts))
			g.Expect(ready.Message).To(ContainSubstring("HTTP 401"))
		}).Should(Succeed())

		secret.Data["token"] = []byte(token + "\n")
		Expect(k8sClient.Update(ctx, secret)).To(Succeed())
		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, ts)
			g.Expect(readyCondition(got).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(got.Status.Tools).To(ConsistOf(toolNamed("private", v1alpha1.ToolPublished)))
		}).Should(Succeed())
		Expect(w.authHeaders()).To(ContainElement("Bearer " + token))

		got := getToolSet(ctx, Default, ts)
		raw, err := json.Marshal(got)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(raw)).NotTo(ContainSubstring(token))
		Eventually(func(g Gomega) {
			g.Expect(eventsFor(ctx, g, ts)).NotTo(BeEmpty())
		}).Should(Succeed())
		for _, e := range eventsFor(ctx, Default, ts) {
			Expect(e.Note).NotTo(ContainSubstring(token))
		}
		// The guard below means something only if the log holds the lines
		// that could have leaked the token: this ToolSet's failed scrapes,
		// logged at V(1) with the error the workload gave.
		var scrapeLines []string
		for _, line := range strings.Split(managerLog.String(), "\n") {
			if strings.Contains(line, "Scrape failed") && strings.Contains(line, `"namespace": "`+ns+`"`) && strings.Contains(line, `"name": "bearer"`) {
				scrapeLines = append(scrapeLines, line)
			}
		}
		Expect(scrapeLines).To(ContainElement(ContainSubstring("HTTP 401")), "the manager's log holds this ToolSet's failed scrapes")
		Expect(managerLog.String()).NotTo(ContainSubstring(token))
	})

	It("writes nothing while nothing changes, scrape after scrape", func(ctx context.Context) {
		w := newWorkload(tool("steady"))
		createReadyPod(ctx, ns, "z-0", map[string]string{"app": "z"}, w.port())
		ts := toolSet(ns, "z")
		createToolSet(ctx, ts)
		Eventually(func(g Gomega) {
			g.Expect(readyCondition(getToolSet(ctx, g, ts)).Status).To(Equal(metav1.ConditionTrue))
		}).Should(Succeed())
		// Let the Publisher's hand-over and the first events settle.
		Eventually(w.hits.Load).Should(BeNumerically(">=", 2))

		before := getToolSet(ctx, Default, ts)
		hits, notModified := w.hits.Load(), w.notModified.Load()
		Eventually(w.hits.Load).WithTimeout(40 * time.Second).Should(BeNumerically(">=", hits+3))
		after := getToolSet(ctx, Default, ts)
		Expect(after.ResourceVersion).To(Equal(before.ResourceVersion), "no status write over 3 scrapes")
		Expect(after.Status).To(Equal(before.Status))
		Expect(w.notModified.Load()).To(BeNumerically(">=", notModified+3), "an unchanged document costs a 304")
	})

	It("marks names another ToolSet owns Conflicted, and takes them over when it goes", func(ctx context.Context) {
		other := newNamespace(ctx)
		w1 := newWorkload(tool("shared"), tool("mine"))
		createReadyPod(ctx, other, "first-0", map[string]string{"app": "first"}, w1.port())
		first := toolSet(other, "first")
		createToolSet(ctx, first)
		Eventually(func(g Gomega) {
			g.Expect(getToolSet(ctx, g, first).Status.PublishedTools).To(BeEquivalentTo(2))
		}).Should(Succeed())

		w2 := newWorkload(tool("shared"))
		createReadyPod(ctx, ns, "second-0", map[string]string{"app": "second"}, w2.port())
		second := toolSet(ns, "second")
		createToolSet(ctx, second)
		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, second)
			g.Expect(got.Status.Tools).To(ConsistOf(And(toolNamed("shared", v1alpha1.ToolConflicted), HaveField("Owner", other+"/first"))))
			g.Expect(got.Status.ConflictedTools).To(BeEquivalentTo(1))
			conflicted := condition(got, v1alpha1.ConditionConflicted)
			g.Expect(conflicted.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(conflicted.Message).To(ContainSubstring(other + "/first"))
			g.Expect(eventReasons(ctx, g, second)).To(ContainElement(eventConflictLost))
		}).Should(Succeed())

		Expect(k8sClient.Delete(ctx, first)).To(Succeed())
		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, second)
			g.Expect(got.Status.Tools).To(ConsistOf(toolNamed("shared", v1alpha1.ToolPublished)))
			g.Expect(condition(got, v1alpha1.ConditionConflicted).Status).To(Equal(metav1.ConditionFalse))
			g.Expect(eventReasons(ctx, g, second)).To(ContainElement(eventConflictWon))
		}).Should(Succeed())
		eventuallyInTable(ctx, first, BeEmpty())
		eventuallyInTable(ctx, second, ConsistOf(HaveField("Name", "shared")))
	})

	It("says agents have no endpoint when spec.service is not set", func(ctx context.Context) {
		w := newWorkload(tool("nosvc_a"))
		createReadyPod(ctx, ns, "n-0", map[string]string{"app": "n"}, w.port())
		ts := toolSet(ns, "n")
		ts.Spec.Service = nil
		createToolSet(ctx, ts)
		Eventually(func(g Gomega) {
			ready := readyCondition(getToolSet(ctx, g, ts))
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonNoService))
			g.Expect(ready.Message).To(ContainSubstring("agents have no endpoint"))
		}).Should(Succeed())
		offered := eventuallyInTable(ctx, ts, HaveLen(1))
		Expect(offered[0].Endpoints).To(BeNil())
	})
})

var _ = Describe("The ToolSet reconciler under hostile tenants", func() {
	It("is not stalled by eight ToolSets whose Pods never answer, with the longest timeout allowed", func(ctx context.Context) {
		// All eight in one namespace, so that the spec also shows one
		// namespace holding no more than its share of the scrape slots.
		hungNs := newNamespace(ctx)
		release := make(chan struct{})
		var inflight, most atomic.Int64
		hang := func(_ http.ResponseWriter, r *http.Request) {
			n := inflight.Add(1)
			defer inflight.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}
		for i := range 8 {
			w := newWorkload()
			w.setHandler(hang)
			app := fmt.Sprintf("hung-%d", i)
			createReadyPod(ctx, hungNs, app+"-0", map[string]string{"app": app}, w.port())
			ts := toolSet(hungNs, app)
			// Far past the ceiling, which clamps it to 30s.
			ts.Spec.Interval = &metav1.Duration{Duration: time.Hour}
			ts.Spec.Timeout = &metav1.Duration{Duration: time.Hour}
			createToolSet(ctx, ts)
		}
		DeferCleanup(func() { close(release) }) // before the servers close
		Eventually(inflight.Load).Should(BeEquivalentTo(testScrapesPerNamespace))

		ns := newNamespace(ctx)
		good := newWorkload(tool("still_served"))
		createReadyPod(ctx, ns, "good-0", map[string]string{"app": "good"}, good.port())
		goodTS := toolSet(ns, "good")
		goodTS.Spec.Limits.MaxSchemaBytes = 1 << 20 // past the ceiling too
		createToolSet(ctx, goodTS)
		// Its own interval (5s) plus a few seconds, while every hung scrape
		// still hangs.
		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, goodTS)
			g.Expect(readyCondition(got).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(got.Status.Tools).To(ConsistOf(toolNamed("still_served", v1alpha1.ToolPublished)))
		}).WithTimeout(5*time.Second + 15*time.Second).Should(Succeed())
		Expect(inflight.Load()).To(BeEquivalentTo(testScrapesPerNamespace), "the hung scrapes were still hanging")
		Expect(most.Load()).To(BeEquivalentTo(testScrapesPerNamespace), "one namespace never held more than its share of the slots")

		clamped := condition(getToolSet(ctx, Default, goodTS), v1alpha1.ConditionClamped)
		Expect(clamped.Status).To(Equal(metav1.ConditionTrue))
		Expect(clamped.Reason).To(Equal(v1alpha1.ReasonCeilingApplied))
		Expect(clamped.Message).To(ContainSubstring("spec.limits.maxSchemaBytes 1048576 lowered to the ceiling 262144 (--max-schema-bytes)"))
	})
})
