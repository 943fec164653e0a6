package install

import (
	"cmp"
	"context"
	"slices"
	"strconv"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/toolplane/toolplane/api/v1alpha1"
)

var _ = Describe("config/default", func() {
	It("renders with kustomize into manifests that the API server accepts", func(ctx context.Context) {
		m := kustomizeBuild("config/default")
		Expect(dryRun(ctx, m, "")).To(Succeed())

		ns := m.named("Namespace", "toolplane-system")
		Expect(ns.GetLabels()).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "restricted"))
		for _, u := range m {
			if u.GetNamespace() != "" {
				Expect(u.GetNamespace()).To(Equal("toolplane-system"), "%s %s", u.GetKind(), u.GetName())
			}
		}
		Expect(m.ofKind("CustomResourceDefinition")).To(HaveLen(len(readManifestDir("config/crd/bases"))))
	})

	It("publishes the table in the manager's own namespace, where its Role is", func() {
		m := kustomizeBuild("config/default")
		d := fromUnstructured[appsv1.Deployment](m.named("Deployment", "toolplane-controller-manager"))
		args, ok := managerContainer(d)
		Expect(ok).To(BeTrue())
		Expect(args).To(ContainElements("--leader-elect", "--table-namespace=$(POD_NAMESPACE)"))
		// Kubernetes expands $(POD_NAMESPACE) only from the container's env.
		Expect(d.Spec.Template.Spec.Containers[0].Env).To(ContainElement(corev1.EnvVar{
			Name:      "POD_NAMESPACE",
			ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}},
		}))

		sa := m.named("ServiceAccount", "toolplane-controller-manager")
		Expect(d.Spec.Template.Spec.ServiceAccountName).To(Equal(sa.GetName()))
		subject := rbacv1.Subject{Kind: "ServiceAccount", Name: sa.GetName(), Namespace: "toolplane-system"}
		rb := fromUnstructured[rbacv1.RoleBinding](m.named("RoleBinding", "toolplane-manager-rolebinding"))
		Expect(rb.Subjects).To(ConsistOf(subject))
		Expect(rb.RoleRef.Name).To(Equal(m.named("Role", "toolplane-manager-role").GetName()))
		crb := fromUnstructured[rbacv1.ClusterRoleBinding](m.named("ClusterRoleBinding", "toolplane-manager-rolebinding"))
		Expect(crb.Subjects).To(ConsistOf(subject))
		Expect(crb.RoleRef.Name).To(Equal(m.named("ClusterRole", "toolplane-manager-role").GetName()))
	})
	It("sets GOMEMLIMIT as the chart does, below the memory limit", func() {
		// The Downward API gives the whole limit, which leaves the runtime
		// no headroom for what GOMEMLIMIT does not count (the binary's
		// pages, which the container's limit does): config/ spells out the
		// value the chart computes.
		chart := helmTemplate("t", "ns")
		for name, chartName := range map[string]string{
			"toolplane-controller-manager": "t-toolplane",
			"toolplane-gateway":            "t-toolplane-gateway",
		} {
			d := fromUnstructured[appsv1.Deployment](kustomizeBuild("config/default").named("Deployment", name))
			want := fromUnstructured[appsv1.Deployment](chart.named("Deployment", chartName))
			c, wc := d.Spec.Template.Spec.Containers[0], want.Spec.Template.Spec.Containers[0]
			Expect(c.Resources.Limits.Memory().Equal(*wc.Resources.Limits.Memory())).To(BeTrue(), "%s: the chart's memory limit", name)
			env := func(c corev1.Container) corev1.EnvVar {
				i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "GOMEMLIMIT" })
				Expect(i).NotTo(Equal(-1), "%s: GOMEMLIMIT", name)
				return c.Env[i]
			}
			Expect(env(c)).To(Equal(env(wc)), name)
			Expect(env(c).Value).To(Equal(strconv.FormatInt(c.Resources.Limits.Memory().Value()*65/100, 10)), "%s: 65%% of the limit", name)
		}
	})
})

var _ = Describe("config/samples", func() {
	It("applies, as kubectl apply -f config/samples/ does, into any namespace", func(ctx context.Context) {
		ns, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "samples-"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		m := readManifestDir("config/samples")
		Expect(m.namespaces()).To(BeEmpty(), "samples follow the user's namespace")
		Expect(dryRun(ctx, m, ns.Name)).To(Succeed())
	})

	It("keeps the cluster-scoped ToolNamePolicy sample apart, and it applies", func(ctx context.Context) {
		for _, u := range readManifestDir("config/samples") {
			Expect(u.GetKind()).NotTo(Equal("ToolNamePolicy"), "kubectl apply -f config/samples/ must reserve no names")
		}
		m := readManifestDir("config/samples/policies")
		Expect(m.named("ToolNamePolicy", "payments")).NotTo(BeNil())
		Expect(dryRun(ctx, m, "")).To(Succeed())
	})

	DescribeTable("points each ToolSet at its sample's Pods and Service", func(name string, protocol v1alpha1.Protocol) {
		m := readManifestDir("config/samples")
		ts := fromUnstructured[v1alpha1.ToolSet](m.named("ToolSet", name))
		d := fromUnstructured[appsv1.Deployment](m.named("Deployment", name))
		svc := fromUnstructured[corev1.Service](m.named("Service", name))
		Expect(cmp.Or(ts.Spec.Protocol, v1alpha1.ProtocolToolkit)).To(Equal(protocol))

		sel, err := metav1.LabelSelectorAsSelector(&ts.Spec.Selector)
		Expect(err).NotTo(HaveOccurred())
		podLabels := labels.Set(d.Spec.Template.Labels)
		Expect(sel.Matches(podLabels)).To(BeTrue(), "the ToolSet selects no example-tools Pod")
		Expect(labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels)).To(BeTrue(), "the Service selects no example-tools Pod")

		ports := d.Spec.Template.Spec.Containers[0].Ports
		Expect(slices.ContainsFunc(ports, func(p corev1.ContainerPort) bool {
			return (ts.Spec.Port.Type == intstr.String && p.Name == ts.Spec.Port.StrVal) ||
				(ts.Spec.Port.Type == intstr.Int && p.ContainerPort == ts.Spec.Port.IntVal)
		})).To(BeTrue(), "the ToolSet's port %s is not a container port", ts.Spec.Port.String())

		Expect(ts.Spec.Service).NotTo(BeNil())
		Expect(ts.Spec.Service.Name).To(Equal(svc.Name))
		Expect(slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool {
			return p.Port == ts.Spec.Service.Port
		})).To(BeTrue(), "the Service has no port %d", ts.Spec.Service.Port)
	},
		Entry("example-tools, a toolkit workload", "example-tools", v1alpha1.ProtocolToolkit),
		Entry("everything, a stock MCP server image", "everything", v1alpha1.ProtocolMCP),
	)
})

var _ = Describe("The chart's CRDs", func() {
	It("equal config/crd/bases (run `make chart-crds` after `make manifests` if not)", func() {
		chart := helmTemplate("toolplane", "toolplane-system", "--set", "crds.keep=false").ofKind("CustomResourceDefinition")
		bases := readManifestDir("config/crd/bases")
		Expect(bases).NotTo(BeEmpty())
		Expect(chart).To(HaveLen(len(bases)))
		for _, want := range bases {
			got := chart.named("CustomResourceDefinition", want.GetName())
			Expect(got.Object).To(Equal(want.Object), "charts/toolplane/templates/crd drifted from config/crd/bases: run `make chart-crds`")
		}
	})
})
