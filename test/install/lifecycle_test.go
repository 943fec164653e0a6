package install

import (
	"context"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
		_, err = dyn.Resource(crdResource).Patch(ctx, "toolsets.toolplane.io", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())

		By("installing, as the README does")
		out := helmIn("install", release, chartDir, "-n", ns, "--create-namespace")
		Expect(out).To(ContainSubstring(`kubectl get configmap toolplane-tools -n `+ns+` -o jsonpath='{.data.tools\.json}'`), "NOTES.txt")
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, "lifecycle-toolplane", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--zap-log-level=info"))
		_, err = kube.RbacV1().Roles(ns).Get(ctx, "lifecycle-toolplane-manager", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())

		By("upgrading with one value changed")
		helmIn("upgrade", release, chartDir, "-n", ns, "--reuse-values", "--set", "logLevel=debug")
		d, err = kube.AppsV1().Deployments(ns).Get(ctx, "lifecycle-toolplane", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--zap-log-level=debug"))

		By("uninstalling")
		out = helmIn("uninstall", release, "-n", ns)
		Expect(out).To(ContainSubstring("kept due to the resource policy:\n[CustomResourceDefinition] toolsets.toolplane.io"))
		_, err = kube.AppsV1().Deployments(ns).Get(ctx, "lifecycle-toolplane", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Deployment outlived the release: %v", err)
		_, err = kube.RbacV1().ClusterRoles().Get(ctx, "lifecycle-toolplane-manager", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the ClusterRole outlived the release: %v", err)
		crd, err := dyn.Resource(crdResource).Get(ctx, "toolsets.toolplane.io", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "crds.keep did not keep the CRD")
		Expect(crd.GetDeletionTimestamp()).To(BeNil())
	})
})
