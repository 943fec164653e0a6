package controllers

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/toolkit/spec"
)

var _ = Describe("The table publisher, telling ToolSets apart by UID", func() {
	var ns string
	BeforeEach(func(ctx context.Context) { ns = newNamespace(ctx) })

	create := func(ctx context.Context, name string) *v1alpha1.ToolSet {
		GinkgoHelper()
		ts := minimalToolSet(ns, name)
		Expect(k8sClient.Create(ctx, ts)).To(Succeed())
		return ts
	}
	// offer offers tools as the reconciler does: under the ToolSet's UID,
	// each entry carrying it.
	offer := func(ctx context.Context, rp *runningPublisher, ts *v1alpha1.ToolSet, names ...string) map[string]types.NamespacedName {
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
		owners := map[string]types.NamespacedName{}
		for name, v := range verdicts {
			owners[name] = v.Owner
		}
		return owners
	}
	recreate := func(ctx context.Context, ts *v1alpha1.ToolSet) *v1alpha1.ToolSet {
		GinkgoHelper()
		Expect(k8sClient.Delete(ctx, ts)).To(Succeed())
		Eventually(func() error {
			return k8sClient.Get(ctx, client.ObjectKeyFromObject(ts), &v1alpha1.ToolSet{})
		}).Should(MatchError(ContainSubstring("not found")))
		// Creation times have a resolution of a second: the new object is
		// created after the rival, not in the same second.
		time.Sleep(1100 * time.Millisecond)
		return create(ctx, ts.Name)
	}

	It("hands the names of a ToolSet deleted and created again while it was down to the earliest-created claimant, not to the new object", func(ctx context.Context) {
		p1, stop1 := startPublisher(ns, 0)
		owner := create(ctx, "a-owner")
		time.Sleep(1100 * time.Millisecond)
		rival := create(ctx, "b-rival")
		Expect(offer(ctx, p1, owner, "x")).To(HaveKeyWithValue("x", client.ObjectKeyFromObject(owner)))
		Expect(offer(ctx, p1, rival, "x")).To(HaveKeyWithValue("x", client.ObjectKeyFromObject(owner)))
		Eventually(publishedNames).WithArguments(ctx, ns).Should(HaveKeyWithValue("x", ns+"/a-owner"))
		stop1()

		// kubectl replace --force while the operator is down: a new object,
		// created after the rival, under the owner's name.
		again := recreate(ctx, owner)
		Expect(again.UID).NotTo(Equal(owner.UID))

		p2, _ := startPublisher(ns, time.Hour)
		offer(ctx, p2, again, "x")
		Expect(offer(ctx, p2, rival, "x")).To(HaveKeyWithValue("x", client.ObjectKeyFromObject(rival)),
			"the table's owner is gone; the rival was created before the new object")
		Eventually(publishedNames).WithArguments(ctx, ns).Should(Equal(map[string]string{"x": ns + "/b-rival"}))
		stored, _, err := storedTable(ctx, ns)
		Expect(err).NotTo(HaveOccurred())
		Expect(stored.Tools).To(HaveLen(1))
		Expect(stored.Tools[0].ToolSetUID).To(Equal(string(rival.UID)), "the table records the owner's UID")
	})

	It("withdraws the claims of the old object when a new one under its name offers, while running", func(ctx context.Context) {
		p, _ := startPublisher(ns, 0)
		owner := create(ctx, "a-owner")
		time.Sleep(1100 * time.Millisecond)
		rival := create(ctx, "b-rival")
		offer(ctx, p, owner, "x", "only_old")
		Expect(offer(ctx, p, rival, "x")).To(HaveKeyWithValue("x", client.ObjectKeyFromObject(owner)))

		// Deleted and created again faster than the work queue noticed:
		// no Withdraw came between the two objects' offers.
		again := recreate(ctx, owner)
		Expect(offer(ctx, p, again, "x")).To(HaveKeyWithValue("x", client.ObjectKeyFromObject(rival)))
		Eventually(publishedNames).WithArguments(ctx, ns).Should(Equal(map[string]string{"x": ns + "/b-rival"}),
			"the old object's names went with it, and the rival, created first, took x")
	})
})
