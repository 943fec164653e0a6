package install

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// rendering is one way a user installs toolplane.
type rendering struct {
	name           string
	objects        manifests
	tableNamespace string
}

// renderings are every install the repository ships, each with the
// namespace its tool table goes to.
func renderings() []rendering {
	GinkgoHelper()
	return []rendering{
		{"chart, default values", helmTemplate("toolplane", "toolplane-system"), "toolplane-system"},
		{"chart, custom values", helmTemplate("custom", "ops", "-f", customValues), "agents"},
		{"config/default", kustomizeBuild("config/default"), "toolplane-system"},
		{"config/samples", readManifestDir("config/samples"), ""},
	}
}

var _ = Describe("RBAC", func() {
	It("has no wildcards, writes ConfigMaps and Leases only in the table namespace, and never lists Secrets", func() {
		for _, r := range renderings() {
			Expect(rbacProblems(r.objects.roles(), r.tableNamespace)).To(BeEmpty(), r.name)
		}
	})

	It("catches what it must catch", func() {
		get := []string{"get"}
		problems := rbacProblems([]rbacRole{
			{kind: "ClusterRole", name: "wild", rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"*"}, Resources: []string{"pods"}, Verbs: get},
				{APIGroups: []string{""}, Resources: []string{"pods/*"}, Verbs: get},
				{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"*"}},
			}},
			{kind: "ClusterRole", name: "cm", rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "patch"}},
				{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "watch"}},
			}},
			{kind: "Role", namespace: "elsewhere", name: "lease", rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"update"}},
			}},
			{kind: "Role", namespace: "table", name: "ok", rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "delete"}},
			}},
		}, "table")
		Expect(problems).To(ConsistOf(
			ContainSubstring(`ClusterRole wild rule 0: wildcard "*" in apiGroups`),
			ContainSubstring(`ClusterRole wild rule 1: wildcard "pods/*" in resources`),
			ContainSubstring(`ClusterRole wild rule 2: wildcard "*" in verbs`),
			ContainSubstring("ClusterRole cm rule 0: patch configmaps cluster-wide"),
			ContainSubstring("ClusterRole cm rule 1: watch secrets"),
			ContainSubstring(`Role elsewhere/lease rule 0: update leases outside the table namespace "table"`),
		))
	})

	It("grants in the chart exactly what controllers/rbac.go asks for", func() {
		generated := readManifestFile("config/rbac/role.yaml")
		chart := helmTemplate("toolplane", "toolplane-system")
		want := fromUnstructured[rbacv1.ClusterRole](generated.named("ClusterRole", "manager-role"))
		got := fromUnstructured[rbacv1.ClusterRole](chart.named("ClusterRole", "toolplane-manager"))
		Expect(got.Rules).To(Equal(want.Rules), "update charts/toolplane/templates/rbac.yaml to match config/rbac/role.yaml")
		wantRole := fromUnstructured[rbacv1.Role](generated.named("Role", "manager-role"))
		gotRole := fromUnstructured[rbacv1.Role](chart.named("Role", "toolplane-manager"))
		Expect(gotRole.Rules).To(Equal(wantRole.Rules), "update charts/toolplane/templates/rbac.yaml to match config/rbac/role.yaml")
	})

	It("lets the installed operator do its work and nothing more, as the API server's authorizer sees it", func(ctx context.Context) {
		const operatorNS, tableNS, otherNS = "sar-operator", "sar-table", "sar-other"
		m := helmTemplate("sar", operatorNS, "--set", "table.namespace="+tableNS)
		var rbacObjects manifests
		for _, kind := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
			rbacObjects = append(rbacObjects, m.ofKind(kind)...)
		}
		ensureNamespaces(ctx, operatorNS, tableNS, otherNS)
		Expect(apply(ctx, rbacObjects, "", false)).To(Succeed())
		sa := m.ofKind("ServiceAccount").manager()[0]
		user := fmt.Sprintf("system:serviceaccount:%s:%s", sa.GetNamespace(), sa.GetName())

		type access struct {
			verb, group, resource, subresource, namespace string
		}
		can := func(ctx context.Context, a access) (bool, error) {
			review, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
				Spec: authorizationv1.SubjectAccessReviewSpec{
					User:   user,
					Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + operatorNS, "system:authenticated"},
					ResourceAttributes: &authorizationv1.ResourceAttributes{
						Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.subresource, Namespace: a.namespace,
					},
				},
			}, metav1.CreateOptions{})
			if err != nil {
				return false, err
			}
			return review.Status.Allowed, nil
		}
		allowed := []access{
			{"update", "", "configmaps", "", tableNS},
			{"create", "", "configmaps", "", tableNS},
			{"watch", "", "configmaps", "", tableNS},
			{"update", "coordination.k8s.io", "leases", "", tableNS},
			{"list", "", "pods", "", ""},
			{"watch", "", "pods", "", ""},
			{"list", "", "services", "", ""},
			{"watch", "", "services", "", ""},
			{"get", "", "services", "", otherNS},
			{"get", "", "secrets", "", otherNS},
			{"get", "", "configmaps", "", otherNS},
			{"watch", "toolplane.io", "toolsets", "", ""},
			{"patch", "toolplane.io", "toolsets", "status", otherNS},
			{"create", "events.k8s.io", "events", "", otherNS},
		}
		denied := []access{
			{"update", "", "configmaps", "", operatorNS},
			{"create", "", "configmaps", "", otherNS},
			{"list", "", "configmaps", "", ""},
			{"update", "coordination.k8s.io", "leases", "", otherNS},
			{"list", "", "secrets", "", otherNS},
			{"watch", "", "secrets", "", ""},
			{"create", "", "secrets", "", tableNS},
			{"update", "toolplane.io", "toolsets", "", otherNS},
			{"delete", "toolplane.io", "toolsets", "", otherNS},
			{"delete", "", "pods", "", otherNS},
			{"update", "", "services", "", otherNS},
			{"create", "", "services", "", tableNS},
			{"create", "", "pods", "", tableNS},
			{"get", "apps", "deployments", "", otherNS},
		}
		// The authorizer reads RBAC from an informer: wait until it has seen
		// the grants, so that the denials below are not merely early.
		Eventually(func(g Gomega, ctx context.Context) {
			for _, a := range allowed {
				ok, err := can(ctx, a)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(ok).To(BeTrue(), "%+v denied", a)
			}
		}).WithContext(ctx).WithTimeout(eventuallyTimeout).Should(Succeed())
		for _, a := range denied {
			ok, err := can(ctx, a)
			Expect(err).NotTo(HaveOccurred())
			Expect(ok).To(BeFalse(), "%+v allowed", a)
		}
	})
})

var _ = Describe("Hardening", func() {
	It("holds for every shipped Deployment", func() {
		for _, r := range renderings() {
			deployments := r.objects.ofKind("Deployment")
			Expect(deployments).NotTo(BeEmpty(), r.name)
			for _, u := range deployments {
				Expect(hardeningProblems(fromUnstructured[appsv1.Deployment](u))).To(BeEmpty(), r.name)
			}
		}
	})

	It("catches what it must catch", func() {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "bare"}}
		d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app"}}
		Expect(hardeningProblems(d)).To(ConsistOf(
			HaveSuffix("runAsNonRoot is not true"),
			HaveSuffix("readOnlyRootFilesystem is not true"),
			HaveSuffix("allowPrivilegeEscalation is not false"),
			HaveSuffix("does not drop ALL capabilities"),
			HaveSuffix("has no RuntimeDefault or Localhost seccomp profile"),
			HaveSuffix("has no liveness probe"),
			HaveSuffix("has no readiness probe"),
			HaveSuffix("requests no cpu"),
			HaveSuffix("requests no memory"),
			HaveSuffix("has no memory limit"),
		))

		// A container's settings win over the Pod's.
		d.Spec.Template.Spec.SecurityContext = &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		}
		d.Spec.Template.Spec.Containers[0] = corev1.Container{
			Name: "app",
			SecurityContext: &corev1.SecurityContext{
				RunAsNonRoot:             ptr.To(false),
				ReadOnlyRootFilesystem:   ptr.To(true),
				AllowPrivilegeEscalation: ptr.To(false),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_ADMIN"}},
				SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined},
			},
			LivenessProbe:  &corev1.Probe{},
			ReadinessProbe: &corev1.Probe{},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("10Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("20Mi")},
			},
		}
		Expect(hardeningProblems(d)).To(ConsistOf(
			HaveSuffix("runAsNonRoot is not true"),
			HaveSuffix("adds capabilities [NET_ADMIN]"),
			HaveSuffix("has no RuntimeDefault or Localhost seccomp profile"),
		))
	})
})
