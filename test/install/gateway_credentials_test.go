package install

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit/spec"
)

var _ = Describe("The chart's gateway backend credentials", func() {
	It("read a ToolSet's token as the gateway's ServiceAccount where credentialNamespaces grants it, and nowhere else", func(ctx context.Context) {
		const releaseNS, tenantNS, otherNS = "gw-creds", "gw-creds-tenant", "gw-creds-other"
		m := helmTemplate("gw-creds", releaseNS, "--set", "gateway.backends.credentialNamespaces={"+tenantNS+"}")
		var rbacObjects manifests
		for _, kind := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
			rbacObjects = append(rbacObjects, m.ofKind(kind).gateway()...)
		}
		ensureNamespaces(ctx, releaseNS, tenantNS, otherNS)
		Expect(apply(ctx, rbacObjects, "", false)).To(Succeed())

		scheme := runtime.NewScheme()
		Expect(corev1.AddToScheme(scheme)).To(Succeed())
		Expect(v1alpha1.AddToScheme(scheme)).To(Succeed())
		admin, err := client.New(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		for _, ns := range []string{tenantNS, otherNS} {
			Expect(admin.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mcp-token"},
				Data:       map[string][]byte{"token": []byte("token-of-" + ns)},
			})).To(Succeed())
			Expect(admin.Create(ctx, &v1alpha1.ToolSet{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "secure"},
				Spec: v1alpha1.ToolSetSpec{
					Protocol: v1alpha1.ProtocolMCP, Scheme: "https", Port: intstr.FromInt32(8443),
					Authorization: &v1alpha1.Authorization{BearerToken: v1alpha1.KeyReference{Name: "mcp-token", Key: "token"}},
				},
			})).To(Succeed())
		}

		sa := m.ofKind("ServiceAccount").gateway()[0]
		user, err := testEnv.AddUser(envtest.User{
			Name:   fmt.Sprintf("system:serviceaccount:%s:%s", sa.GetNamespace(), sa.GetName()),
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + sa.GetNamespace()},
		}, nil)
		Expect(err).NotTo(HaveOccurred())
		reader, err := client.New(user.Config(), client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		creds := &gateway.KubernetesCredentials{Reader: reader}

		Eventually(func(g Gomega, ctx context.Context) {
			c, err := creds.BackendCredentials(ctx, spec.ObjectReference{Namespace: tenantNS, Name: "secure"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c.BearerToken).To(Equal("token-of-" + tenantNS))
		}).WithContext(ctx).WithTimeout(eventuallyTimeout).Should(Succeed())

		_, err = creds.BackendCredentials(ctx, spec.ObjectReference{Namespace: otherNS, Name: "secure"})
		Expect(err).To(MatchError(ContainSubstring("Secret mcp-token")))
		Expect(err).To(MatchError(ContainSubstring("may not read it")))
		Expect(err.Error()).NotTo(ContainSubstring("token-of-"), "an error never holds a secret")
	})
})
