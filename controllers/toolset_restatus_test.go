package controllers

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/api/v1alpha1"
)

var _ = Describe("A ToolSet's status, when only its ownership changed", func() {
	// Fails against main before the ledger: the publisher's Changed event
	// ran a full round, so the runner-up's Pods were scraped again.
	It("flips the runner-up to Published when the owner is deleted, at once and without scraping the runner-up again", func(ctx context.Context) {
		nsA, nsB := newNamespace(ctx), newNamespace(ctx)
		name := "runner_up_" + nsB
		wA := newWorkload(tool(name))
		createReadyPod(ctx, nsA, "a-0", map[string]string{"app": "a"}, wA.port())
		owner := toolSet(nsA, "a")
		owner.Spec.Interval = &metav1.Duration{Duration: time.Hour}
		createToolSet(ctx, owner)
		Eventually(func(g Gomega) {
			g.Expect(getToolSet(ctx, g, owner).Status.Tools).To(ConsistOf(toolNamed(name, v1alpha1.ToolPublished)))
		}).Should(Succeed())

		wB := newWorkload(tool(name))
		createReadyPod(ctx, nsB, "b-0", map[string]string{"app": "b"}, wB.port())
		runnerUp := toolSet(nsB, "b")
		// An hour: no scrape of its own comes during the spec.
		runnerUp.Spec.Interval = &metav1.Duration{Duration: time.Hour}
		createToolSet(ctx, runnerUp)
		Eventually(func(g Gomega) {
			g.Expect(getToolSet(ctx, g, runnerUp).Status.Tools).To(ConsistOf(And(
				toolNamed(name, v1alpha1.ToolConflicted), HaveField("Owner", nsA+"/a"))))
		}).Should(Succeed())
		// Late Pod events may still scrape it once; then nothing does.
		var hits int64
		Eventually(func() bool {
			hits = wB.hits.Load()
			return hits > 0
		}).Should(BeTrue())
		Consistently(wB.hits.Load).WithTimeout(time.Second).Should(Equal(hits))

		Expect(k8sClient.Delete(ctx, owner)).To(Succeed())
		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, runnerUp)
			g.Expect(got.Status.Tools).To(ConsistOf(toolNamed(name, v1alpha1.ToolPublished)))
			g.Expect(got.Status.PublishedTools).To(BeEquivalentTo(1))
			g.Expect(condition(got, v1alpha1.ConditionConflicted).Status).To(Equal(metav1.ConditionFalse))
		}).WithTimeout(10*time.Second).Should(Succeed(), "the runner-up's status follows the hand-over, long before its interval")
		Eventually(func(g Gomega) {
			g.Expect(tableEntries(ctx, g, client.ObjectKeyFromObject(runnerUp))).To(ContainElement(HaveField("Name", name)))
		}).Should(Succeed(), "and the table has it under the runner-up")
		Expect(wB.hits.Load()).To(Equal(hits), "no scrape of the runner-up was needed")
	})
})
