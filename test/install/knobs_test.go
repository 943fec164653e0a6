package install

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// selectorProblems checks that every Deployment of a rendering selects its
// own Pod template, and that every PodDisruptionBudget selects some
// Deployment's Pods.
func selectorProblems(m manifests) []string {
	GinkgoHelper()
	var problems []string
	var podLabels []labels.Set
	for _, u := range m.ofKind("Deployment") {
		d := fromUnstructured[appsv1.Deployment](u)
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		Expect(err).NotTo(HaveOccurred())
		if sel.Empty() || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			problems = append(problems, "Deployment "+d.Name+": its selector does not match its Pod template")
		}
		podLabels = append(podLabels, d.Spec.Template.Labels)
	}
	for _, u := range m.ofKind("PodDisruptionBudget") {
		pdb := fromUnstructured[policyv1.PodDisruptionBudget](u)
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		Expect(err).NotTo(HaveOccurred())
		matched := false
		for _, l := range podLabels {
			matched = matched || sel.Matches(l)
		}
		if sel.Empty() || !matched {
			problems = append(problems, "PodDisruptionBudget "+pdb.Name+": selects no Deployment's Pods")
		}
	}
	return problems
}

var _ = Describe("The chart's HA and extension values", func() {
	It("keeps every selector matching its Pods, whatever podLabels says", func() {
		for _, r := range renderings() {
			Expect(selectorProblems(r.objects)).To(BeEmpty(), r.name)
		}
		Expect(selectorProblems(manifests{helmTemplate("t", "ns").named("Deployment", "t-toolplane")})).To(BeEmpty())

		for _, key := range []string{"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component"} {
			out, err := helm("template", "t", chartDir, "--set-string", "podLabels."+escapeSetKey(key)+"=other")
			Expect(err).To(HaveOccurred(), "podLabels overrode %s:\n%s", key, out)
			Expect(out).To(ContainSubstring("podLabels may not set " + key))
		}
		// A label of its own is fine, and reaches the Pods.
		d := fromUnstructured[appsv1.Deployment](helmTemplate("t", "ns", "--set-string", "podLabels.team=agents").named("Deployment", "t-toolplane"))
		Expect(d.Spec.Template.Labels).To(HaveKeyWithValue("team", "agents"))
	})

	It("catches a selector that misses its Pods", func() {
		m := helmTemplate("t", "ns", "--set", "replicaCount=2")
		d := m.named("Deployment", "t-toolplane")
		d.Object["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)["labels"] = map[string]any{"app.kubernetes.io/name": "other"}
		Expect(selectorProblems(m)).To(ConsistOf(
			ContainSubstring("Deployment t-toolplane"),
			ContainSubstring("PodDisruptionBudget t-toolplane"),
		))
	})

	It("renders a PodDisruptionBudget only for more than one replica, and the API server admits it", func(ctx context.Context) {
		Expect(helmTemplate("t", "ns").ofKind("PodDisruptionBudget").manager()).To(BeEmpty(), "a PDB over one replica blocks every drain")
		m := helmTemplate("t", "pdb-system", "--set", "replicaCount=3")
		Expect(dryRun(ctx, m, "")).To(Succeed())
		pdb := fromUnstructured[policyv1.PodDisruptionBudget](m.named("PodDisruptionBudget", "t-toolplane"))
		Expect(pdb.Spec.MaxUnavailable.IntValue()).To(Equal(1))
	})

	It("sets GOMEMLIMIT below the memory limit, with headroom", func() {
		// goMemLimit is the rendered GOMEMLIMIT, or "unset".
		goMemLimit := func(args ...string) string {
			d := fromUnstructured[appsv1.Deployment](helmTemplate("t", "ns", args...).named("Deployment", "t-toolplane"))
			for _, e := range d.Spec.Template.Spec.Containers[0].Env {
				if e.Name == "GOMEMLIMIT" {
					return e.Value
				}
			}
			return "unset"
		}
		Expect(goMemLimit()).To(Equal("174483046"), "65% of 256Mi")
		Expect(goMemLimit("--set", "resources.limits.memory=1Gi", "--set", "goMemLimitPercent=75")).To(Equal("805306368"))
		Expect(goMemLimit("--set", "resources.limits.memory=0.5G")).To(Equal("325000000"))
		Expect(goMemLimit("--set", "goMemLimitPercent=0")).To(Equal("unset"))
		Expect(goMemLimit("--set", "resources.limits=null")).To(Equal("unset"), "no limit, no GOMEMLIMIT")
		out, err := helm("template", "t", chartDir, "--set", "resources.limits.memory=256e6")
		Expect(err).To(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("use a plain quantity"))
	})

	It("passes leader election timings, extra env, volumes and objects through", func() {
		m := helmTemplate("custom", "ops", "-f", customValues)
		d := fromUnstructured[appsv1.Deployment](m.named("Deployment", "platform-toolplane"))
		args, _ := managerContainer(d)
		Expect(args).To(ContainElements("--leader-elect-lease-duration=30s", "--leader-elect-renew-deadline=20s", "--leader-elect-retry-period=4s"))
		c := d.Spec.Template.Spec.Containers[0]
		Expect(c.Env).To(ContainElement(corev1.EnvVar{Name: "HTTPS_PROXY", Value: "http://proxy.example.com:3128"}))
		Expect(c.VolumeMounts).To(ContainElement(HaveField("Name", "metrics-cert")))
		Expect(d.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("Name", "metrics-cert")))
		Expect(d.Spec.Template.Spec.TopologySpreadConstraints).To(ConsistOf(HaveField("LabelSelector.MatchLabels", HaveKeyWithValue("app.kubernetes.io/instance", "custom"))))
		Expect(m.named("ConfigMap", "platform-toolplane-extra").Object).To(HaveKeyWithValue("data", HaveKeyWithValue("note", "made by extraObjects")))
		Expect(m.named("ConfigMap", "custom-extra-string")).NotTo(BeNil())
	})

	It("refuses a cluster older than Kubernetes 1.30", func() {
		out, err := helm("template", "t", chartDir, "--kube-version", "1.29.0")
		Expect(err).To(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("incompatible with Kubernetes"))
	})
})

// escapeSetKey escapes the dots of a label key for helm --set.
func escapeSetKey(key string) string {
	out := ""
	for _, r := range key {
		if r == '.' {
			out += `\`
		}
		out += string(r)
	}
	return out
}
