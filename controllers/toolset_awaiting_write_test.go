package controllers

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/api/v1alpha1"
)

// holdTableWrites makes the API server refuse every write of the tool
// table's ConfigMaps, by a ValidatingAdmissionPolicy, until release is
// called (or the spec ends): the publisher's writes fail and are retried,
// as against an API server that refuses them.
func holdTableWrites(ctx context.Context) (release func(ctx context.Context)) {
	GinkgoHelper()
	name := "hold-tool-table-writes"
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptrTo(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: tableNamespace}},
				ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				}}},
			},
			Validations: []admissionv1.Validation{{
				Expression: `!object.metadata.name.startsWith("toolplane-tools")`,
				Message:    "the spec holds the tool table's writes",
			}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
	Expect(k8sClient.Create(ctx, policy)).To(Succeed())
	Expect(k8sClient.Create(ctx, binding)).To(Succeed())
	release = func(ctx context.Context) {
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, binding))).To(Succeed())
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, policy))).To(Succeed())
	}
	DeferCleanup(release)
	// The API server loads policies in the background: wait until a table
	// ConfigMap is refused (a dry run, so that nothing is stored).
	Eventually(func() error {
		probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tableNamespace, Name: "toolplane-tools-probe"}}
		return k8sClient.Create(ctx, probe, client.DryRunAll)
	}).Should(MatchError(ContainSubstring("holds the tool table's writes")))
	return release
}

var _ = Describe("A ToolSet's status and the table readers see", func() {
	It("shows a new tool Pending (AwaitingWrite) while the table's write is held, then Published once it is written", func(ctx context.Context) {
		// As a running manager: the policies are known and nothing is
		// restored, so that a new name is Owned at once.
		Eventually(func() bool {
			publisher.mu.Lock()
			defer publisher.mu.Unlock()
			return publisher.policiesSet && !publisher.restoring()
		}).Should(BeTrue())
		ns := newNamespace(ctx)
		release := holdTableWrites(ctx)
		w := newWorkload(tool("held_write_a"))
		createReadyPod(ctx, ns, "held-write-0", map[string]string{"app": "held-write"}, w.port())
		ts := toolSet(ns, "held-write")
		createToolSet(ctx, ts)

		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, ts)
			g.Expect(got.Status.Tools).To(ConsistOf(And(toolNamed("held_write_a", v1alpha1.ToolPending),
				HaveField("Reason", HavePrefix(v1alpha1.ReasonAwaitingWrite)))))
			g.Expect(got.Status.PublishedTools).To(BeZero())
			g.Expect(condition(got, v1alpha1.ConditionReconciling).Reason).To(Equal(v1alpha1.ReasonAwaitingWrite))
			g.Expect(condition(got, v1alpha1.ConditionConflicted).Status).To(Equal(metav1.ConditionFalse), "owned: no conflict")
		}).Should(Succeed())
		// Rounds go on, and the write is retried, while it is held: the
		// status never runs ahead of the table.
		hits := w.hits.Load()
		Eventually(w.hits.Load).Should(BeNumerically(">=", hits+1))
		Expect(tableEntries(ctx, Default, client.ObjectKeyFromObject(ts))).To(BeEmpty())
		Expect(getToolSet(ctx, Default, ts).Status.Tools).To(ConsistOf(toolNamed("held_write_a", v1alpha1.ToolPending)))

		release(ctx)
		// The failed writes are retried with a backoff of up to 30s.
		Eventually(func(g Gomega) {
			g.Expect(tableEntries(ctx, g, client.ObjectKeyFromObject(ts))).To(HaveLen(1))
		}).WithTimeout(time.Minute).Should(Succeed())
		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, ts)
			g.Expect(got.Status.Tools).To(ConsistOf(And(toolNamed("held_write_a", v1alpha1.ToolPublished), HaveField("Reason", BeEmpty()))))
			g.Expect(got.Status.PublishedTools).To(BeEquivalentTo(1))
			g.Expect(condition(got, v1alpha1.ConditionReconciling).Status).To(Equal(metav1.ConditionFalse))
		}).WithTimeout(time.Minute).Should(Succeed())
	})
})
