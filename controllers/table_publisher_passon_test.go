package controllers

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/toolplane/toolplane/controllers/ownership"
	"github.com/toolplane/toolplane/toolkit/spec"
)

var _ = Describe("The table publisher, with the budget inside the rule", func() {
	It("hands a name its owner may not publish for its budget to the next claimant, which publishes it", func(ctx context.Context) {
		ns := newNamespace(ctx)
		writes := &writeLog{}
		rp, _ := startPublisherWith(ns, ns, 0, writes, countingClient(writes), func(p *TablePublisher) {
			p.Budget = ownership.Budget{MaxToolsPerNamespace: 1}
		})
		t0 := time.Now().Add(-time.Hour)
		a := types.NamespacedName{Namespace: ns + "-a", Name: "a"}
		b := types.NamespacedName{Namespace: ns + "-b", Name: "b"}
		// a claims x first, but its namespace may publish one tool, and
		// a_first comes before x.
		Expect(rp.offer(ctx, a, t0, entry(a, "a_first", "a_first"), entry(a, "x", "x"))).To(HaveKeyWithValue("x", a))
		rp.offer(ctx, b, t0.Add(time.Minute), entry(b, "x", "x"))
		Eventually(publishedNames).WithArguments(ctx, ns).Should(Equal(map[string]string{"a_first": a.String(), "x": b.String()}),
			"x is published, by the claimant that may")
		verdicts, err := rp.Offer(ctx, Offer{ToolSet: b, Created: metav1.NewTime(t0.Add(time.Minute)), Tools: []spec.TableTool{entry(b, "x", "x")}})
		Expect(err).NotTo(HaveOccurred())
		Expect(verdicts["x"].State).To(Equal(ownership.Owned))
		verdicts, err = rp.Retain(ctx, a)
		Expect(err).NotTo(HaveOccurred())
		Expect(verdicts["x"]).To(And(
			HaveField("State", ownership.Conflicted),
			HaveField("Owner", b),
		), "a denied owner is not an owner")
		Eventually(rp.changedEvents).Should(ContainElement(a), "a was told")
	})
})
