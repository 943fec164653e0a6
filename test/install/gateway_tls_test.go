package install

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"os"
	"path"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// serviceDNSNames are the names an agent reaches the gateway's Service by.
func serviceDNSNames(svc, ns, clusterDomain string) []string {
	return []string{svc, svc + "." + ns, svc + "." + ns + ".svc", svc + "." + ns + ".svc." + clusterDomain}
}

// tlsVolumeSecret is the Secret the gateway's tls volume mounts, and the
// paths its --tls-cert-file and --tls-key-file name, which must be in it.
func tlsVolumeSecret(d *appsv1.Deployment) string {
	GinkgoHelper()
	c, ok := gatewayContainer(d)
	Expect(ok).To(BeTrue())
	var mount string
	for _, vm := range c.VolumeMounts {
		if vm.Name == "tls" {
			mount = vm.MountPath
			Expect(vm.SubPath).To(BeEmpty(), "a subPath mount never sees the Secret rotate")
		}
	}
	Expect(mount).NotTo(BeEmpty(), "no tls volume mount")
	Expect(flagValue(c.Args, "--tls-cert-file")).To(Equal(path.Join(mount, "tls.crt")))
	Expect(flagValue(c.Args, "--tls-key-file")).To(Equal(path.Join(mount, "tls.key")))
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "tls" {
			Expect(v.Secret).NotTo(BeNil())
			Expect(v.Secret.Items).To(ConsistOf(corev1.KeyToPath{Key: "tls.crt", Path: "tls.crt"}, corev1.KeyToPath{Key: "tls.key", Path: "tls.key"}))
			return v.Secret.SecretName
		}
	}
	Fail("no tls volume")
	return ""
}

var _ = Describe("The chart's gateway TLS", func() {
	It("serves HTTPS by default with a generated certificate for the Service's names, its CA published, and the gateway's own token audience", func(ctx context.Context) {
		const release, ns = "toolplane", "gwtls-default"
		m := helmTemplate(release, ns, "--set", "networkPolicy.enabled=true")
		Expect(dryRun(ctx, m, "")).To(Succeed())
		d := fromUnstructured[appsv1.Deployment](m.named("Deployment", "toolplane-gateway"))
		c, _ := gatewayContainer(d)
		Expect(c.Args).To(ContainElement("--token-audience=toolplane-gateway"),
			"a token for the API server's audience would be accepted, and replayable to the API server")
		Expect(tlsVolumeSecret(d)).To(Equal("toolplane-gateway-tls"))

		By("exposing the MCP port as https on 443")
		svc := fromUnstructured[corev1.Service](m.named("Service", "toolplane-gateway"))
		Expect(svc.Spec.Ports).To(ContainElement(And(HaveField("Name", "mcp"), HaveField("Port", BeEquivalentTo(443)),
			HaveField("TargetPort.StrVal", "mcp"), HaveField("AppProtocol", HaveValue(Equal("https"))))))
		var mcpPort int32
		for _, p := range c.Ports {
			if p.Name == "mcp" {
				mcpPort = p.ContainerPort
			}
		}
		Expect(mcpPort).NotTo(BeZero())
		np := fromUnstructured[networkingv1.NetworkPolicy](m.named("NetworkPolicy", "toolplane-gateway"))
		Expect(np.Spec.Ingress).To(ContainElement(HaveField("Ports", ContainElement(HaveField("Port.IntVal", mcpPort)))), "the NetworkPolicy blocks agents")

		By("generating a serving certificate that the published CA verifies for every name of the Service")
		secret := fromUnstructured[corev1.Secret](m.named("Secret", "toolplane-gateway-tls"))
		Expect(secret.Type).To(Equal(corev1.SecretTypeTLS))
		pair, err := tls.X509KeyPair(secret.Data["tls.crt"], secret.Data["tls.key"])
		Expect(err).NotTo(HaveOccurred(), "tls.crt and tls.key are not a pair")
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		Expect(err).NotTo(HaveOccurred())
		Expect(leaf.IsCA).To(BeFalse())
		ca := fromUnstructured[corev1.ConfigMap](m.named("ConfigMap", "toolplane-gateway-ca"))
		Expect(ca.Data["ca.crt"]).To(Equal(string(secret.Data["ca.crt"])))
		block, _ := pem.Decode([]byte(ca.Data["ca.crt"]))
		Expect(block).NotTo(BeNil(), "the CA ConfigMap holds no PEM")
		caCert, err := x509.ParseCertificate(block.Bytes)
		Expect(err).NotTo(HaveOccurred())
		Expect(caCert.IsCA).To(BeTrue())
		roots := x509.NewCertPool()
		roots.AddCert(caCert)
		for _, name := range serviceDNSNames("toolplane-gateway", ns, "cluster.local") {
			_, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
			Expect(err).NotTo(HaveOccurred(), "an agent that dials %s refuses the certificate", name)
		}
		_, err = leaf.Verify(x509.VerifyOptions{DNSName: "toolplane-gateway.elsewhere.svc", Roots: roots})
		Expect(err).To(HaveOccurred(), "the certificate names more than the Service")
		Expect(ca.Data["ca.crt"]).NotTo(ContainSubstring("PRIVATE KEY"))
		Expect(m.ofKind("Secret").gateway().withoutTaskKey()).To(HaveLen(1), "the CA's key is kept nowhere")

		By("naming the cluster domain in the certificate")
		other := helmTemplate(release, ns, "--set", "clusterDomain=corp.example")
		s := fromUnstructured[corev1.Secret](other.named("Secret", "toolplane-gateway-tls"))
		p, _ := pem.Decode(s.Data["tls.crt"])
		leaf, err = x509.ParseCertificate(p.Bytes)
		Expect(err).NotTo(HaveOccurred())
		Expect(leaf.DNSNames).To(ConsistOf(serviceDNSNames("toolplane-gateway", ns, "corp.example")))
	})

	It("is served by the gateway run with the chart's arguments, which picks up a rotated Secret without a restart", func(ctx context.Context) {
		const release, ns = "gwtls", "gwtls-run"
		m := helmTemplate(release, ns)
		var rbacObjects manifests
		for _, kind := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
			rbacObjects = append(rbacObjects, m.ofKind(kind).gateway()...)
		}
		ensureNamespaces(ctx, ns)
		Expect(apply(ctx, rbacObjects, "", false)).To(Succeed())
		_, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, emptyTable(), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		gw := runChartGateway(ctx, m)
		Expect(gw.URL()).To(HavePrefix("https://"))
		Expect(gatewayTable(ctx, gw).Tools).To(BeEmpty())
		resp, err := http.Get("http://" + gw.Addr + "/v1/tools")
		if err == nil {
			resp.Body.Close()
			Expect(resp.StatusCode).NotTo(Equal(http.StatusOK), "plain HTTP was served")
		}

		By("rotating the pair in place, as the kubelet updates a Secret volume")
		rotated := helmTemplate(release, ns) // helm template makes a new CA and pair on every run
		secret := fromUnstructured[corev1.Secret](rotated.named("Secret", release+"-toolplane-gateway-tls"))
		for flag, key := range map[string]string{"--tls-cert-file": corev1.TLSCertKey, "--tls-key-file": corev1.TLSPrivateKeyKey} {
			file := flagValue(gw.Args, flag)
			Expect(os.WriteFile(file+".new", secret.Data[key], 0o600)).To(Succeed())
			Expect(os.Rename(file+".new", file)).To(Succeed())
		}
		newRoots := x509.NewCertPool()
		Expect(newRoots.AppendCertsFromPEM(secret.Data["ca.crt"])).To(BeTrue())
		old := gw.TLS
		gw.TLS = &tls.Config{RootCAs: newRoots, ServerName: old.ServerName, MinVersion: tls.VersionTLS12}
		// Within certwatcher's poll (10 s) at the latest.
		Eventually(func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, gw.URL()+"/v1/tools", nil)
			if err != nil {
				return err
			}
			resp, err := gw.Client().Do(req)
			if err != nil {
				return err
			}
			return resp.Body.Close()
		}).WithContext(ctx).WithTimeout(eventuallyTimeout).Should(Succeed())
		gw.TLS = old
		_, err = gw.Client().Get(gw.URL() + "/v1/tools")
		Expect(err).To(HaveOccurred(), "the old certificate is still served")
	})

	It("serves plain HTTP on port 80 with gateway.tls.enabled=false, and makes no certificate", func() {
		m := helmTemplate("toolplane", "toolplane-system", "--set", "gateway.tls.enabled=false")
		d := fromUnstructured[appsv1.Deployment](m.named("Deployment", "toolplane-gateway"))
		c, _ := gatewayContainer(d)
		Expect(flagValue(c.Args, "--tls-cert-file")).To(BeEmpty())
		// The task key is the only Secret and volume left (gateway_test.go).
		Expect(d.Spec.Template.Spec.Volumes).To(ConsistOf(HaveField("Name", "task-key")))
		svc := fromUnstructured[corev1.Service](m.named("Service", "toolplane-gateway"))
		Expect(svc.Spec.Ports).To(ContainElement(And(HaveField("Port", BeEquivalentTo(80)), HaveField("AppProtocol", HaveValue(Equal("http"))))))
		Expect(m.ofKind("Secret").gateway()).To(ConsistOf(HaveField("Object", HaveKeyWithValue("metadata", HaveKeyWithValue("name", "toolplane-gateway-task-key")))))
		Expect(m.ofKind("ConfigMap").gateway()).To(BeEmpty())

		By("and takes the API server's audience only when told to, as the README's upgrade note says")
		Expect(flagValue(c.Args, "--token-audience")).To(Equal("toolplane-gateway"))
		m = helmTemplate("toolplane", "toolplane-system", "--set", "gateway.tls.enabled=false", "--set-json", "gateway.tokenAudiences=[]")
		c, _ = gatewayContainer(fromUnstructured[appsv1.Deployment](m.named("Deployment", "toolplane-gateway")))
		Expect(flagValue(c.Args, "--token-audience")).To(BeEmpty())
	})

	It("mounts gateway.tls.existingSecret and makes nothing of its own", func() {
		m := helmTemplate("toolplane", "toolplane-system", "--set", "gateway.tls.existingSecret=mine",
			"--api-versions", "cert-manager.io/v1", "--set", "gateway.tls.certManager.issuerRef.name=ca")
		Expect(tlsVolumeSecret(fromUnstructured[appsv1.Deployment](m.named("Deployment", "toolplane-gateway")))).To(Equal("mine"))
		Expect(m.ofKind("Secret").gateway()).To(ConsistOf(HaveField("Object", HaveKeyWithValue("metadata", HaveKeyWithValue("name", "toolplane-gateway-task-key")))))
		Expect(m.ofKind("ConfigMap").gateway()).To(BeEmpty())
		Expect(m.ofKind("Certificate")).To(BeEmpty())
	})

	It("asks cert-manager for the certificate where its API is served and an issuer is named, and generates one otherwise", func() {
		args := []string{"--set", "gateway.tls.certManager.issuerRef.name=cluster-ca", "--set", "gateway.tls.certManager.issuerRef.kind=ClusterIssuer",
			"--set", "gateway.tls.certManager.renewBefore=720h"}
		m := helmTemplate("toolplane", "tools", append(args, "--api-versions", "cert-manager.io/v1")...)
		Expect(tlsVolumeSecret(fromUnstructured[appsv1.Deployment](m.named("Deployment", "toolplane-gateway")))).To(Equal("toolplane-gateway-tls"))
		Expect(m.ofKind("Secret").gateway().withoutTaskKey()).To(BeEmpty(), "cert-manager writes the Secret")
		Expect(m.ofKind("ConfigMap").gateway()).To(BeEmpty())
		cert := m.named("Certificate", "toolplane-gateway")
		Expect(cert.GetAPIVersion()).To(Equal("cert-manager.io/v1"))
		Expect(cert.GetNamespace()).To(Equal("tools"))
		spec, _, err := unstructured.NestedMap(cert.Object, "spec")
		Expect(err).NotTo(HaveOccurred())
		Expect(spec).To(HaveKeyWithValue("secretName", "toolplane-gateway-tls"))
		Expect(spec).To(HaveKeyWithValue("issuerRef", map[string]any{"name": "cluster-ca", "kind": "ClusterIssuer"}))
		Expect(spec).To(HaveKeyWithValue("renewBefore", "720h"))
		Expect(spec).To(HaveKeyWithValue("usages", ContainElement("server auth")))
		names, _, err := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
		Expect(err).NotTo(HaveOccurred())
		Expect(names).To(ConsistOf(serviceDNSNames("toolplane-gateway", "tools", "cluster.local")))

		By("without cert-manager's API, generating the certificate instead of failing the install")
		m = helmTemplate("toolplane", "tools", args...)
		Expect(m.ofKind("Certificate")).To(BeEmpty())
		Expect(m.named("Secret", "toolplane-gateway-tls").Object).To(HaveKeyWithValue("type", "kubernetes.io/tls"))
		m.named("ConfigMap", "toolplane-gateway-ca")
	})
})
