package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/toolplane/toolplane/test/harness"
	"github.com/toolplane/toolplane/toolkit/spec"
)

var _ = Describe("The gateway with --auth=kubernetes", func() {
	var cs *kubernetes.Clientset

	BeforeEach(func() {
		var err error
		cs, err = kubernetes.NewForConfig(cp.Config)
		Expect(err).NotTo(HaveOccurred())
	})

	// token creates ServiceAccount agents/name and returns a token of it
	// for audience, as a projected volume would hold.
	token := func(name, audience string) string {
		_, err := cs.CoreV1().ServiceAccounts("agents").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		tr, err := cs.CoreV1().ServiceAccounts("agents").CreateToken(ctx, name, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: ptr.To[int64](3600)},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		return tr.Status.Token
	}
	// grant binds ServiceAccount agents/sa to a Role in namespace that
	// allows calling names (every tool of the namespace if none).
	grant := func(sa, namespace string, names ...string) {
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "call-" + sa},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"toolplane.io"}, Resources: []string{"tools"}, Verbs: []string{"call"}, ResourceNames: names}}}
		_, err := cs.RbacV1().Roles(namespace).Create(ctx, role, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = cs.RbacV1().RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "call-" + sa},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "agents", Name: sa}},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
	}
	listAs := func(tok string) []string {
		var names []string
		Eventually(func(g Gomega) {
			s := connect(gwAuth.URL()+"/mcp", "2026-07-28", nil, bearer(tok))
			var err error
			names, err = listNames(s)
			g.Expect(err).NotTo(HaveOccurred())
		}, settle).Should(Succeed())
		return names
	}

	It("allows, denies and filters exactly as Roles and RoleBindings grant", func() {
		one := token("agent-one", tokenAudience)    // one tool of crm
		crm := token("agent-crm", tokenAudience)    // every tool of crm
		none := token("agent-none", tokenAudience)  // nothing
		wrong := token("agent-wrong", "api-server") // a token for another audience
		grant("agent-one", "crm", "crm_echo")
		grant("agent-one", "weather") // no resourceNames: every tool of the namespace
		grant("agent-crm", "crm")

		By("lists hold exactly what each may call")
		Expect(listAs(one)).To(Equal([]string{"crm_echo", "forecast"}))
		Expect(listAs(crm)).To(Equal([]string{"crm_echo", "crm_headers"}))
		Expect(listAs(none)).To(BeEmpty())

		By("a list says it is private to the caller")
		s := connect(gwAuth.URL()+"/mcp", "2026-07-28", nil, bearer(one))
		res, err := s.ListTools(ctx, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.CacheScope).To(Equal("private"))

		By("calls are allowed and denied the same way")
		r, err := call(s, "crm_echo", map[string]any{"text": "x"})
		Expect(err).NotTo(HaveOccurred())
		Expect(r.IsError).To(BeFalse(), text(r))
		_, err = call(s, "crm_headers", nil)
		Expect(err).To(MatchError(ContainSubstring("unknown tool")))
		sNone := connect(gwAuth.URL()+"/mcp", "2025-11-25", nil, bearer(none))
		_, err = call(sNone, "crm_echo", map[string]any{"text": "x"})
		Expect(err).To(MatchError(ContainSubstring("unknown tool")))

		By("the workload never sees the caller's token")
		sCRM := connect(gwAuth.URL()+"/mcp", "2026-07-28", nil, bearer(crm))
		r, err = call(sCRM, "crm_headers", nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(text(r)).NotTo(ContainSubstring("Authorization"))

		By("GET /v1/tools is filtered the same way")
		Expect(tableAs(one)).To(Equal([]string{"crm_echo", "forecast"}))
		Expect(tableAs(none)).To(BeEmpty())

		By("no token, a forged one or one for another audience is refused with 401")
		for _, tok := range []string{"", "not-a-token", wrong} {
			Expect(statusOf(tok)).To(Equal(http.StatusUnauthorized), "token %q", tok)
		}

		By("a revoked grant stops working once the decision cache (--auth-cache-ttl 1s) expires")
		Expect(cs.RbacV1().RoleBindings("crm").Delete(ctx, "call-agent-crm", metav1.DeleteOptions{})).To(Succeed())
		Eventually(func() []string { return listAs(crm) }, settle, time.Second).Should(BeEmpty())
	})

	It("serves a second token of a ServiceAccount from the decisions of the first, with no new SubjectAccessReview", func() {
		// A gateway of its own, whose caches outlast the spec, so that what
		// is counted is what the second token costs and not an expiry.
		g := &harness.Gateway{Bin: gatewayBin, Kubeconfig: cp.Kubeconfig, TableNamespace: tableNamespace, Resolve: gwAuth.Resolve,
			Args:    []string{"--auth=kubernetes", "--token-audience", tokenAudience, "--auth-cache-ttl", "10m", "--auth-deny-cache-ttl", "10m"},
			LogPath: filepath.Join(workDir, "gateway-auth-cache.log")}
		Expect(g.Start(ctx)).To(Succeed())
		DeferCleanup(func() { Expect(g.Stop(30 * time.Second)).To(Succeed()) })
		first := token("agent-cache", tokenAudience)
		tr, err := cs.CoreV1().ServiceAccounts("agents").CreateToken(ctx, "agent-cache", &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: []string{tokenAudience}, ExpirationSeconds: ptr.To[int64](3600)},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		second := tr.Status.Token
		grant("agent-cache", "crm", "crm_echo")

		By("the API server tells the two tokens apart by their credential ids, which the gateway must not key by")
		ids := map[string]bool{}
		for _, tok := range []string{first, second} {
			r, err := cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
				Spec: authenticationv1.TokenReviewSpec{Token: tok, Audiences: []string{tokenAudience}}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(r.Status.Authenticated).To(BeTrue())
			Expect(r.Status.User.Extra).To(HaveKey("authentication.kubernetes.io/credential-id"))
			ids[r.Status.User.Extra["authentication.kubernetes.io/credential-id"].String()] = true
		}
		Expect(ids).To(HaveLen(2))

		reviews := func(kind string) float64 {
			var n float64
			Eventually(func(gm Gomega) {
				resp, err := http.Get("http://" + g.MetricsAddr + "/metrics")
				gm.Expect(err).NotTo(HaveOccurred())
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				gm.Expect(err).NotTo(HaveOccurred())
				fams, err := harness.ParseMetrics(string(b))
				gm.Expect(err).NotTo(HaveOccurred())
				n = harness.Sum(fams, "toolplane_gateway_authorization_cache_total", map[string]string{"kind": kind, "result": "miss"})
			}).Should(Succeed())
			return n
		}
		get := func(tok string) []string {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.URL()+"/v1/tools", nil)
			Expect(err).NotTo(HaveOccurred())
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := http.DefaultClient.Do(req)
			Expect(err).NotTo(HaveOccurred())
			defer resp.Body.Close()
			Expect(resp.StatusCode).To(Equal(http.StatusOK))
			var t spec.Table
			Expect(json.NewDecoder(resp.Body).Decode(&t)).To(Succeed())
			return names(&t)
		}

		By("the first token asks its questions")
		Expect(get(first)).To(Equal([]string{"crm_echo"}))
		cold := reviews("access")
		Expect(cold).To(BeNumerically(">", 0))

		By("the second token is reviewed once, and asks nothing: GET /v1/tools, tools/list and a call")
		Expect(get(second)).To(Equal([]string{"crm_echo"}))
		s := connect(g.URL()+"/mcp", "2026-07-28", nil, bearer(second))
		Expect(listNames(s)).To(Equal([]string{"crm_echo"}))
		r, err := call(s, "crm_echo", map[string]any{"text": "x"})
		Expect(err).NotTo(HaveOccurred())
		Expect(r.IsError).To(BeFalse(), text(r))
		Expect(reviews("access")).To(Equal(cold), "SubjectAccessReviews sent for the second token")
		Expect(reviews("token")).To(Equal(2.0), "one TokenReview per token")
	})
})

func tableAs(tok string) []string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, gwAuth.URL()+"/v1/tools", nil)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	Expect(resp.StatusCode).To(Equal(http.StatusOK))
	Expect(resp.Header.Get("Cache-Control")).To(ContainSubstring("private"))
	b, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	var t spec.Table
	Expect(json.Unmarshal(b, &t)).To(Succeed())
	Expect(resp.Header.Get("ETag")).To(Equal(spec.ETag(t.Revision)))
	return names(&t)
}

func statusOf(tok string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, gwAuth.URL()+"/mcp", nil)
	Expect(err).NotTo(HaveOccurred())
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	return resp.StatusCode
}
