package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

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
