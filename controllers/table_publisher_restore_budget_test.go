package controllers

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/controllers/ownership"
	"github.com/toolplane/toolplane/toolkit/spec"
)

var _ = Describe("The table publisher, restarted under a tighter budget", func() {
	It("keeps what the table held that fits the new budget, before any ToolSet has spoken", func(ctx context.Context) {
		ns := newNamespace(ctx)
		create := func(name string) *v1alpha1.ToolSet {
			GinkgoHelper()
			ts := minimalToolSet(ns, name)
			Expect(k8sClient.Create(ctx, ts)).To(Succeed())
			return ts
		}
		offer := func(rp *runningPublisher, ts *v1alpha1.ToolSet, names ...string) map[string]ownership.Verdict {
			GinkgoHelper()
			key := client.ObjectKeyFromObject(ts)
			var tools []spec.TableTool
			for _, n := range names {
				e := entry(key, n, n)
				e.ToolSetUID = string(ts.UID)
				tools = append(tools, e)
			}
			verdicts, err := rp.Offer(ctx, Offer{ToolSet: key, Created: ts.CreationTimestamp, UID: ts.UID, Tools: tools})
			Expect(err).NotTo(HaveOccurred())
			return verdicts
		}
		owner := create("a-owner")
		// Creation times have a resolution of a second.
		time.Sleep(1100 * time.Millisecond)
		rival := create("b-rival")
		a := ns + "/a-owner"

		p1, stop1 := startPublisher(ns, 0)
		offer(p1, owner, "a1", "a2", "a3")
		Expect(offer(p1, rival, "a1")).To(HaveKeyWithValue("a1", HaveField("State", ownership.Conflicted)))
		Eventually(publishedNames).WithArguments(ctx, ns).Should(Equal(map[string]string{"a1": a, "a2": a, "a3": a}))
		stop1()

		// The admin lowers the budget, which restarts the operator.
		writes := &writeLog{held: make(chan struct{}, 1)}
		p2, _ := startPublisherWith(ns, ns, time.Hour, writes, countingClient(writes), func(p *TablePublisher) {
			p.Budget = ownership.Budget{MaxToolsPerNamespace: 2}
		})
		// The owner's first tools stay published (the earliest-created
		// ToolSet's, each's by name), and only the one past the budget goes:
		// not the whole table until every ToolSet has been heard from.
		Eventually(publishedNames).WithArguments(ctx, ns).Should(Equal(map[string]string{"a1": a, "a2": a}))
		verdicts := offer(p2, rival, "a1")
		Expect(verdicts["a1"].State).To(Equal(ownership.Conflicted), "the owner read back keeps a1: %+v", verdicts["a1"])
		Expect(verdicts["a1"].Owner).To(Equal(client.ObjectKeyFromObject(owner)))
		verdicts = offer(p2, owner, "a1", "a2", "a3")
		Expect(verdicts["a1"].State).To(Equal(ownership.Owned))
		Expect(verdicts["a2"].State).To(Equal(ownership.Owned))
		Expect(verdicts["a3"].State).To(Equal(ownership.Denied))
		Expect(verdicts["a3"].Policy).To(Equal(ownership.OverBudget))
		Consistently(publishedNames).WithArguments(ctx, ns).WithTimeout(300 * time.Millisecond).
			Should(Equal(map[string]string{"a1": a, "a2": a}))
	})
})
