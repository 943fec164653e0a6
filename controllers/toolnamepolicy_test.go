package controllers

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// createPolicy creates a ToolNamePolicy and deletes it when the spec ends.
func createPolicy(ctx context.Context, name string, names, namespaces []string) *v1alpha1.ToolNamePolicy {
	GinkgoHelper()
	p := &v1alpha1.ToolNamePolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.ToolNamePolicySpec{Names: names, Namespaces: namespaces},
	}
	Expect(k8sClient.Create(ctx, p)).To(Succeed())
	DeferCleanup(func(ctx context.Context) {
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, p))).To(Succeed())
	})
	return p
}

// tableOwner is the ToolSet that owns name in the stored tool table, if any.
func tableOwner(ctx context.Context, g Gomega, name string) spec.ObjectReference {
	t, _, err := storedTable(ctx, tableNamespace)
	g.Expect(err).NotTo(HaveOccurred())
	for _, tt := range t.Tools {
		if tt.Name == name {
			return tt.ToolSet
		}
	}
	return spec.ObjectReference{}
}

var _ = Describe("The ToolNamePolicy API", func() {
	DescribeTable("rejects an invalid policy",
		func(ctx context.Context, mutate func(*v1alpha1.ToolNamePolicy), message string) {
			p := &v1alpha1.ToolNamePolicy{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "bad-"},
				Spec:       v1alpha1.ToolNamePolicySpec{Names: []string{"refund"}, Namespaces: []string{"payments"}},
			}
			mutate(p)
			err := k8sClient.Create(ctx, p)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("no names", func(p *v1alpha1.ToolNamePolicy) { p.Spec.Names = nil }, "spec.names"),
		Entry("an empty name", func(p *v1alpha1.ToolNamePolicy) { p.Spec.Names = []string{""} }, "spec.names[0]"),
		Entry("a glob with a character class", func(p *v1alpha1.ToolNamePolicy) { p.Spec.Names = []string{"re[f"} }, "spec.names[0]"),
		Entry("more than 64 names", func(p *v1alpha1.ToolNamePolicy) {
			p.Spec.Names = nil
			for i := range 65 {
				p.Spec.Names = append(p.Spec.Names, strings.Repeat("n", i+1))
			}
		}, "spec.names"),
		Entry("neither namespaces nor a selector", func(p *v1alpha1.ToolNamePolicy) { p.Spec.Namespaces = nil }, "set namespaces, namespaceSelector or both"),
		Entry("a namespace that is no namespace name", func(p *v1alpha1.ToolNamePolicy) { p.Spec.Namespaces = []string{"Pay Ments"} }, "spec.namespaces[0]"),
	)

	It("is cluster-scoped, accepts a selector alone and shows names, namespaces and governed tools", func(ctx context.Context) {
		p := &v1alpha1.ToolNamePolicy{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "selector-only-"},
			Spec: v1alpha1.ToolNamePolicySpec{
				Names:             []string{"nobody_uses_this_*"},
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "nobody"}},
			},
		}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { Expect(k8sClient.Delete(ctx, p)).To(Succeed()) })
		Expect(p.Namespace).To(BeEmpty())

		raw, err := os.ReadFile(filepath.Join("..", "config", "crd", "bases", "toolplane.io_toolnamepolicies.yaml"))
		Expect(err).NotTo(HaveOccurred())
		var crd apiextensionsv1.CustomResourceDefinition
		Expect(yaml.Unmarshal(raw, &crd)).To(Succeed())
		Expect(crd.Spec.Scope).To(Equal(apiextensionsv1.ClusterScoped))
		var columns []string
		for _, c := range crd.Spec.Versions[0].AdditionalPrinterColumns {
			columns = append(columns, c.Name)
		}
		Expect(columns).To(ContainElements("Names", "Namespaces", "Governed"))
	})
})

var _ = Describe("ToolNamePolicies", func() {
	It("keep a reserved name from a squatter created first, and hand it to nobody when the policy goes", func(ctx context.Context) {
		squat, payments := newNamespace(ctx), newNamespace(ctx)

		// The squatter comes first, and owns refund while no policy says
		// otherwise.
		sw := newWorkload(tool("refund"), tool("squat_other"))
		createReadyPod(ctx, squat, "s-0", map[string]string{"app": "s"}, sw.port())
		squatter := toolSet(squat, "s")
		createToolSet(ctx, squatter)
		Eventually(func(g Gomega) {
			g.Expect(getToolSet(ctx, g, squatter).Status.Tools).To(ContainElement(toolNamed("refund", v1alpha1.ToolPublished)))
		}).Should(Succeed())

		policy := createPolicy(ctx, "payments-"+payments, []string{"refund", "payments_*"}, []string{payments})
		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, squatter)
			g.Expect(got.Status.Tools).To(ConsistOf(
				And(toolNamed("refund", v1alpha1.ToolDenied), HaveField("Reason", ContainSubstring(policy.Name))),
				toolNamed("squat_other", v1alpha1.ToolPublished),
			))
			g.Expect(condition(got, v1alpha1.ConditionConflicted).Reason).To(Equal(v1alpha1.ReasonNameDenied))
			g.Expect(tableOwner(ctx, g, "refund")).To(BeZero())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(eventReasons(ctx, g, squatter)).To(ContainElement(eventNameDenied))
		}).Should(Succeed())

		// The permitted namespace comes later, and owns it.
		pw := newWorkload(tool("refund"))
		createReadyPod(ctx, payments, "p-0", map[string]string{"app": "p"}, pw.port())
		owner := toolSet(payments, "p")
		createToolSet(ctx, owner)
		Eventually(func(g Gomega) {
			g.Expect(getToolSet(ctx, g, owner).Status.Tools).To(ConsistOf(toolNamed("refund", v1alpha1.ToolPublished)))
			g.Expect(tableOwner(ctx, g, "refund")).To(Equal(spec.ObjectReference{Namespace: payments, Name: "p"}))
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			got := &v1alpha1.ToolNamePolicy{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(policy), got)).To(Succeed())
			g.Expect(got.Status.GovernedTools).To(BeEquivalentTo(2))
			g.Expect(got.Status.DeniedTools).To(BeEquivalentTo(1))
			g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		}).Should(Succeed())

		// Without the policy the squatter is the earliest claimant again, but
		// the owner keeps the name while it serves it.
		Expect(k8sClient.Delete(ctx, policy)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(getToolSet(ctx, g, squatter).Status.Tools).To(ContainElement(
				And(toolNamed("refund", v1alpha1.ToolConflicted), HaveField("Owner", payments+"/p"))))
		}).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(tableOwner(ctx, g, "refund")).To(Equal(spec.ObjectReference{Namespace: payments, Name: "p"}))
		}).WithTimeout(6 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	})

	It("follow a namespace's labels when they select namespaces", func(ctx context.Context) {
		ns := newNamespace(ctx)
		w := newWorkload(tool("ledger_close"))
		createReadyPod(ctx, ns, "l-0", map[string]string{"app": "l"}, w.port())
		ts := toolSet(ns, "l")
		createToolSet(ctx, ts)

		p := &v1alpha1.ToolNamePolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "ledger-" + ns},
			Spec: v1alpha1.ToolNamePolicySpec{
				Names:             []string{"ledger_*"},
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"toolplane.io/team": "ledger-" + ns}},
			},
		}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, p))).To(Succeed()) })
		Eventually(func(g Gomega) {
			g.Expect(getToolSet(ctx, g, ts).Status.Tools).To(ConsistOf(toolNamed("ledger_close", v1alpha1.ToolDenied)))
		}).Should(Succeed())

		namespace := &corev1.Namespace{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Name: ns}, namespace)).To(Succeed())
		namespace.Labels["toolplane.io/team"] = "ledger-" + ns
		Expect(k8sClient.Update(ctx, namespace)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(getToolSet(ctx, g, ts).Status.Tools).To(ConsistOf(toolNamed("ledger_close", v1alpha1.ToolPublished)))
		}).Should(Succeed())
	})
})
