package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/test/harness"
	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/server"
	"github.com/toolplane/toolplane/toolkit/spec"
)

var _ = Describe("The gateway with --auth=kubernetes,oidc", Ordered, func() {
	var (
		op, stranger *harness.OpenIDProvider
		g            *harness.Gateway
		cs           *kubernetes.Clientset
		auditPath    string
		stopped      bool
		// txn is the txn claim of the Txn-Token dave's call carried to
		// the workload.
		txn string
	)
	// The calls of this spec carry argValue, which the audit log must
	// never hold, and alice's carry the trace context traceparent.
	const (
		argValue    = "oidc-e2e-argument-9c4e1"
		traceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
		traceparent = "00-" + traceID + "-00f067aa0ba902b7-01"
	)
	// client is a confidential client of the IdP in group groups, whose
	// tokens are for the gateway's audience unless mod says otherwise.
	client := func(id string, groups []string, mod func(*harness.OIDCClient)) harness.OIDCClient {
		c := harness.OIDCClient{ID: id, Secret: id + "-secret", Audience: []string{tokenAudience}, Groups: groups}
		if mod != nil {
			mod(&c)
		}
		return c
	}
	tokenOf := func(p *harness.OpenIDProvider, id string) string {
		tok, err := p.Token(ctx, id, id+"-secret")
		Expect(err).NotTo(HaveOccurred())
		return tok
	}
	// post sends an MCP tools/list to path with token and returns the
	// status and the challenge.
	post := func(path, token string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.URL()+path,
			strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`))
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header.Get("WWW-Authenticate")
	}
	tokenReviews := func() float64 {
		var n float64
		Eventually(func(gm Gomega) {
			resp, err := http.Get("http://" + g.MetricsAddr + "/metrics")
			gm.Expect(err).NotTo(HaveOccurred())
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			gm.Expect(err).NotTo(HaveOccurred())
			fams, err := harness.ParseMetrics(string(b))
			gm.Expect(err).NotTo(HaveOccurred())
			n = harness.Sum(fams, "toolplane_gateway_authorization_cache_total", map[string]string{"kind": "token"})
		}).Should(Succeed())
		return n
	}

	BeforeAll(func() {
		var err error
		cs, err = kubernetes.NewForConfig(cp.Config)
		Expect(err).NotTo(HaveOccurred())

		By("starting a real OpenID Provider, and another that the gateway does not trust")
		op, err = harness.StartOpenIDProvider(workDir,
			client("alice", []string{"crm-readers"}, nil),
			client("ts-agent", []string{"crm-readers"}, nil),
			client("bob", []string{"nobody"}, nil),
			client("dave", []string{"txn-callers"}, nil),
			client("other-audience", []string{"crm-readers"}, func(c *harness.OIDCClient) { c.Audience = []string{"another-resource"} }),
			client("expired", []string{"crm-readers"}, func(c *harness.OIDCClient) { c.Lifetime = -time.Hour }),
		)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(op.Close)
		stranger, err = harness.StartOpenIDProvider(workDir, client("alice", []string{"crm-readers"}, nil))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(stranger.Close)

		By("granting the IdP group crm-readers one tool of crm, with a Role and a RoleBinding to the group")
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "crm", Name: "call-crm-readers"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"toolplane.io"}, Resources: []string{"tools"}, Verbs: []string{"call"}, ResourceNames: []string{"crm_echo"}}}}
		_, err = cs.RbacV1().Roles("crm").Create(ctx, role, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = cs.RbacV1().RoleBindings("crm").Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: "crm", Name: "call-crm-readers"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "oidc:crm-readers"}},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		By("starting a workload that shows the Txn-Token it got, and granting it to the IdP group txn-callers")
		Expect(cp.CreateNamespace(ctx, "oidc-txn")).To(Succeed())
		tw := newWorkload("oidc-txn", "txn-tools", "txn_", txnTokenTool())
		DeferCleanup(tw.close)
		_, err = cs.RbacV1().Roles("oidc-txn").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "oidc-txn", Name: "call-tools"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"toolplane.io"}, Resources: []string{"tools"}, Verbs: []string{"call"}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = cs.RbacV1().RoleBindings("oidc-txn").Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: "oidc-txn", Name: "call-tools"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "call-tools"},
			Subjects:   []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "oidc:txn-callers"}},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		By("starting a gateway that trusts the IdP through an AuthenticationConfiguration, audits and mints Txn-Tokens")
		keyDir := filepath.Join(workDir, "txn-keys-oidc")
		Expect(os.MkdirAll(keyDir, 0o700)).To(Succeed())
		writeKeyDir(keyDir, ecKey(), nil)
		resolve := map[string]string{tw.host(): tw.addr()}
		for k, v := range gwAuth.Resolve {
			resolve[k] = v
		}
		cfg := filepath.Join(workDir, "authentication-config.yaml")
		Expect(os.WriteFile(cfg, []byte(op.AuthenticationConfiguration(tokenAudience, "")), 0o600)).To(Succeed())
		addr, err := harness.FreeAddr()
		Expect(err).NotTo(HaveOccurred())
		auditPath = filepath.Join(workDir, "audit-oidc.log")
		g = &harness.Gateway{Bin: gatewayBin, Kubeconfig: cp.Kubeconfig, TableNamespace: tableNamespace, Resolve: resolve, Addr: addr,
			Args: []string{"--auth=kubernetes,oidc", "--authentication-config", cfg, "--public-url", "http://" + addr,
				"--token-audience", tokenAudience, "--auth-cache-ttl", "1s", "--audit-log", auditPath,
				"--txn-token-key-dir", keyDir},
			LogPath: filepath.Join(workDir, "gateway-oidc.log")}
		Expect(g.Start(ctx)).To(Succeed())
		DeferCleanup(func() {
			if !stopped {
				Expect(g.Stop(30 * time.Second)).To(Succeed())
			}
		})

		// The gateway fetches the IdP's discovery document and keys in the
		// background: until then its tokens are refused.
		alice := tokenOf(op, "alice")
		Eventually(func() int { code, _ := post("/mcp", alice); return code }, settle, 100*time.Millisecond).Should(Equal(http.StatusOK))

		By("publishing the workload's ToolSet")
		tw.apply(ctx)
		// The other specs compare the open gateway's lists with the table:
		// this one leaves both as it found them, and each change whole.
		DeferCleanup(func() {
			Expect(cp.Client.Delete(ctx, harness.NewToolSet("oidc-txn", "txn-tools", "txn-tools", spec.DefaultPath, 0))).To(Succeed())
			waitForTable(func(owners map[string]string) bool { _, ok := owners["txn_token"]; return !ok })
			Eventually(openGatewayTools, settle, 200*time.Millisecond).ShouldNot(ContainElement("txn_token"))
		})
		waitForTable(func(owners map[string]string) bool { return owners["txn_token"] == "oidc-txn/txn-tools" })
		Eventually(openGatewayTools, settle, 200*time.Millisecond).Should(ContainElement("txn_token"))
	})

	It("lists and calls exactly what a RoleBinding grants the caller's IdP group, and nothing else", func() {
		hc := &http.Client{Transport: headerTransport{"Authorization": "Bearer " + tokenOf(op, "alice"), "Traceparent": traceparent}}
		s := connect(g.URL()+"/mcp", "2026-07-28", nil, hc)
		Expect(listNames(s)).To(Equal([]string{"crm_echo"}))
		r, err := call(s, "crm_echo", map[string]any{"text": argValue})
		Expect(err).NotTo(HaveOccurred())
		Expect(r.IsError).To(BeFalse(), text(r))
		_, err = call(s, "crm_headers", nil)
		Expect(err).To(MatchError(ContainSubstring("unknown tool")))
		_, err = call(s, "forecast", map[string]any{"city": argValue})
		Expect(err).To(MatchError(ContainSubstring("unknown tool")))

		By("a view of the namespace serves the same grant")
		r, err = call(connect(g.URL()+"/mcp/namespaces/crm", "2026-07-28", nil, hc), "crm_echo", map[string]any{"text": argValue})
		Expect(err).NotTo(HaveOccurred())
		Expect(r.IsError).To(BeFalse(), text(r))

		By("a member of no bound group is authenticated, and may call nothing")
		Expect(listNames(connect(g.URL()+"/mcp", "2025-11-25", nil, bearer(tokenOf(op, "bob"))))).To(BeEmpty())
	})

	It("refuses with 401 and a challenge naming the metadata: no token, another audience, expired, an unknown issuer, a bad signature", func() {
		meta := fmt.Sprintf(`resource_metadata="%s/.well-known/oauth-protected-resource/mcp"`, g.URL())
		code, challenge := post("/mcp", "")
		Expect(code).To(Equal(http.StatusUnauthorized))
		Expect(challenge).To(HavePrefix("Bearer "))
		Expect(challenge).To(ContainSubstring(meta))
		Expect(challenge).NotTo(ContainSubstring("error="), "no token was sent, so none is invalid")

		good := tokenOf(op, "alice")
		sig := strings.LastIndexByte(good, '.')
		forged := good[:sig+1] + strings.Repeat("A", len(good)-sig-1)
		before := tokenReviews()
		for name, tok := range map[string]string{
			"another audience":  tokenOf(op, "other-audience"),
			"expired":           tokenOf(op, "expired"),
			"an unknown issuer": tokenOf(stranger, "alice"),
			"a bad signature":   forged,
		} {
			code, challenge := post("/mcp", tok)
			Expect(code).To(Equal(http.StatusUnauthorized), name)
			Expect(challenge).To(ContainSubstring(meta), name)
			Expect(challenge).To(ContainSubstring(`error="invalid_token"`), name)
		}
		By("of those, only the unknown issuer's token went to a TokenReview: the IdP's own never leave the gateway")
		Expect(tokenReviews() - before).To(Equal(1.0))

		By("a view's 401 names the view's metadata")
		_, challenge = post("/mcp/search", forged)
		Expect(challenge).To(ContainSubstring(fmt.Sprintf(`resource_metadata="%s/.well-known/oauth-protected-resource/mcp/search"`, g.URL())))
	})

	It("serves protected resource metadata that points at the IdP", func() {
		for _, path := range []string{"/mcp", "/mcp/search", "/mcp/namespaces/crm"} {
			resp, err := http.Get(g.URL() + "/.well-known/oauth-protected-resource" + path)
			Expect(err).NotTo(HaveOccurred())
			var md struct {
				Resource             string   `json:"resource"`
				AuthorizationServers []string `json:"authorization_servers"`
				BearerMethods        []string `json:"bearer_methods_supported"`
				Scopes               []string `json:"scopes_supported"`
			}
			Expect(json.NewDecoder(resp.Body).Decode(&md)).To(Succeed())
			resp.Body.Close()
			Expect(md.Resource).To(Equal(g.URL() + path))
			Expect(md.AuthorizationServers).To(Equal([]string{op.Issuer}))
			Expect(md.BearerMethods).To(Equal([]string{"header"}))
			Expect(md.Scopes).To(Equal([]string{"openid"}))
		}
	})

	It("signs in the TypeScript SDK client from nothing but the 401: metadata, IdP, token, then exactly its tools", func() {
		events, stderr, err := signedInTypeScriptClient(op, "ts-agent", g.URL()+"/mcp", "crm_echo", `{"text":"`+argValue+`"}`)
		Expect(err).NotTo(HaveOccurred(), stderr)
		Expect(events).To(HaveKey("authorized"))
		var listed []string
		for _, t := range events["tools"].Tools {
			listed = append(listed, t.Name)
		}
		Expect(listed).To(Equal([]string{"crm_echo"}))
		var res struct {
			IsError bool `json:"isError"`
		}
		Expect(json.Unmarshal(events["called"].Result, &res)).To(Succeed())
		Expect(res.IsError).To(BeFalse(), string(events["called"].Result))

		By("and a tool the group is not granted is denied to it")
		events, stderr, err = signedInTypeScriptClient(op, "ts-agent", g.URL()+"/mcp", "crm_headers", `{}`)
		Expect(err).To(HaveOccurred())
		Expect(events).To(HaveKey("authorized"))
		Expect(stderr).To(ContainSubstring("unknown tool"))
	})

	It("still takes the ServiceAccount tokens the API server accepts, reviewed as with --auth=kubernetes", func() {
		_, err := cs.CoreV1().ServiceAccounts("agents").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "agent-mixed"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		tr, err := cs.CoreV1().ServiceAccounts("agents").CreateToken(ctx, "agent-mixed", &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: []string{tokenAudience}, ExpirationSeconds: ptr.To[int64](3600)},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = cs.RbacV1().RoleBindings("crm").Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: "crm", Name: "call-agent-mixed"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "call-crm-readers"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "agents", Name: "agent-mixed"}},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(gm Gomega) {
			code, _ := post("/mcp", tr.Status.Token)
			gm.Expect(code).To(Equal(http.StatusOK))
		}, settle).Should(Succeed())
		Expect(listNames(connect(g.URL()+"/mcp", "2026-07-28", nil, bearer(tr.Status.Token)))).To(Equal([]string{"crm_echo"}))
	})

	It("sends the workload a Txn-Token, signed by the gateway's JWKS, naming the IdP's user and the ToolSet", func() {
		s := connect(g.URL()+"/mcp", "2026-07-28", nil, bearer(tokenOf(op, "dave")))
		// Listing is not audited: wait with it, so that the one call is.
		Eventually(func() ([]string, error) { return listNames(s) }, settle, 250*time.Millisecond).Should(Equal([]string{"txn_token"}))
		r, err := call(s, "txn_token", map[string]any{"text": argValue})
		Expect(err).NotTo(HaveOccurred())
		Expect(r.IsError).To(BeFalse(), text(r))
		tok := text(r)
		jws, err := jose.ParseSigned(tok, []jose.SignatureAlgorithm{jose.ES256})
		Expect(err).NotTo(HaveOccurred(), tok)
		resp, err := http.Get(g.URL() + gateway.JWKSPath)
		Expect(err).NotTo(HaveOccurred())
		var set jose.JSONWebKeySet
		Expect(json.NewDecoder(resp.Body).Decode(&set)).To(Succeed())
		resp.Body.Close()
		keys := set.Key(jws.Signatures[0].Header.KeyID)
		Expect(keys).To(HaveLen(1))
		payload, err := jws.Verify(keys[0])
		Expect(err).NotTo(HaveOccurred())
		var claims struct {
			Sub    string   `json:"sub"`
			Aud    any      `json:"aud"`
			Txn    string   `json:"txn"`
			Groups []string `json:"groups"`
		}
		Expect(json.Unmarshal(payload, &claims)).To(Succeed())
		Expect(claims.Sub).To(Equal("oidc:dave"))
		Expect(claims.Aud).To(Or(Equal("oidc-txn/txn-tools"), Equal([]any{"oidc-txn/txn-tools"})))
		Expect(claims.Groups).To(Equal([]string{"oidc:txn-callers"}))
		Expect(claims.Txn).NotTo(BeEmpty())
		txn = claims.Txn
	})

	// This one reads what the specs above did: run the container whole.
	It("audits each of those calls exactly once, naming the IdP's caller and never an argument", func() {
		Expect(g.Stop(30 * time.Second)).To(Succeed()) // writes out what is queued
		stopped = true
		raw, err := os.ReadFile(auditPath)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(raw)).NotTo(ContainSubstring(argValue))

		type line struct {
			Time      time.Time `json:"time"`
			RequestID string    `json:"requestId"`
			TraceID   string    `json:"traceId"`
			Caller    struct {
				User           string   `json:"user"`
				Groups         []string `json:"groups"`
				ServiceAccount string   `json:"serviceAccount"`
				AuthMode       string   `json:"authMode"`
			} `json:"caller"`
			Method        string   `json:"method"`
			View          string   `json:"view"`
			Tool          string   `json:"tool"`
			ToolSet       string   `json:"toolSet"`
			Decision      string   `json:"decision"`
			Reason        string   `json:"reason"`
			Outcome       string   `json:"outcome"`
			DurationMs    *float64 `json:"durationMs"`
			ArgumentBytes *int     `json:"argumentBytes"`
			ResultBytes   *int64   `json:"resultBytes"`
		}
		type row struct{ user, groups, trace, view, tool, toolSet, decision, reason, outcome string }
		var rows []row
		ids := map[string]bool{}
		for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			var a line
			Expect(json.Unmarshal([]byte(l), &a)).To(Succeed(), l)
			Expect(a.Time).To(BeTemporally("~", time.Now(), 10*time.Minute), l)
			Expect(a.RequestID).NotTo(BeEmpty(), l)
			Expect(ids).NotTo(HaveKey(a.RequestID), "a request id is one call's")
			ids[a.RequestID] = true
			Expect(a.Caller.AuthMode).To(Equal("oidc"), l)
			Expect(a.Caller.ServiceAccount).To(BeEmpty(), "an IdP's user is no ServiceAccount: %s", l)
			Expect(a.Method).To(Equal("tools/call"), l)
			Expect(a.DurationMs).NotTo(BeNil(), l)
			Expect(*a.DurationMs).To(BeNumerically(">=", 0), l)
			Expect(a.ArgumentBytes).NotTo(BeNil(), l)
			Expect(a.ResultBytes).NotTo(BeNil(), l)
			if a.Decision == "allowed" {
				Expect(*a.ArgumentBytes).To(BeNumerically(">", len(argValue)), l)
				Expect(*a.ResultBytes).To(BeNumerically(">", 0), l)
				Expect(*a.DurationMs).To(BeNumerically(">", 0), "an allowed call went to its workload and back: %s", l)
			} else {
				Expect(*a.ResultBytes).To(BeZero(), l)
			}
			if a.Caller.User == "oidc:dave" {
				Expect(a.RequestID).To(Equal(txn), "the audit line's request id is the Txn-Token's txn claim")
			}
			rows = append(rows, row{a.Caller.User, strings.Join(a.Caller.Groups, ","), a.TraceID, a.View, a.Tool, a.ToolSet, a.Decision, a.Reason, a.Outcome})
		}
		Expect(rows).To(ConsistOf(
			row{"oidc:alice", "oidc:crm-readers", traceID, "all", "crm_echo", "crm/crm-tools", "allowed", "", "ok"},
			row{"oidc:alice", "oidc:crm-readers", traceID, "all", "crm_headers", "crm/crm-tools", "denied", "not_permitted", "denied"},
			row{"oidc:alice", "oidc:crm-readers", traceID, "all", "forecast", "weather/weather-tools", "denied", "not_permitted", "denied"},
			row{"oidc:alice", "oidc:crm-readers", traceID, "namespaces/crm", "crm_echo", "crm/crm-tools", "allowed", "", "ok"},
			row{"oidc:ts-agent", "oidc:crm-readers", "", "all", "crm_echo", "crm/crm-tools", "allowed", "", "ok"},
			row{"oidc:ts-agent", "oidc:crm-readers", "", "all", "crm_headers", "crm/crm-tools", "denied", "not_permitted", "denied"},
			row{"oidc:dave", "oidc:txn-callers", "", "all", "txn_token", "oidc-txn/txn-tools", "allowed", "", "ok"},
		))
	})
})

// txnTokenTool returns the Txn-Token header its call came with: a stand-in
// for a workload that passes it on down the call path.
func txnTokenTool() *toolkit.Tool {
	return toolkit.MustNew("token", "Shows the Txn-Token the workload got", func(ctx context.Context, _ struct {
		Text string `json:"text,omitempty"`
	}) (string, error) {
		c, _ := toolkit.CallerFrom(ctx)
		return c.Header.Get(server.TxnTokenHeader), nil
	})
}

// headerTransport sets its headers on every request.
type headerTransport map[string]string

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// signedInTypeScriptClient runs the TypeScript SDK client against url as
// the confidential client id of op, told nothing of op: it finds it from
// the gateway's 401 and metadata. It returns the events, stderr and how
// the client ended.
func signedInTypeScriptClient(op *harness.OpenIDProvider, id, url, tool, args string) (map[string]tsEvent, string, error) {
	node, err := exec.LookPath("node")
	Expect(err).NotTo(HaveOccurred(), "node is needed for the TypeScript SDK client")
	Expect(filepath.Join(interopDir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")).To(BeAnExistingFile(),
		"the TypeScript SDK client is not installed: run make interop-deps")
	cmd := exec.CommandContext(ctx, node, "interop.mjs", url, tool, args)
	cmd.Dir = interopDir
	cmd.Env = append(os.Environ(), "INTEROP_OAUTH_CLIENT_ID="+id, "INTEROP_OAUTH_CLIENT_SECRET="+id+"-secret", "NODE_EXTRA_CA_CERTS="+op.CAFile)
	var stderr strings.Builder
	cmd.Stderr = io.MultiWriter(&stderr, GinkgoWriter)
	out, err := cmd.Output()
	events := map[string]tsEvent{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var e tsEvent
		if json.Unmarshal([]byte(line), &e) == nil {
			events[e.Event] = e
		}
	}
	return events, stderr.String(), err
}
