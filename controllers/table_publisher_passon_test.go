package controllers

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

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
		// a_first comes before x: a may not own x, so nobody does.
		Expect(rp.offer(ctx, a, t0, entry(a, "a_first", "a_first"), entry(a, "x", "x"))).To(HaveKeyWithValue("x", types.NamespacedName{}))
		Expect(rp.offer(ctx, b, t0.Add(time.Minute), entry(b, "x", "x"))).To(HaveKeyWithValue("x", b), "b takes x on offer")
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

	// Fails against main before the ledger: the budget ran when the table
	// was written, so the first offer's verdict was Owned (status
	// Published, events ToolsChanged) and turned Denied only after the
	// flush.
	It("denies a new tool past the budget when it is offered, not after the table is written, and never publishes it", func(ctx context.Context) {
		ns := newNamespace(ctx)
		writes := &writeLog{}
		rp, _ := startPublisherWith(ns, ns, 0, writes, countingClient(writes), func(p *TablePublisher) {
			p.Budget = ownership.Budget{MaxToolsPerNamespace: 2}
		})
		a := types.NamespacedName{Namespace: ns + "-a", Name: "a"}
		t0 := metav1.NewTime(time.Now().Add(-time.Hour))
		tools := []spec.TableTool{entry(a, "t1", "t1"), entry(a, "t2", "t2")}
		verdicts, err := rp.Offer(ctx, Offer{ToolSet: a, Created: t0, Tools: tools})
		Expect(err).NotTo(HaveOccurred())
		Expect(verdicts).To(HaveLen(2))
		Eventually(publishedNames).WithArguments(ctx, ns).Should(Equal(map[string]string{"t1": a.String(), "t2": a.String()}))

		// A third tool: the namespace's budget is two.
		tools = append(slices.Clone(tools), entry(a, "t3", "t3"))
		verdicts, err = rp.Offer(ctx, Offer{ToolSet: a, Created: t0, Tools: tools})
		Expect(err).NotTo(HaveOccurred())
		Expect(verdicts["t3"]).To(And(
			HaveField("State", ownership.Denied),
			HaveField("Policy", ownership.OverBudget),
			HaveField("Owner", types.NamespacedName{}),
		), "the verdict on offer is final")
		Expect(verdicts["t1"].State).To(Equal(ownership.Owned))
		Consistently(publishedNames).WithArguments(ctx, ns).WithTimeout(time.Second).
			Should(Equal(map[string]string{"t1": a.String(), "t2": a.String()}), "t3 is never published")
		verdicts, err = rp.Retain(ctx, a)
		Expect(err).NotTo(HaveOccurred())
		Expect(verdicts["t3"].State).To(Equal(ownership.Denied), "and it stays denied once the table is written")
	})

	// Fails against main before the ledger: a name read back under two
	// ToolSets went to whichever the map of restored claims yielded last.
	It("restores a name that a table names under two ToolSets to the earliest-created of them, every time", func(ctx context.Context) {
		ns := newNamespace(ctx)
		early := minimalToolSet(ns, "early")
		Expect(k8sClient.Create(ctx, early)).To(Succeed())
		late := minimalToolSet(ns, "late")
		// Apart by more than the creation timestamps' second.
		Eventually(func() time.Time { return time.Now() }).Should(BeTemporally(">", early.CreationTimestamp.Add(1100*time.Millisecond)))
		Expect(k8sClient.Create(ctx, late)).To(Succeed())
		ke, kl := client.ObjectKeyFromObject(early), client.ObjectKeyFromObject(late)
		for range 4 {
			// The late entry last, then first: an order-dependent restore
			// picks differently in one of them.
			for _, order := range [][]types.NamespacedName{{ke, kl}, {kl, ke}} {
				var table spec.Table
				for _, owner := range order {
					e := entry(owner, "shared", "shared")
					table.Tools = append(table.Tools, e)
				}
				Expect(writeForeignTable(ctx, ns, &table)).To(Succeed())
				rp, stop := startPublisherWith(ns, ns, time.Hour, &writeLog{}, k8sClient)
				verdicts, err := rp.Retain(ctx, kl)
				Expect(err).NotTo(HaveOccurred())
				Expect(verdicts["shared"]).To(HaveField("Owner", ke), "the earliest-created owns it, whatever the order read")
				stop()
			}
		}
	})
})

// writeForeignTable stores t as the plain table ConfigMap "tools" of ns,
// as something other than the publisher may have written it: in the order
// given, a name twice if so.
func writeForeignTable(ctx context.Context, ns string, t *spec.Table) error {
	t.SchemaVersion = spec.SchemaVersion
	raw, err := json.Marshal(t)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tools"}}
	_, err = controllerutil.CreateOrUpdate(ctx, k8sClient, cm, func() error {
		cm.Labels = map[string]string{TableManagedByLabel: "toolplane"}
		cm.Data = map[string]string{spec.TableKey: string(raw)}
		cm.BinaryData = nil
		return nil
	})
	return err
}
