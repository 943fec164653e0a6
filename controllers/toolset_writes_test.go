package controllers

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolplane/toolplane/api/v1alpha1"
)

// statusWrites counts the status writes the manager logged for a ToolSet:
// patchStatus logs one line for each write that succeeded.
func statusWrites(ts *v1alpha1.ToolSet) int {
	n := 0
	for _, line := range strings.Split(managerLog.String(), "\n") {
		if strings.Contains(line, "Updated status") && strings.Contains(line, `"namespace": "`+ts.Namespace+`"`) &&
			strings.Contains(line, `"name": "`+ts.Name+`"`) {
			n++
		}
	}
	return n
}

var _ = Describe("The ToolSet reconciler's API writes", func() {
	var ns string
	BeforeEach(func(ctx context.Context) { ns = newNamespace(ctx) })

	It("publishes a new ToolSet with one status write, once the table has its tools, and no event, and announces a later change once, with one write", func(ctx context.Context) {
		// Until the manager knows the policies, new names are Pending, and
		// a ToolSet's first status says so: wait, as a running manager has.
		Eventually(func() bool {
			publisher.mu.Lock()
			defer publisher.mu.Unlock()
			return publisher.policiesSet && !publisher.restoring()
		}).Should(BeTrue())
		w := newWorkload(tool("once_a"))
		createReadyPod(ctx, ns, "once-0", map[string]string{"app": "once"}, w.port())
		ts := toolSet(ns, "once")
		createToolSet(ctx, ts)
		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, ts)
			g.Expect(readyCondition(got).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(got.Status.PublishedTools).To(BeEquivalentTo(1))
		}).Should(Succeed())
		eventuallyInTable(ctx, ts, HaveLen(1))
		// Rounds go on after the publish, and the table's write comes back
		// to the ToolSet as a Changed event: none of it writes again.
		hits := w.hits.Load()
		Eventually(w.hits.Load).Should(BeNumerically(">=", hits+1))
		Expect(statusWrites(ts)).To(Equal(1), "the first publish costs one status write, Published once the table is written: the interim Pending (AwaitingWrite) is not written while the write is due")

		w.setTools(tool("once_a"), tool("once_b"))
		Eventually(func(g Gomega) {
			g.Expect(eventReasons(ctx, g, ts)).To(ContainElement(eventToolsChanged))
		}).Should(Succeed())
		hits = w.hits.Load()
		Eventually(w.hits.Load).Should(BeNumerically(">=", hits+2))
		// Events are recorded in order: had the first publish emitted one,
		// it would be listed by now, before the change's.
		Expect(eventReasons(ctx, Default, ts)).To(Equal([]string{eventToolsChanged}), "one event, for the change")
		for _, e := range eventsFor(ctx, Default, ts) {
			Expect(e.Series).To(BeNil(), "the change was announced once, not repeated as a series")
		}
		Expect(statusWrites(ts)).To(Equal(2), "the change costs one status write, as the first publish")
	})

	It("patches the status alone, and takes back only the object's metadata, whose resourceVersion it keeps", func(ctx context.Context) {
		w := newWorkload(tool("meta_a"))
		createReadyPod(ctx, ns, "meta-0", map[string]string{"app": "meta"}, w.port())
		ts := toolSet(ns, "meta")
		createToolSet(ctx, ts)
		Eventually(func(g Gomega) {
			g.Expect(readyCondition(getToolSet(ctx, g, ts)).Status).To(Equal(metav1.ConditionTrue))
		}).Should(Succeed())
		patches := statusPatches.of(ts)
		Expect(patches).NotTo(BeEmpty())
		for _, p := range patches {
			var members map[string]json.RawMessage
			Expect(json.Unmarshal(p.body, &members)).To(Succeed())
			Expect(slices.Collect(maps.Keys(members))).To(ConsistOf("status"), "a merge patch of the status alone, not of the whole object: %s", p.body)
			// A ToolSet, a custom resource, is only ever sent as JSON; its
			// metadata, meta.k8s.io's PartialObjectMetadata, is sent as
			// protobuf if asked so, as the metadata client does.
			Expect(p.contentType).To(Equal("application/vnd.kubernetes.protobuf"), "the API server answers with the object's metadata, not the whole object")
			Expect(string(p.answer)).To(ContainSubstring("PartialObjectMetadata"))
			Expect(string(p.answer)).NotTo(ContainSubstring(v1alpha1.ReasonPublished), "the answer holds no status")
		}
		// The next round reads the cache, which has the write: had the
		// reconciler not kept the new resourceVersion, it would take the
		// cache for one behind its write (writtenStatus.lags) every time.
		w.setTools(tool("meta_a"), tool("meta_b"))
		Eventually(func(g Gomega) {
			g.Expect(getToolSet(ctx, g, ts).Status.PublishedTools).To(BeEquivalentTo(2))
		}).Should(Succeed())
		Expect(statusWrites(ts)).To(Equal(2))
	})

	It("comes back up to a tenth of the interval early, at random, never late", func(ctx context.Context) {
		w := newWorkload(tool("jitter_a"))
		createReadyPod(ctx, ns, "jitter-0", map[string]string{"app": "jitter"}, w.port())
		ts := toolSet(ns, "jitter")
		createToolSet(ctx, ts)
		Eventually(func(g Gomega) {
			g.Expect(readyCondition(getToolSet(ctx, g, ts)).Status).To(Equal(metav1.ConditionTrue))
		}).Should(Succeed())
		// The publish comes back as a Changed event, whose round is not
		// the interval's: count the rounds after it.
		settled := w.hits.Load() + 1
		const gaps = 5
		Eventually(w.hits.Load).WithTimeout(time.Minute).Should(BeNumerically(">=", settled+gaps+1))
		times := w.hitTimes()[settled-1:]
		var got []time.Duration
		for i := 1; i <= gaps; i++ {
			got = append(got, times[i].Sub(times[i-1]))
		}
		GinkgoWriter.Printf("rounds %v apart\n", got)
		interval := ts.Spec.Interval.Duration
		// Each round is due at most a tenth early; it may come late by the
		// time a busy manager takes to get to it.
		Expect(got).To(HaveEach(BeNumerically(">=", interval-interval/10-interval/50)))
		Expect(got).To(HaveEach(BeNumerically("<=", interval+2*time.Second)))
		// Five rounds all within 1% of the interval would be a chance of
		// one in 10^5: the rounds are jittered.
		Expect(got).To(ContainElement(BeNumerically("<", interval-interval/100)))
	})

	It("finds the ToolSets of a new Pod through any selector", func(ctx context.Context) {
		byValues := toolSet(ns, "values")
		byValues.Spec.Selector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"values-a", "values-b"}},
		}}
		byExpression := toolSet(ns, "expression")
		byExpression.Spec.Selector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: metav1.LabelSelectorOpExists},
			{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"cache"}},
		}}
		byLabels := toolSet(ns, "labels")
		byLabels.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{"app": "labels", "team": "a"}}
		for _, ts := range []*v1alpha1.ToolSet{byValues, byExpression, byLabels} {
			// Long enough that only a Pod's event, not the interval, can
			// bring the ToolSet back within the test's timeout.
			ts.Spec.Interval = &metav1.Duration{Duration: 10 * time.Minute}
			createToolSet(ctx, ts)
			Eventually(func(g Gomega) {
				g.Expect(readyCondition(getToolSet(ctx, g, ts)).Reason).To(Equal(v1alpha1.ReasonNoPods))
			}).Should(Succeed())
		}
		createReadyPod(ctx, ns, "values-0", map[string]string{"app": "values-b"}, newWorkload(tool("index_values")).port())
		createReadyPod(ctx, ns, "expression-0", map[string]string{"app": "other", "tier": "db"}, newWorkload(tool("index_expression")).port())
		createReadyPod(ctx, ns, "labels-0", map[string]string{"app": "labels", "team": "a"}, newWorkload(tool("index_labels")).port())
		createReadyPod(ctx, ns, "cache-0", map[string]string{"app": "values-c", "tier": "cache", "team": "a"}, newWorkload(tool("index_never")).port())
		for ts, want := range map[*v1alpha1.ToolSet]string{byValues: "index_values", byExpression: "index_expression", byLabels: "index_labels"} {
			Eventually(func(g Gomega) {
				got := getToolSet(ctx, g, ts)
				g.Expect(readyCondition(got).Status).To(Equal(metav1.ConditionTrue))
				g.Expect(got.Status.Tools).To(ConsistOf(toolNamed(want, v1alpha1.ToolPublished)))
			}).WithTimeout(time.Minute).Should(Succeed())
		}
	})
})
