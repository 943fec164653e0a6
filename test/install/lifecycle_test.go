package install

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// helm install, upgrade and uninstall for real against the envtest API
// server, as the README tells users to.
var _ = Describe("The chart's release lifecycle", func() {
	It("installs, upgrades, and uninstalls leaving the CRD and its ToolSets in place", func(ctx context.Context) {
		const release, ns = "lifecycle", "lifecycle-system"
		admin, err := testEnv.AddUser(envtest.User{Name: "helm-user", Groups: []string{"system:masters"}}, nil)
		Expect(err).NotTo(HaveOccurred())
		kubeconfig, err := admin.KubeConfig()
		Expect(err).NotTo(HaveOccurred())
		kubeconfigPath := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
		Expect(os.WriteFile(kubeconfigPath, kubeconfig, 0o600)).To(Succeed())
		helmIn := func(args ...string) string {
			GinkgoHelper()
			out, err := helm(append(args, "--kubeconfig", kubeconfigPath)...)
			Expect(err).NotTo(HaveOccurred(), "helm %v:\n%s", args, out)
			return out
		}

		// envtest installed the CRD before the release existed, as a user
		// who applied config/crd would have; Helm adopts an object that
		// carries its release's ownership metadata.
		patch := `{"metadata":{"labels":{"app.kubernetes.io/managed-by":"Helm"},` +
			`"annotations":{"meta.helm.sh/release-name":"` + release + `","meta.helm.sh/release-namespace":"` + ns + `"}}}`
		for _, name := range toolplaneCRDs {
			_, err = dyn.Resource(crdResource).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			Expect(err).NotTo(HaveOccurred())
		}

		By("installing, as the README does")
		out := helmIn("install", release, chartDir, "-n", ns, "--create-namespace")
		Expect(out).To(ContainSubstring(`kubectl get configmap toolplane-tools -n `+ns+` -o jsonpath='{.data.tools\.json}'`), "NOTES.txt")
		Expect(out).To(ContainSubstring("https://lifecycle-toolplane-gateway."+ns+".svc/mcp"), "NOTES.txt")
		Expect(out).To(ContainSubstring(`kubectl get configmap lifecycle-toolplane-gateway-ca -n `+ns+` -o jsonpath='{.data.ca\.crt}'`), "NOTES.txt")
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, "lifecycle-toolplane", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--zap-log-level=info"))
		_, err = kube.RbacV1().Roles(ns).Get(ctx, "lifecycle-toolplane-manager", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())

		servingPair, err := kube.CoreV1().Secrets(ns).Get(ctx, "lifecycle-toolplane-gateway-tls", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "the gateway's generated serving certificate")
		Expect(servingPair.Data).To(HaveKey("tls.crt"))

		By("upgrading with one value changed")
		helmIn("upgrade", release, chartDir, "-n", ns, "--reset-then-reuse-values", "--set", "logLevel=debug")
		d, err = kube.AppsV1().Deployments(ns).Get(ctx, "lifecycle-toolplane", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--zap-log-level=debug"))
		By("keeping the gateway's certificate and CA across the upgrade, which agents trust")
		kept, err := kube.CoreV1().Secrets(ns).Get(ctx, "lifecycle-toolplane-gateway-tls", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(kept.Data).To(Equal(servingPair.Data), "an upgrade made a new serving certificate: every agent's trust breaks")
		ca, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "lifecycle-toolplane-gateway-ca", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(ca.Data["ca.crt"]).To(Equal(string(servingPair.Data["ca.crt"])))
		By("making a new pair for new DNS names")
		helmIn("upgrade", release, chartDir, "-n", ns, "--reset-then-reuse-values", "--set", "clusterDomain=corp.example")
		renewed, err := kube.CoreV1().Secrets(ns).Get(ctx, "lifecycle-toolplane-gateway-tls", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(renewed.Data["tls.crt"]).NotTo(Equal(servingPair.Data["tls.crt"]), "the certificate no longer names the Service")
		helmIn("upgrade", release, chartDir, "-n", ns, "--reset-then-reuse-values", "--set", "clusterDomain=cluster.local")

		By("upgrading to a chart version that adds a value, as the README says")
		next := chartWithNewValue()
		out, err = helm("upgrade", release, next, "-n", ns, "--reuse-values", "--kubeconfig", kubeconfigPath)
		Expect(err).To(HaveOccurred(), "--reuse-values kept the old chart's values, so the new value is missing: this upgrade should fail\n%s", out)
		helmIn("upgrade", release, next, "-n", ns, "--reset-then-reuse-values")
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "lifecycle-toolplane-next", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "the new chart's default did not apply")
		Expect(cm.Data).To(HaveKeyWithValue("greeting", "hello"))
		d, err = kube.AppsV1().Deployments(ns).Get(ctx, "lifecycle-toolplane", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--zap-log-level=debug"), "the value the user set was lost")

		By("uninstalling")
		out = helmIn("uninstall", release, "-n", ns)
		Expect(out).To(ContainSubstring("kept due to the resource policy:"))
		for _, name := range toolplaneCRDs {
			Expect(out).To(ContainSubstring("[CustomResourceDefinition] " + name))
		}
		_, err = kube.AppsV1().Deployments(ns).Get(ctx, "lifecycle-toolplane", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Deployment outlived the release: %v", err)
		_, err = kube.RbacV1().ClusterRoles().Get(ctx, "lifecycle-toolplane-manager", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the ClusterRole outlived the release: %v", err)
		crd, err := dyn.Resource(crdResource).Get(ctx, "toolsets.toolplane.io", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "crds.keep did not keep the CRD")
		Expect(crd.GetDeletionTimestamp()).To(BeNil())
	})
})

var _ = Describe("The chart's CRD guard", func() {
	It("refuses an upgrade that would delete the CRD and every ToolSet, unless told so", func(ctx context.Context) {
		const release, ns = "guard", "guard-system"
		kubeconfigPath := adminKubeconfig()
		helmIn := func(args ...string) string {
			GinkgoHelper()
			out, err := helm(append(args, "--kubeconfig", kubeconfigPath)...)
			Expect(err).NotTo(HaveOccurred(), "helm %v:\n%s", args, out)
			return out
		}
		adoptCRD(ctx, release, ns)

		By("installing with crds.keep=false, so nothing protects the CRD")
		helmIn("install", release, chartDir, "-n", ns, "--create-namespace", "--set", "crds.keep=false")
		ensureNamespaces(ctx, "guard-tenant")
		toolset := &unstructured.Unstructured{}
		toolset.SetAPIVersion("toolplane.io/v1alpha1")
		toolset.SetKind("ToolSet")
		toolset.SetName("precious")
		Expect(unstructured.SetNestedField(toolset.Object, map[string]any{"matchLabels": map[string]any{"app": "precious"}}, "spec", "selector")).To(Succeed())
		Expect(unstructured.SetNestedField(toolset.Object, "http", "spec", "port")).To(Succeed())
		Expect(apply(ctx, manifests{toolset}, "guard-tenant", false)).To(Succeed())

		By("refusing crds.enabled=false")
		out, err := helm("upgrade", release, chartDir, "-n", ns, "--reset-then-reuse-values", "--set", "crds.enabled=false", "--kubeconfig", kubeconfigPath)
		Expect(err).To(HaveOccurred(), "the upgrade went through:\n%s", out)
		Expect(out).To(ContainSubstring("crds.confirmDeletion=true"))
		crd, err := dyn.Resource(crdResource).Get(ctx, "toolsets.toolplane.io", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(crd.GetDeletionTimestamp()).To(BeNil())
		_, err = dyn.Resource(toolsetResource).Namespace("guard-tenant").Get(ctx, "precious", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())

		By("handing the CRD over safely: crds.keep=true first, then crds.enabled=false")
		helmIn("upgrade", release, chartDir, "-n", ns, "--reset-then-reuse-values", "--set", "crds.keep=true")
		helmIn("upgrade", release, chartDir, "-n", ns, "--reset-then-reuse-values", "--set", "crds.enabled=false")
		crd, err = dyn.Resource(crdResource).Get(ctx, "toolsets.toolplane.io", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(crd.GetDeletionTimestamp()).To(BeNil())
		_, err = dyn.Resource(toolsetResource).Namespace("guard-tenant").Get(ctx, "precious", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())

		helmIn("uninstall", release, "-n", ns)
		_, err = dyn.Resource(crdResource).Get(ctx, "toolsets.toolplane.io", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
	})
})

var toolsetResource = schema.GroupVersionResource{Group: "toolplane.io", Version: "v1alpha1", Resource: "toolsets"}

// adminKubeconfig writes a kubeconfig of a cluster admin, for helm.
func adminKubeconfig() string {
	GinkgoHelper()
	admin, err := testEnv.AddUser(envtest.User{Name: "helm-user", Groups: []string{"system:masters"}}, nil)
	Expect(err).NotTo(HaveOccurred())
	kubeconfig, err := admin.KubeConfig()
	Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
	Expect(os.WriteFile(path, kubeconfig, 0o600)).To(Succeed())
	return path
}

// adoptCRD marks the CRDs that envtest installed as the release's, as Helm
// adopts an object that carries its release's ownership metadata, and takes
// off any keep policy a previous release left.
func adoptCRD(ctx context.Context, release, namespace string) {
	GinkgoHelper()
	patch := `{"metadata":{"labels":{"app.kubernetes.io/managed-by":"Helm"},` +
		`"annotations":{"meta.helm.sh/release-name":"` + release + `","meta.helm.sh/release-namespace":"` + namespace + `","helm.sh/resource-policy":null}}}`
	for _, name := range toolplaneCRDs {
		_, err := dyn.Resource(crdResource).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
	}
}

// toolplaneCRDs are the CRDs the chart installs.
var toolplaneCRDs = []string{"toolnamepolicies.toolplane.io", "toolsets.toolplane.io"}

// chartWithNewValue copies the chart and adds a value that a template reads
// through a nested key, as a new chart version would: rendering it with the
// old release's values alone (--reuse-values) dereferences a missing map.
func chartWithNewValue() string {
	GinkgoHelper()
	dir := filepath.Join(GinkgoT().TempDir(), "toolplane")
	Expect(os.CopyFS(dir, os.DirFS(filepath.Join(repoRoot, chartDir)))).To(Succeed())
	values, err := os.ReadFile(filepath.Join(dir, "values.yaml"))
	Expect(err).NotTo(HaveOccurred())
	values = append(values, "\nnext:\n  greeting: hello\n"...)
	Expect(os.WriteFile(filepath.Join(dir, "values.yaml"), values, 0o600)).To(Succeed())
	schema, err := os.ReadFile(filepath.Join(dir, "values.schema.json"))
	Expect(err).NotTo(HaveOccurred())
	schema = []byte(strings.Replace(string(schema), `"properties": {`, `"properties": {"next": {"type": "object"},`, 1))
	Expect(os.WriteFile(filepath.Join(dir, "values.schema.json"), schema, 0o600)).To(Succeed())
	tmpl := `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "toolplane.fullname" . }}-next
  namespace: {{ .Release.Namespace }}
data:
  greeting: {{ .Values.next.greeting | quote }}
`
	Expect(os.WriteFile(filepath.Join(dir, "templates", "next.yaml"), []byte(tmpl), 0o600)).To(Succeed())
	return dir
}
