package install

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// getMetrics GETs the manager's metrics over HTTPS with an optional bearer
// token. The certificate is the manager's self-signed one, so it is not
// verified: what is under test is who may read, not who serves.
func getMetrics(ctx context.Context, addr, token string) (int, string, error) {
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed on purpose
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, string(body), err
}

// serviceAccountToken makes a ServiceAccount and returns a token the API
// server issued for it, as the kubelet mounts into a Pod.
func serviceAccountToken(ctx context.Context, namespace, name string) string {
	GinkgoHelper()
	_, err := kube.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	tr, err := kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

var _ = Describe("The manager's metrics, secure by default", func() {
	It("refuse an anonymous request and a stranger, and serve a ServiceAccount bound to metrics-reader", func(ctx context.Context) {
		const release, ns, scraperNS = "metrics", "metrics-system", "metrics-monitoring"
		m := helmTemplate(release, ns, "--set", "leaderElection.enabled=false",
			"--set", "metrics.readerSubjects[0].kind=ServiceAccount",
			"--set", "metrics.readerSubjects[0].name=prometheus",
			"--set", "metrics.readerSubjects[0].namespace="+scraperNS)
		var objects manifests
		for _, kind := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
			objects = append(objects, m.ofKind(kind)...)
		}
		Expect(objects.named("ClusterRole", "metrics-toolplane-metrics-reader")).NotTo(BeNil())
		ensureNamespaces(ctx, ns, scraperNS)
		Expect(apply(ctx, objects, "", false)).To(Succeed())
		prometheus := serviceAccountToken(ctx, scraperNS, "prometheus")
		stranger := serviceAccountToken(ctx, scraperNS, "stranger")

		manager := runChartManager(ctx, m)

		By("refusing a request without a token")
		// The metrics server may start listening a moment after /readyz
		// answers.
		var code int
		var body string
		Eventually(func(ctx context.Context) (err error) {
			code, body, err = getMetrics(ctx, manager.MetricsAddr, "")
			return err
		}).WithContext(ctx).WithTimeout(eventuallyTimeout).Should(Succeed())
		Expect(code).To(Equal(http.StatusUnauthorized), body)

		By("refusing a token the API server does not know")
		code, body, err := getMetrics(ctx, manager.MetricsAddr, "not-a-token")
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(Equal(http.StatusUnauthorized), body)
		Expect(body).NotTo(ContainSubstring("controller_runtime"))

		By("refusing a ServiceAccount that is not bound to metrics-reader")
		code, body, err = getMetrics(ctx, manager.MetricsAddr, stranger)
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(Equal(http.StatusForbidden), body)
		Expect(body).NotTo(ContainSubstring("controller_runtime"))

		By("serving the ServiceAccount bound through metrics.readerSubjects")
		Eventually(func(g Gomega, ctx context.Context) {
			code, body, err := getMetrics(ctx, manager.MetricsAddr, prometheus)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(code).To(Equal(http.StatusOK), body)
			g.Expect(body).To(ContainSubstring("controller_runtime_reconcile_total"))
		}).WithContext(ctx).WithTimeout(eventuallyTimeout).Should(Succeed())

		By("refusing plain HTTP on the same port")
		resp, err := http.Get("http://" + manager.MetricsAddr + "/metrics")
		if err == nil {
			resp.Body.Close()
			Expect(resp.StatusCode).To(Equal(http.StatusBadRequest), "plain HTTP was served")
		}
	})

	It("hold for the gateway too: anonymous refused, metrics-reader served", func(ctx context.Context) {
		const release, ns, scraperNS = "gwmetrics", "gwmetrics-system", "gwmetrics-monitoring"
		m := helmTemplate(release, ns,
			"--set", "metrics.readerSubjects[0].kind=ServiceAccount",
			"--set", "metrics.readerSubjects[0].name=prometheus",
			"--set", "metrics.readerSubjects[0].namespace="+scraperNS)
		var objects manifests
		for _, kind := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
			objects = append(objects, m.ofKind(kind)...)
		}
		ensureNamespaces(ctx, ns, scraperNS)
		Expect(apply(ctx, objects, "", false)).To(Succeed())
		prometheus := serviceAccountToken(ctx, scraperNS, "prometheus")
		stranger := serviceAccountToken(ctx, scraperNS, "stranger")
		// The gateway is ready once it holds a table.
		_, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, emptyTable(), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		gw := runChartGateway(ctx, m)
		var code int
		var body string
		Eventually(func(ctx context.Context) (err error) {
			code, body, err = getMetrics(ctx, gw.MetricsAddr, "")
			return err
		}).WithContext(ctx).WithTimeout(eventuallyTimeout).Should(Succeed())
		Expect(code).To(Equal(http.StatusUnauthorized), body)
		code, body, err = getMetrics(ctx, gw.MetricsAddr, stranger)
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(Equal(http.StatusForbidden), body)
		Eventually(func(g Gomega, ctx context.Context) {
			code, body, err := getMetrics(ctx, gw.MetricsAddr, prometheus)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(code).To(Equal(http.StatusOK), body)
			g.Expect(body).To(ContainSubstring("go_goroutines"))
		}).WithContext(ctx).WithTimeout(eventuallyTimeout).Should(Succeed())
	})

	It("renders a ServiceMonitor for HTTPS with a bearer token, and only where its API exists", func(ctx context.Context) {
		args := []string{"--set", "metrics.serviceMonitor.enabled=true"}
		Expect(helmTemplate("toolplane", "toolplane-system", args...).ofKind("ServiceMonitor")).To(BeEmpty(),
			"a ServiceMonitor without monitoring.coreos.com/v1 fails the install")

		m := helmTemplate("toolplane", "toolplane-system", append(args, "--api-versions", "monitoring.coreos.com/v1")...)
		Expect(dryRun(ctx, m, "")).To(Succeed())
		endpoints, _, err := unstructured.NestedSlice(m.named("ServiceMonitor", "toolplane").Object, "spec", "endpoints")
		Expect(err).NotTo(HaveOccurred())
		Expect(endpoints).To(ConsistOf(And(
			HaveKeyWithValue("scheme", "https"),
			HaveKeyWithValue("bearerTokenFile", "/var/run/secrets/kubernetes.io/serviceaccount/token"),
			HaveKeyWithValue("tlsConfig", HaveKeyWithValue("insecureSkipVerify", true)),
		)))

		m = helmTemplate("toolplane", "toolplane-system", append(args, "--api-versions", "monitoring.coreos.com/v1", "--set", "metrics.secure=false", "--set", "gateway.metrics.secure=false")...)
		endpoints, _, err = unstructured.NestedSlice(m.named("ServiceMonitor", "toolplane").Object, "spec", "endpoints")
		Expect(err).NotTo(HaveOccurred())
		Expect(endpoints).To(ConsistOf(And(HaveKeyWithValue("scheme", "http"), Not(HaveKey("bearerTokenFile")))))
		Expect(m.ofKind("ClusterRole")).NotTo(ContainElement(WithTransform(func(u *unstructured.Unstructured) string { return u.GetName() },
			HaveSuffix("-metrics-reader"))), "plain HTTP authorizes no one")
	})

	It("lets the metrics-reader ClusterRole GET /metrics and nothing else", func() {
		cr := fromUnstructured[rbacv1.ClusterRole](helmTemplate("toolplane", "toolplane-system").named("ClusterRole", "toolplane-metrics-reader"))
		Expect(cr.Rules).To(Equal([]rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}))
		for _, r := range kustomizeBuild("config/default").ofKind("ClusterRole") {
			if strings.HasSuffix(r.GetName(), "metrics-reader") {
				cr := fromUnstructured[rbacv1.ClusterRole](r)
				Expect(cr.Rules).To(Equal([]rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}))
				return
			}
		}
		Fail("config/default has no metrics-reader ClusterRole")
	})
})

// emptyTable is a published tool table with no tools, as the operator
// writes it, in ConfigMap toolplane-tools.
func emptyTable() *corev1.ConfigMap {
	GinkgoHelper()
	parts, err := spec.EncodeTable(&spec.Table{SchemaVersion: spec.SchemaVersion, Revision: spec.TableRevision(nil), Tools: []spec.TableTool{}}, "toolplane-tools")
	Expect(err).NotTo(HaveOccurred())
	Expect(parts).To(HaveLen(1))
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: parts[0].Name}, Data: parts[0].Data, BinaryData: parts[0].BinaryData}
}
