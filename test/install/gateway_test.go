package install

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/test/harness"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// gatewayContainer returns the gateway container of a rendered Deployment.
func gatewayContainer(d *appsv1.Deployment) (corev1.Container, bool) {
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "gateway" {
			return c, true
		}
	}
	return corev1.Container{}, false
}

var _ = Describe("The chart's gateway", func() {
	It("deploys two hardened replicas behind Service toolplane-gateway, with a PodDisruptionBudget", func() {
		m := helmTemplate("toolplane", "toolplane-system")
		d := fromUnstructured[appsv1.Deployment](m.named("Deployment", "toolplane-gateway"))
		Expect(*d.Spec.Replicas).To(BeEquivalentTo(2))
		Expect(hardeningProblems(d)).To(BeEmpty())
		c, ok := gatewayContainer(d)
		Expect(ok).To(BeTrue())
		Expect(c.Command).To(Equal([]string{"/gateway"}))
		Expect(c.Image).To(Equal("ghcr.io/toolplane/toolplane:0.1.0"))
		Expect(c.Args).To(ContainElements("--addr=:8080", "--table-namespace=toolplane-system", "--table-name=toolplane-tools", "--cluster-domain=cluster.local", "--auth=none"))
		Expect(d.Spec.Template.Spec.ServiceAccountName).To(Equal("toolplane-gateway"))

		podLabels := labels.Set(d.Spec.Template.Labels)
		svc := fromUnstructured[corev1.Service](m.named("Service", "toolplane-gateway"))
		Expect(labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels)).To(BeTrue())
		Expect(svc.Spec.Ports).To(ContainElement(And(HaveField("Port", BeEquivalentTo(443)), HaveField("TargetPort.StrVal", "mcp"))))
		// The manager's Services must not select the gateway, and the
		// gateway's must not select the manager.
		for _, u := range m.ofKind("Service").manager() {
			s := fromUnstructured[corev1.Service](u)
			Expect(labels.SelectorFromSet(s.Spec.Selector).Matches(podLabels)).To(BeFalse(), s.Name)
		}
		manager := fromUnstructured[appsv1.Deployment](m.named("Deployment", "toolplane"))
		Expect(labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(manager.Spec.Template.Labels))).To(BeFalse())

		pdb := fromUnstructured[policyv1.PodDisruptionBudget](m.named("PodDisruptionBudget", "toolplane-gateway"))
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		Expect(err).NotTo(HaveOccurred())
		Expect(sel.Matches(podLabels)).To(BeTrue())
		Expect(pdb.Spec.MaxUnavailable.IntValue()).To(Equal(1))

		By("with auth=none it may not review tokens or access: its ClusterRoles are those of backend credentials only")
		var clusterRoles []string
		for _, u := range m.ofKind("ClusterRole").gateway() {
			clusterRoles = append(clusterRoles, u.GetName())
		}
		Expect(clusterRoles).To(ConsistOf("toolplane-gateway-toolsets", "toolplane-gateway-backend-credentials"))
		Expect(m.ofKind("RoleBinding").gateway()).To(HaveLen(1), "the backend credentials are bound in no namespace by default")
	})

	It("renders nothing of the gateway with gateway.enabled=false", func() {
		m := helmTemplate("toolplane", "toolplane-system", "--set", "gateway.enabled=false")
		Expect(m.gateway()).To(BeEmpty())
	})

	It("refuses sessions on several replicas without sticky sessions", func() {
		out, err := helm("template", "t", chartDir, "--set", "gateway.sessions=true")
		Expect(err).To(HaveOccurred())
		Expect(out).To(ContainSubstring("sticky sessions"))
	})

	It("passes the gateway only flags it knows", func(ctx context.Context) {
		gw := buildCommand(ctx, "gateway")
		run := func(args []string) (string, error) {
			out, err := exec.CommandContext(ctx, gw, append(args, "-h")...).CombinedOutput()
			return string(out), err
		}
		out, err := run([]string{"--no-such-flag=1"})
		Expect(err).To(HaveOccurred(), "the gateway accepted an unknown flag, so this check proves nothing:\n%s", out)
		for name, m := range map[string]manifests{
			"default values": helmTemplate("toolplane", "toolplane-system"),
			"custom values":  helmTemplate("custom", "ops", "-f", customValues),
			"oidc values":    helmTemplate("oidc", "ops", "-f", oidcValues),
			"config/default": kustomizeBuild("config/default"),
		} {
			c, ok := gatewayContainer(fromUnstructured[appsv1.Deployment](m.ofKind("Deployment").gateway()[0]))
			Expect(ok).To(BeTrue(), name)
			out, err := run(c.Args)
			Expect(err).NotTo(HaveOccurred(), "%s: the gateway rejects %q:\n%s", name, c.Args, out)
		}
		custom := helmTemplate("custom", "ops", "-f", customValues)
		c, _ := gatewayContainer(fromUnstructured[appsv1.Deployment](custom.ofKind("Deployment").gateway()[0]))
		Expect(c.Args).To(ContainElements("--auth=kubernetes", "--token-audience=toolplane-gateway", "--sessions",
			"--table-namespace=agents", "--metrics-bind-address=0", "--list-ttl=5s", "--cluster-domain=corp.example",
			"--auth-deny-cache-ttl=30s", "--auth-qps=50.5", "--auth-burst=80", "--max-reviews-per-request=300",
			"--txn-token-key-dir=/etc/toolplane/txn-keys", "--txn-token-lifetime=30s"))

		By("with oidc, the AuthenticationConfiguration is a ConfigMap mounted where the flag says")
		oidc := helmTemplate("oidc", "ops", "-f", oidcValues)
		d := fromUnstructured[appsv1.Deployment](oidc.ofKind("Deployment").gateway()[0])
		c, _ = gatewayContainer(d)
		Expect(c.Args).To(ContainElements("--auth=kubernetes,oidc", "--public-url=https://tools.example.com", "--oauth-scopes=openid",
			"--authentication-config=/etc/toolplane/authentication/authentication-config.yaml"))
		Expect(c.VolumeMounts).To(ContainElement(HaveField("MountPath", "/etc/toolplane/authentication")))
		Expect(d.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("ConfigMap.Name", "oidc-toolplane-gateway-authentication")))
		cm := fromUnstructured[corev1.ConfigMap](oidc.named("ConfigMap", "oidc-toolplane-gateway-authentication"))
		_, err = gateway.ParseAuthenticationConfiguration([]byte(cm.Data["authentication-config.yaml"]))
		Expect(err).NotTo(HaveOccurred(), "the gateway refuses the chart's ConfigMap:\n%s", cm.Data["authentication-config.yaml"])
	})

	It("signs transaction tokens under auth with a key it generates into a Secret, mounted where the gateway reads it", func() {
		// The gateway's Secrets by name: the serving certificate's is there
		// with TLS on, whatever the auth.
		secretNames := func(m manifests) []string {
			var names []string
			for _, u := range m.ofKind("Secret").gateway() {
				names = append(names, u.GetName())
			}
			return names
		}
		Expect(secretNames(helmTemplate("toolplane", "toolplane-system"))).NotTo(ContainElement("toolplane-gateway-txn-keys"),
			"with auth=none no token is minted, so no key is made")
		m := helmTemplate("toolplane", "toolplane-system", "--set", "gateway.auth=kubernetes")
		d := fromUnstructured[appsv1.Deployment](m.named("Deployment", "toolplane-gateway"))
		c, ok := gatewayContainer(d)
		Expect(ok).To(BeTrue())
		dir := flagValue(c.Args, "--txn-token-key-dir")
		Expect(dir).NotTo(BeEmpty())
		Expect(c.VolumeMounts).To(ContainElement(And(HaveField("MountPath", dir), HaveField("ReadOnly", true), HaveField("SubPath", ""))))
		secret := fromUnstructured[corev1.Secret](m.named("Secret", "toolplane-gateway-txn-keys"))
		Expect(d.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("Secret.SecretName", secret.Name)))
		Expect(secret.Data).To(HaveKey(gateway.CurrentKeyFile))
		Expect(hardeningProblems(d)).To(BeEmpty())

		By("the generated key is one the gateway signs with")
		keys := GinkgoT().TempDir()
		Expect(os.WriteFile(filepath.Join(keys, gateway.CurrentKeyFile), secret.Data[gateway.CurrentKeyFile], 0o600)).To(Succeed())
		_, err := gateway.NewTxnTokens(gateway.TxnTokenOptions{KeyDir: keys})
		Expect(err).NotTo(HaveOccurred())

		By("gateway.txnToken.existingSecret mounts a Secret of the user's instead")
		m = helmTemplate("toolplane", "toolplane-system", "--set", "gateway.auth=kubernetes", "--set", "gateway.txnToken.existingSecret=mine")
		Expect(secretNames(m)).NotTo(ContainElement("toolplane-gateway-txn-keys"))
		d = fromUnstructured[appsv1.Deployment](m.named("Deployment", "toolplane-gateway"))
		Expect(d.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("Secret.SecretName", "mine")))
	})

	It("seals task ids with a key it generates once into a Secret, mounted where --task-key-file reads it", func() {
		m := helmTemplate("toolplane", "toolplane-system")
		d := fromUnstructured[appsv1.Deployment](m.named("Deployment", "toolplane-gateway"))
		c, ok := gatewayContainer(d)
		Expect(ok).To(BeTrue())
		file := flagValue(c.Args, "--task-key-file")
		Expect(c.VolumeMounts).To(ContainElement(And(HaveField("MountPath", filepath.Dir(file)), HaveField("ReadOnly", true), HaveField("SubPath", ""))))
		secret := fromUnstructured[corev1.Secret](m.named("Secret", "toolplane-gateway-task-key"))
		Expect(d.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("Secret.SecretName", secret.Name)))
		Expect(flagValue(c.Args, "--max-tasks-per-caller")).To(Equal("16"))
		Expect(flagValue(c.Args, "--max-task-ttl")).To(Equal("1h"))

		By("the generated key is one the gateway takes")
		keyFile := filepath.Join(GinkgoT().TempDir(), filepath.Base(file))
		Expect(os.WriteFile(keyFile, secret.Data[filepath.Base(file)], 0o600)).To(Succeed())
		_, err := gateway.LoadTaskKey(keyFile)
		Expect(err).NotTo(HaveOccurred())

		By("gateway.tasks.existingSecret mounts a Secret of the user's instead")
		m = helmTemplate("toolplane", "toolplane-system", "--set", "gateway.tasks.existingSecret=mine")
		Expect(m.ofKind("Secret").gateway()).NotTo(ContainElement(HaveField("Object", HaveKeyWithValue("metadata", HaveKeyWithValue("name", "toolplane-gateway-task-key")))))
		d = fromUnstructured[appsv1.Deployment](m.named("Deployment", "toolplane-gateway"))
		Expect(d.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("Secret.SecretName", "mine")))
	})

	It("refuses oidc without a public URL or an authentication configuration", func() {
		out, err := helm("template", "t", chartDir, "--set", "gateway.auth=oidc", "--set", "gateway.oidc.existingConfigMap=mine")
		Expect(err).To(HaveOccurred())
		Expect(out).To(ContainSubstring("gateway.publicURL"))
		out, err = helm("template", "t", chartDir, "--set", "gateway.auth=oidc", "--set", "gateway.publicURL=https://tools.example.com")
		Expect(err).To(HaveOccurred())
		Expect(out).To(ContainSubstring("gateway.oidc.authenticationConfig"))
	})

	It("lets the gateway read ConfigMaps in the table namespace, get ToolSets, get Secrets and ConfigMaps only in the namespaces granted, review access only with auth, and tokens only with kubernetes in it", func(ctx context.Context) {
		const releaseNS, tableNS, otherNS, tenantNS = "gw-sar", "gw-sar-table", "gw-sar-other", "gw-sar-tenant"
		type access struct{ verb, group, resource, namespace string }
		for _, auth := range []string{"none", "kubernetes", "oidc", "kubernetes,oidc"} {
			// Under auth, one tenant namespace is granted backend credentials.
			args := []string{"--set", "table.namespace=" + tableNS, "--set", "gateway.auth=" + strings.ReplaceAll(auth, ",", "\\,"),
				"--set", "gateway.publicURL=https://tools.example.com", "--set", "gateway.oidc.existingConfigMap=idp"}
			if auth != "none" {
				args = append(args, "--set", "gateway.backends.credentialNamespaces={"+tenantNS+"}")
			}
			m := helmTemplate("gw-"+strings.ReplaceAll(auth, ",", "-"), releaseNS, args...)
			var rbacObjects manifests
			for _, kind := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
				rbacObjects = append(rbacObjects, m.ofKind(kind).gateway()...)
			}
			ensureNamespaces(ctx, releaseNS, tableNS, otherNS, tenantNS)
			Expect(apply(ctx, rbacObjects, "", false)).To(Succeed())
			sa := m.ofKind("ServiceAccount").gateway()[0]
			user := fmt.Sprintf("system:serviceaccount:%s:%s", sa.GetNamespace(), sa.GetName())
			can := func(ctx context.Context, a access) (bool, error) {
				review, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
					Spec: authorizationv1.SubjectAccessReviewSpec{
						User:   user,
						Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + releaseNS, "system:authenticated"},
						ResourceAttributes: &authorizationv1.ResourceAttributes{
							Verb: a.verb, Group: a.group, Resource: a.resource, Namespace: a.namespace,
						},
					},
				}, metav1.CreateOptions{})
				if err != nil {
					return false, err
				}
				return review.Status.Allowed, nil
			}
			allowed := []access{
				{"get", "", "configmaps", tableNS},
				{"list", "", "configmaps", tableNS},
				{"watch", "", "configmaps", tableNS},
				{"get", "toolplane.io", "toolsets", otherNS},
			}
			denied := []access{
				{"watch", "toolplane.io", "toolsets", ""},
				{"get", "", "secrets", otherNS},
				{"list", "", "secrets", tenantNS},
				{"watch", "", "secrets", tenantNS},
				{"list", "", "configmaps", otherNS},
				{"list", "", "configmaps", ""},
				{"update", "", "configmaps", tableNS},
				{"get", "", "secrets", tableNS},
				{"list", "", "pods", ""},
				{"list", "toolplane.io", "toolsets", ""},
			}
			// TokenReviews for ServiceAccount tokens only: an IdP's the
			// gateway checks itself.
			tokens := access{"create", "authentication.k8s.io", "tokenreviews", ""}
			if strings.Contains(auth, "kubernetes") {
				allowed = append(allowed, tokens)
			} else {
				denied = append(denied, tokens)
			}
			sar := access{"create", "authorization.k8s.io", "subjectaccessreviews", ""}
			credentials := []access{
				{"get", "", "secrets", tenantNS},
				{"get", "", "configmaps", tenantNS},
			}
			if auth != "none" {
				allowed = append(allowed, sar)
				allowed = append(allowed, credentials...)
			} else {
				denied = append(denied, sar)
				denied = append(denied, credentials...)
			}
			Eventually(func(g Gomega, ctx context.Context) {
				for _, a := range allowed {
					ok, err := can(ctx, a)
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(ok).To(BeTrue(), "auth=%s: %+v denied", auth, a)
				}
			}).WithContext(ctx).WithTimeout(eventuallyTimeout).Should(Succeed())
			for _, a := range denied {
				ok, err := can(ctx, a)
				Expect(err).NotTo(HaveOccurred())
				Expect(ok).To(BeFalse(), "auth=%s: %+v allowed", auth, a)
			}
		}
	})
})

// runChartGateway runs the gateway binary as a rendering's gateway
// Deployment would: with its arguments, authenticated as its
// ServiceAccount and so held to its RBAC (which the caller has applied).
// Only the listen addresses are free loopback ones.
func runChartGateway(ctx context.Context, m manifests) *harness.Gateway {
	GinkgoHelper()
	sa := m.ofKind("ServiceAccount").gateway()[0]
	user, err := testEnv.AddUser(envtest.User{
		Name:   fmt.Sprintf("system:serviceaccount:%s:%s", sa.GetNamespace(), sa.GetName()),
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + sa.GetNamespace()},
	}, nil)
	Expect(err).NotTo(HaveOccurred())
	kubeconfig, err := user.KubeConfig()
	Expect(err).NotTo(HaveOccurred())
	kubeconfigPath := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
	Expect(os.WriteFile(kubeconfigPath, kubeconfig, 0o600)).To(Succeed())
	d := fromUnstructured[appsv1.Deployment](m.ofKind("Deployment").gateway()[0])
	c, ok := gatewayContainer(d)
	Expect(ok).To(BeTrue())
	args := slices.DeleteFunc(slices.Clone(c.Args), func(a string) bool {
		return strings.HasPrefix(a, "--addr=") || strings.HasPrefix(a, "--metrics-bind-address=") ||
			strings.HasPrefix(a, "--health-probe-bind-address=") || strings.HasPrefix(a, "--table-namespace=")
	})
	tableNamespace := flagValue(c.Args, "--table-namespace")
	Expect(tableNamespace).NotTo(BeEmpty(), "the gateway runs with no --table-namespace")
	gw := &harness.Gateway{
		Bin:            buildCommand(ctx, "gateway"),
		Kubeconfig:     kubeconfigPath,
		TableNamespace: tableNamespace,
		Args:           args,
		LogPath:        filepath.Join(GinkgoT().TempDir(), "gateway.log"),
	}
	if flagValue(c.Args, "--tls-cert-file") != "" {
		gw.Args, gw.TLS = chartGatewayTLS(m, d, c, gw.Args)
	}
	if flagValue(c.Args, "--task-key-file") != "" {
		gw.Args = chartGatewayTaskKey(m, d, c, gw.Args)
	}
	printLogOnFailure("gateway", gw.LogPath)
	// Start returns once /readyz answers: once it holds the table.
	Expect(gw.Start(ctx)).To(Succeed())
	DeferCleanup(func() {
		Expect(gw.Stop(time.Duration(*d.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second)).To(Succeed())
	})
	return gw
}

// gatewayTable GETs /v1/tools from a running gateway.
func gatewayTable(ctx context.Context, gw *harness.Gateway) *spec.Table {
	GinkgoHelper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, gw.URL()+"/v1/tools", nil)
	Expect(err).NotTo(HaveOccurred())
	resp, err := gw.Client().Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	Expect(resp.StatusCode).To(Equal(http.StatusOK))
	b, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	t := &spec.Table{}
	Expect(json.Unmarshal(b, t)).To(Succeed())
	return t
}

// chartGatewayTaskKey puts the rendering's task key where the gateway's
// --task-key-file names it, as the Secret volume would, and returns the
// arguments pointing there.
func chartGatewayTaskKey(m manifests, d *appsv1.Deployment, c corev1.Container, args []string) []string {
	GinkgoHelper()
	var secretName, mountPath string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Secret != nil && v.Name == "task-key" {
			secretName = v.Secret.SecretName
		}
	}
	for _, vm := range c.VolumeMounts {
		if vm.Name == "task-key" {
			mountPath = vm.MountPath
		}
	}
	Expect(secretName).NotTo(BeEmpty(), "--task-key-file without a task-key Secret volume")
	secret := fromUnstructured[corev1.Secret](m.named("Secret", secretName))
	dir := GinkgoT().TempDir()
	args = slices.Clone(args)
	for i, a := range args {
		if name, p, ok := strings.Cut(a, "="); ok && name == "--task-key-file" {
			rel, err := filepath.Rel(mountPath, p)
			Expect(err).NotTo(HaveOccurred())
			Expect(rel).NotTo(HavePrefix(".."), "%s is not in the task-key volume's mount %s", a, mountPath)
			Expect(secret.Data).To(HaveKey(rel), "Secret %s has no key %s", secretName, rel)
			Expect(os.WriteFile(filepath.Join(dir, rel), secret.Data[rel], 0o600)).To(Succeed())
			args[i] = name + "=" + filepath.Join(dir, rel)
		}
	}
	return args
}

// chartGatewayTLS puts the rendering's generated serving pair where the
// gateway's --tls-cert-file and --tls-key-file name it, as the Secret
// volume would, and returns the arguments pointing there and a client
// configuration that trusts only the CA ConfigMap agents are told to
// trust, for the Service's name: what an agent in the cluster checks.
func chartGatewayTLS(m manifests, d *appsv1.Deployment, c corev1.Container, args []string) ([]string, *tls.Config) {
	GinkgoHelper()
	var secretName, mountPath string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Secret != nil && v.Name == "tls" {
			secretName = v.Secret.SecretName
		}
	}
	for _, vm := range c.VolumeMounts {
		if vm.Name == "tls" {
			mountPath = vm.MountPath
		}
	}
	Expect(secretName).NotTo(BeEmpty(), "--tls-cert-file without a tls Secret volume")
	secret := fromUnstructured[corev1.Secret](m.named("Secret", secretName))
	dir := GinkgoT().TempDir()
	for _, key := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey} {
		Expect(os.WriteFile(filepath.Join(dir, key), secret.Data[key], 0o600)).To(Succeed())
	}
	args = slices.Clone(args)
	for i, a := range args {
		if name, path, ok := strings.Cut(a, "="); ok && (name == "--tls-cert-file" || name == "--tls-key-file") {
			rel, err := filepath.Rel(mountPath, path)
			Expect(err).NotTo(HaveOccurred())
			Expect(rel).NotTo(HavePrefix(".."), "%s is not in the tls volume's mount %s", a, mountPath)
			args[i] = name + "=" + filepath.Join(dir, rel)
		}
	}
	ca := fromUnstructured[corev1.ConfigMap](m.named("ConfigMap", d.Name+"-ca"))
	roots := x509.NewCertPool()
	Expect(roots.AppendCertsFromPEM([]byte(ca.Data["ca.crt"]))).To(BeTrue(), "ConfigMap %s holds no PEM CA", ca.Name)
	return args, &tls.Config{RootCAs: roots, ServerName: fmt.Sprintf("%s.%s.svc", d.Name, d.Namespace), MinVersion: tls.VersionTLS12}
}
