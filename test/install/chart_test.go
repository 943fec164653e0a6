package install

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// customValues changes every value of the chart from its default.
const customValues = "test/install/testdata/values-custom.yaml"

// oidcValues sign people in with an IdP (gateway.auth=kubernetes,oidc).
const oidcValues = "test/install/testdata/values-oidc.yaml"

// managerContainer returns the manager container of a rendered Deployment.
func managerContainer(d *appsv1.Deployment) (args []string, found bool) {
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "manager" {
			return c.Args, true
		}
	}
	return nil, false
}

var _ = Describe("The Helm chart", func() {
	It("passes helm lint --strict with the default values and with every value changed", func() {
		out, err := helm("lint", "--strict", chartDir)
		Expect(err).NotTo(HaveOccurred(), out)
		out, err = helm("lint", "--strict", chartDir, "-f", customValues)
		Expect(err).NotTo(HaveOccurred(), out)
	})

	It("renders default values that the API server accepts", func(ctx context.Context) {
		m := helmTemplate("toolplane", "toolplane-system")
		Expect(dryRun(ctx, m, "")).To(Succeed())

		for _, kind := range []string{"CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment", "Service"} {
			Expect(m.ofKind(kind)).NotTo(BeEmpty(), "no %s rendered", kind)
		}
		Expect(m.ofKind("ServiceMonitor")).To(BeEmpty())

		// The names the README and NOTES.txt tell users to look for.
		d := fromUnstructured[appsv1.Deployment](m.named("Deployment", "toolplane"))
		args, ok := managerContainer(d)
		Expect(ok).To(BeTrue())
		Expect(args).To(ContainElements(
			"--leader-elect",
			"--health-probe-bind-address=:8081",
			"--metrics-bind-address=:8443",
			"--metrics-secure=true",
			"--table-namespace=toolplane-system",
			"--table-name=toolplane-tools",
			"--table-restore-timeout=2m",
			"--max-concurrent-scrapes=32",
			"--max-response-bytes=4194304",
			"--cluster-domain=cluster.local",
			"--zap-log-level=info",
		))
		Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal("ghcr.io/toolplane/toolplane:0.1.0"))
		Expect(m.named("Role", "toolplane-manager").GetNamespace()).To(Equal("toolplane-system"))
	})

	It("is validated strictly: an unknown field fails the dry-run", func(ctx context.Context) {
		m := helmTemplate("toolplane", "toolplane-system")
		d := m.named("Deployment", "toolplane")
		Expect(unstructured.SetNestedField(d.Object, int64(10), "spec", "template", "spec", "terminationGracePeriod")).To(Succeed())
		err := dryRun(ctx, manifests{d}, "")
		Expect(err).To(MatchError(ContainSubstring("terminationGracePeriod")), "a misspelt field went through")
	})

	It("renders a non-default values file that the API server accepts", func(ctx context.Context) {
		m := helmTemplate("custom", "ops", "-f", customValues, "--api-versions", "monitoring.coreos.com/v1")
		Expect(dryRun(ctx, m, "")).To(Succeed())

		d := fromUnstructured[appsv1.Deployment](m.named("Deployment", "platform-toolplane"))
		Expect(d.Namespace).To(Equal("ops"))
		Expect(*d.Spec.Replicas).To(BeEquivalentTo(2))
		pod := d.Spec.Template.Spec
		Expect(pod.ServiceAccountName).To(Equal("toolplane-operator"))
		Expect(pod.Containers[0].Image).To(Equal("registry.example.com/platform/toolplane@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"))
		Expect(pod.NodeSelector).To(HaveKeyWithValue("kubernetes.io/os", "linux"))
		Expect(pod.Tolerations).To(HaveLen(1))
		Expect(pod.Affinity).NotTo(BeNil())
		Expect(pod.PriorityClassName).To(Equal("system-cluster-critical"))
		Expect(pod.ImagePullSecrets).To(HaveLen(1))
		Expect(d.Spec.Template.Annotations).To(HaveKeyWithValue("example.com/scrape", "true"))
		Expect(d.Spec.Template.Labels).To(HaveKeyWithValue("example.com/tier", "control-plane"))
		args, _ := managerContainer(d)
		Expect(args).To(ContainElements(
			"--leader-elect",
			"--health-probe-bind-address=:9091",
			"--metrics-bind-address=:9090",
			"--metrics-secure=false",
			"--table-namespace=agents",
			"--table-name=cluster-tools",
			"--table-restore-timeout=90s",
			"--max-concurrent-scrapes=8",
			"--max-response-bytes=16777216",
			"--cluster-domain=corp.example",
			"--zap-log-level=debug",
			"--zap-encoder=console",
		))

		// The ConfigMap and Lease permissions follow the table into its
		// namespace, bound to the ServiceAccount in the release namespace.
		Expect(m.named("Role", "platform-toolplane-manager").GetNamespace()).To(Equal("agents"))
		rb := fromUnstructured[rbacv1.RoleBinding](m.named("RoleBinding", "platform-toolplane-manager"))
		Expect(rb.Namespace).To(Equal("agents"))
		Expect(rb.Subjects).To(ConsistOf(rbacv1.Subject{Kind: "ServiceAccount", Name: "toolplane-operator", Namespace: "ops"}))
		Expect(m.ofKind("ClusterRole").manager()).To(HaveLen(1), "rbac.aggregateToDefaultRoles is off")

		sm := m.named("ServiceMonitor", "platform-toolplane")
		Expect(sm.GetLabels()).To(HaveKeyWithValue("release", "prometheus"))
		svc := m.named("Service", "platform-toolplane-metrics")
		Expect(svc.GetAnnotations()).To(HaveKeyWithValue("example.com/team", "platform"))
		// The ServiceMonitor must select the metrics Service.
		smSelector, found, err := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeTrue())
		Expect(smSelector).NotTo(BeEmpty())
		for k, v := range smSelector {
			Expect(svc.GetLabels()).To(HaveKeyWithValue(k, v))
		}

		crd := m.named("CustomResourceDefinition", "toolsets.toolplane.io")
		Expect(crd.GetAnnotations()).NotTo(HaveKey("helm.sh/resource-policy"), "crds.keep is off")
	})

	It("turns metrics off with --metrics-bind-address=0 and serves no metrics Service", func() {
		m := helmTemplate("toolplane", "toolplane-system", "--set", "metrics.enabled=false")
		args, _ := managerContainer(fromUnstructured[appsv1.Deployment](m.named("Deployment", "toolplane")))
		Expect(args).To(ContainElement("--metrics-bind-address=0"))
		Expect(m.ofKind("Service").manager()).To(BeEmpty())

		out, err := helm("template", "toolplane", chartDir, "--set", "metrics.enabled=false", "--set", "metrics.serviceMonitor.enabled=true")
		Expect(err).To(HaveOccurred(), "a ServiceMonitor with nothing to scrape")
		Expect(out).To(ContainSubstring("metrics.serviceMonitor.enabled needs"))
	})

	DescribeTable("the CRD switches",
		func(args []string, wantCRD, wantKeep bool) {
			m := helmTemplate("toolplane", "toolplane-system", args...)
			crds := m.ofKind("CustomResourceDefinition")
			if !wantCRD {
				Expect(crds).To(BeEmpty())
				return
			}
			Expect(crds).To(HaveLen(len(readManifestDir("config/crd/bases"))))
			for _, crd := range crds {
				if wantKeep {
					Expect(crd.GetAnnotations()).To(HaveKeyWithValue("helm.sh/resource-policy", "keep"))
				} else {
					Expect(crd.GetAnnotations()).NotTo(HaveKey("helm.sh/resource-policy"))
				}
			}
		},
		Entry("by default, installed and kept on uninstall", nil, true, true),
		Entry("crds.keep=false, installed and removed on uninstall", []string{"--set", "crds.keep=false"}, true, false),
		Entry("crds.enabled=false, left to the user", []string{"--set", "crds.enabled=false"}, false, false),
	)

	DescribeTable("rejects values that would not work",
		func(want string, args ...string) {
			out, err := helm(append([]string{"template", "toolplane", chartDir}, args...)...)
			Expect(err).To(HaveOccurred(), "helm template accepted %v:\n%s", args, out)
			Expect(out).To(ContainSubstring(want))
		},
		Entry("a misspelt key", "additional properties 'replicas' not allowed", "--set", "replicas=2"),
		Entry("an unknown log level", "logLevel", "--set", "logLevel=verbose"),
		Entry("a zero scrape concurrency", "maxConcurrent", "--set", "scrape.maxConcurrent=0"),
		Entry("an invalid table name", "table", "--set", "table.name=Not_A_Name"),
		Entry("several replicas without leader election", "needs leaderElection.enabled",
			"--set", "replicaCount=3", "--set", "leaderElection.enabled=false"),
	)

	It("passes the manager only flags it knows", func(ctx context.Context) {
		manager := buildCommand(ctx, "manager")

		// -h after the rendered arguments: the flag package rejects an
		// unknown flag (exit 2) before it gets to -h (exit 0).
		run := func(args []string) (string, error) {
			out, err := exec.CommandContext(ctx, manager, append(args, "-h")...).CombinedOutput()
			return string(out), err
		}
		out2, err := run([]string{"--no-such-flag=1"})
		Expect(err).To(HaveOccurred(), "the manager accepted an unknown flag, so this check proves nothing:\n%s", out2)

		renderings := map[string]manifests{
			"chart, default values": helmTemplate("toolplane", "toolplane-system"),
			"chart, custom values":  helmTemplate("custom", "ops", "-f", customValues),
			"chart, metrics off":    helmTemplate("toolplane", "toolplane-system", "--set", "metrics.enabled=false", "--set", "leaderElection.enabled=false"),
			"config/default":        kustomizeBuild("config/default"),
		}
		for name, m := range renderings {
			for _, u := range m.ofKind("Deployment").manager() {
				args, ok := managerContainer(fromUnstructured[appsv1.Deployment](u))
				Expect(ok).To(BeTrue(), "%s: no manager container", name)
				out, err := run(args)
				Expect(err).NotTo(HaveOccurred(), "%s: the manager rejects %q:\n%s", name, args, out)
			}
		}
	})

	It("documents every value in its README, with its default", func() {
		raw, err := os.ReadFile(filepath.Join(repoRoot, chartDir, "values.yaml"))
		Expect(err).NotTo(HaveOccurred())
		var values map[string]any
		Expect(yaml.Unmarshal(raw, &values)).To(Succeed())
		raw, err = os.ReadFile(filepath.Join(repoRoot, chartDir, "values.schema.json"))
		Expect(err).NotTo(HaveOccurred())
		var schema map[string]any
		Expect(json.Unmarshal(raw, &schema)).To(Succeed())
		want := map[string]string{}
		valueLeaves("", values, schema, want)
		Expect(want).To(HaveKey("scrape.maxResponseBytes"), "the walk over values.yaml found nothing")

		readme, err := os.ReadFile(filepath.Join(repoRoot, chartDir, "README.md"))
		Expect(err).NotTo(HaveOccurred())
		got := map[string]string{}
		row := regexp.MustCompile("^\\|\\s*`([^`]+)`\\s*\\|\\s*`([^`]*)`\\s*\\|")
		for line := range strings.Lines(string(readme)) {
			if sm := row.FindStringSubmatch(line); sm != nil {
				got[sm[1]] = sm[2]
			}
		}
		var expected strings.Builder
		for k, v := range want {
			expected.WriteString("| `" + k + "` | `" + v + "` | … |\n")
		}
		Expect(got).To(Equal(want), "the README's values table (key, default) differs from values.yaml; its rows should be:\n%s", expected.String())
	})
})

// valueLeaves records, for every documented value, its default as compact
// JSON. A value is documented as a whole unless the schema lists its
// properties; then each property is.
func valueLeaves(prefix string, v any, schema map[string]any, out map[string]string) {
	props, _ := schema["properties"].(map[string]any)
	if m, ok := v.(map[string]any); ok && props != nil {
		for k, sub := range m {
			subSchema, _ := props[k].(map[string]any)
			valueLeaves(prefix+k+".", sub, subSchema, out)
		}
		return
	}
	js, err := json.Marshal(v)
	Expect(err).NotTo(HaveOccurred())
	out[strings.TrimSuffix(prefix, ".")] = string(js)
}
