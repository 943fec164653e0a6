package controllers

import (
	"context"
	"net"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/api/v1alpha1"
)

var _ = Describe("The ToolSet status, round after round", func() {
	It("costs no status write for a Pod that resets every connection, though each reset comes from a new local port", func(ctx context.Context) {
		ns := newNamespace(ctx)
		good := newWorkload(tool("steady_a"))
		resetting := newWorkload(tool("steady_a"))
		resetting.setHandler(func(rw http.ResponseWriter, _ *http.Request) {
			conn, _, err := rw.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			// SO_LINGER 0: the close sends RST, "connection reset by peer"
			// on the operator's side, naming its ephemeral port.
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = conn.Close()
		})
		createReadyPod(ctx, ns, "steady-0", map[string]string{"app": "steady"}, good.port())
		createReadyPod(ctx, ns, "steady-1", map[string]string{"app": "steady"}, resetting.port())
		ts := toolSet(ns, "steady")
		createToolSet(ctx, ts)
		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, ts)
			g.Expect(readyCondition(got).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(condition(got, v1alpha1.ConditionDegraded).Reason).To(Equal(v1alpha1.ReasonPartialScrape))
			g.Expect(condition(got, v1alpha1.ConditionDegraded).Message).To(ContainSubstring("steady-1"))
		}).Should(Succeed())
		// Settled: let the publish's own round pass, then count 5 rounds.
		hits := resetting.hits.Load()
		Eventually(resetting.hits.Load).Should(BeNumerically(">=", hits+1))
		writes := statusWrites(ts)
		hits = resetting.hits.Load()
		Eventually(resetting.hits.Load).WithTimeout(60 * 1e9).Should(BeNumerically(">=", hits+5))
		Expect(statusWrites(ts)).To(Equal(writes), "5 rounds of resets cost no status write")
		Expect(condition(getToolSet(ctx, Default, ts), v1alpha1.ConditionDegraded).Message).NotTo(MatchRegexp(`:\d+->`),
			"no local address in the message")
	})
})

var _ = Describe("A ToolSet being deleted", func() {
	It("leaves the table at once while someone else's finalizer holds it, and its names pass on", func(ctx context.Context) {
		ns := newNamespace(ctx)
		w := newWorkload(tool("held_x"))
		createReadyPod(ctx, ns, "held-0", map[string]string{"app": "held"}, w.port())
		held := toolSet(ns, "held")
		held.Finalizers = []string{"example.com/keep"}
		createToolSet(ctx, held)
		DeferCleanup(func(ctx context.Context) {
			got := &v1alpha1.ToolSet{}
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(held), got); err == nil {
				got.Finalizers = nil
				Expect(client.IgnoreNotFound(k8sClient.Update(ctx, got))).To(Succeed())
			}
		})
		eventuallyInTable(ctx, held, HaveLen(1))
		// A rival in another namespace, created later: Conflicted.
		other := newNamespace(ctx)
		createReadyPod(ctx, other, "rival-0", map[string]string{"app": "rival"}, newWorkload(tool("held_x")).port())
		rival := toolSet(other, "rival")
		createToolSet(ctx, rival)
		Eventually(func(g Gomega) {
			g.Expect(getToolSet(ctx, g, rival).Status.Tools).To(ConsistOf(toolNamed("held_x", v1alpha1.ToolConflicted)))
		}).Should(Succeed())

		Expect(k8sClient.Delete(ctx, held)).To(Succeed())
		// Within one interval of the rival (5s), with room for the write.
		Eventually(func(g Gomega) {
			g.Expect(tableEntries(ctx, g, client.ObjectKeyFromObject(held))).To(BeEmpty())
			g.Expect(tableEntries(ctx, g, client.ObjectKeyFromObject(rival))).To(HaveLen(1))
			g.Expect(getToolSet(ctx, g, rival).Status.Tools).To(ConsistOf(toolNamed("held_x", v1alpha1.ToolPublished)))
		}).WithTimeout(10 * time.Second).Should(Succeed())
		got := getToolSet(ctx, Default, held)
		Expect(got.DeletionTimestamp).NotTo(BeNil(), "the finalizer still holds it")
	})
})

var _ = Describe("The kstatus conditions of a ToolSet", func() {
	It("say Reconciling while no Pod is ready, and neither Reconciling nor Stalled once published", func(ctx context.Context) {
		ns := newNamespace(ctx)
		ts := toolSet(ns, "progress")
		createToolSet(ctx, ts)
		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, ts)
			g.Expect(condition(got, v1alpha1.ConditionReconciling)).To(And(
				HaveField("Status", metav1.ConditionTrue), HaveField("Reason", v1alpha1.ReasonNoPods)))
			g.Expect(condition(got, v1alpha1.ConditionStalled).Status).To(Equal(metav1.ConditionFalse))
		}).Should(Succeed())
		createReadyPod(ctx, ns, "progress-0", map[string]string{"app": "progress"}, newWorkload(tool("progress_a")).port())
		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, ts)
			g.Expect(readyCondition(got).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(condition(got, v1alpha1.ConditionReconciling).Status).To(Equal(metav1.ConditionFalse))
			g.Expect(condition(got, v1alpha1.ConditionStalled).Status).To(Equal(metav1.ConditionFalse))
			for _, c := range got.Status.Conditions {
				g.Expect(c.ObservedGeneration).To(Equal(got.Generation), c.Type)
			}
		}).Should(Succeed())
	})
})
