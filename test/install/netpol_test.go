package install

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

var _ = Describe("The NetworkPolicies", func() {
	It("are opt-in, render, and are admitted by the API server, in the chart and in config/network-policy", func(ctx context.Context) {
		Expect(helmTemplate("t", "ns").ofKind("NetworkPolicy")).To(BeEmpty(), "NetworkPolicies are opt-in")

		renderings := map[string]manifests{
			"chart, enabled":        helmTemplate("np", "np-system", "--set", "networkPolicy.enabled=true"),
			"chart, custom values":  helmTemplate("custom", "ops", "-f", customValues),
			"config/network-policy": kustomizeBuild("config/network-policy"),
		}
		for name, m := range renderings {
			policies := m.ofKind("NetworkPolicy")
			Expect(policies).NotTo(BeEmpty(), name)
			Expect(dryRun(ctx, policies, "")).To(Succeed(), name)
		}

		By("selecting the Pods of the manager and the gateway, and leaving them their probe ports")
		m := renderings["chart, enabled"]
		for _, u := range m.ofKind("Deployment") {
			d := fromUnstructured[appsv1.Deployment](u)
			var selected []string
			for _, p := range m.ofKind("NetworkPolicy") {
				np := fromUnstructured[networkingv1.NetworkPolicy](p)
				sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
				Expect(err).NotTo(HaveOccurred())
				if !sel.Empty() && sel.Matches(labels.Set(d.Spec.Template.Labels)) {
					selected = append(selected, np.Name)
					probe := d.Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet.Port
					var health int32
					for _, port := range d.Spec.Template.Spec.Containers[0].Ports {
						if port.Name == probe.StrVal {
							health = port.ContainerPort
						}
					}
					Expect(np.Spec.Ingress).To(ContainElement(HaveField("Ports", ContainElement(HaveField("Port.IntVal", health)))), "%s blocks the probes of %s", np.Name, d.Name)
					Expect(np.Spec.PolicyTypes).To(ConsistOf(networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress))
				}
			}
			Expect(selected).To(HaveLen(1), "Deployment %s", d.Name)
		}

		By("passing the values' peers through")
		np := fromUnstructured[networkingv1.NetworkPolicy](renderings["chart, custom values"].named("NetworkPolicy", "platform-toolplane-gateway"))
		Expect(np.Spec.Ingress).To(ContainElement(HaveField("From", ContainElement(HaveField("NamespaceSelector.MatchLabels", HaveKeyWithValue("toolplane.io/agents", "true"))))))
		Expect(np.Spec.Egress).To(ContainElement(HaveField("To", ContainElement(HaveField("IPBlock.CIDR", "10.0.0.1/32")))))
	})
})
