package controllers

import (
	"context"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// toolSet is a ToolSet selecting app=<name> on port "http", scraped every 5s.
func toolSet(ns, name string) *v1alpha1.ToolSet {
	return &v1alpha1.ToolSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.ToolSetSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Port:     intstr.FromString("http"),
			Interval: &metav1.Duration{Duration: 5 * time.Second},
			Timeout:  &metav1.Duration{Duration: 2 * time.Second},
			Service:  &v1alpha1.ServiceReference{Name: name, Port: 8080},
		},
	}
}

func getToolSet(ctx context.Context, g Gomega, ts *v1alpha1.ToolSet) *v1alpha1.ToolSet {
	got := &v1alpha1.ToolSet{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(ts), got)).To(Succeed())
	return got
}

// readyCondition returns the ToolSet's Ready condition, or an empty one.
func readyCondition(ts *v1alpha1.ToolSet) metav1.Condition {
	return condition(ts, v1alpha1.ConditionReady)
}

func toolNamed(name string, state v1alpha1.ToolState) OmegaMatcher {
	return And(HaveField("Name", name), HaveField("State", state))
}

var _ = Describe("The ToolSet reconciler", func() {
	var ns string
	BeforeEach(func(ctx context.Context) { ns = newNamespace(ctx) })

	It("lists the tools, offers them with endpoints and is Ready with observedGeneration", func(ctx context.Context) {
		w := newWorkload(tool("query_customer"), tool("get_order"))
		createReadyPod(ctx, ns, "crm-0", map[string]string{"app": "crm"}, w.port())
		ts := toolSet(ns, "crm")
		Expect(k8sClient.Create(ctx, ts)).To(Succeed())

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

		offered := publisher.offered(client.ObjectKeyFromObject(ts))
		Expect(offered).To(HaveLen(2))
		Expect(offered[0].Name).To(Equal("get_order"))
		Expect(offered[0].Endpoints).To(Equal(&spec.Endpoints{
			Invoke: "http://crm." + ns + ".svc:8080/tools/get_order",
			MCP:    "http://crm." + ns + ".svc:8080/mcp",
		}))
		Expect(offered[0].ToolSet).To(Equal(spec.ObjectReference{Namespace: ns, Name: "crm"}))
		Expect(string(offered[0].InputSchema)).To(MatchJSON(tool("get_order").InputSchema))
	})

	It("scrapes a new ready Pod at once, not at the next interval", func(ctx context.Context) {
		w1 := newWorkload(tool("a"))
		createReadyPod(ctx, ns, "p-0", map[string]string{"app": "p"}, w1.port())
		ts := toolSet(ns, "p")
		ts.Spec.Interval = &metav1.Duration{Duration: time.Hour}
		Expect(k8sClient.Create(ctx, ts)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(getToolSet(ctx, g, ts).Status.Pods.Scraped).To(BeEquivalentTo(1))
		}).Should(Succeed())

		w2 := newWorkload(tool("a"))
		createReadyPod(ctx, ns, "p-1", map[string]string{"app": "p"}, w2.port())
		// The interval is an hour: only the Pod watch can get this scrape.
		Eventually(w2.hits.Load).Should(BeNumerically(">=", 1))
		Eventually(func(g Gomega) {
			g.Expect(getToolSet(ctx, g, ts).Status.Pods).To(Equal(v1alpha1.PodCounts{Selected: 2, Scraped: 2}))
		}).Should(Succeed())
	})

	It("says clearly why a failing Pod is not Ready while the manager carries on", func(ctx context.Context) {
		bad := newWorkload()
		bad.setHandler(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) })
		createReadyPod(ctx, ns, "bad-0", map[string]string{"app": "bad"}, bad.port())
		good := newWorkload(tool("fine"))
		createReadyPod(ctx, ns, "good-0", map[string]string{"app": "good"}, good.port())
		badTS, goodTS := toolSet(ns, "bad"), toolSet(ns, "good")
		Expect(k8sClient.Create(ctx, badTS)).To(Succeed())
		Expect(k8sClient.Create(ctx, goodTS)).To(Succeed())

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
