package gateway

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
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

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/test/harness"
	"github.com/toolplane/toolplane/toolkit/server"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// ecKey is an ECDSA P-256 private key in PEM, as the chart's
// genPrivateKey "ecdsa" writes it.
func ecKey() []byte {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	der, err := x509.MarshalECPrivateKey(k)
	Expect(err).NotTo(HaveOccurred())
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

// writeKeyDir writes a key directory as a mounted Secret holds it; an
// empty previous is no previous.key.
func writeKeyDir(dir string, current, previous []byte) {
	Expect(os.WriteFile(filepath.Join(dir, gateway.CurrentKeyFile), current, 0o600)).To(Succeed())
	p := filepath.Join(dir, gateway.PreviousKeyFile)
	if previous == nil {
		Expect(os.Remove(p)).To(Or(Succeed(), MatchError(os.ErrNotExist)))
		return
	}
	Expect(os.WriteFile(p, previous, 0o600)).To(Succeed())
}

// openGatewayTools are the names the suite's open gateway serves now.
func openGatewayTools(g Gomega) []string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, gw.URL()+"/v1/tools", nil)
	g.Expect(err).NotTo(HaveOccurred())
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	var t spec.Table
	g.Expect(json.NewDecoder(resp.Body).Decode(&t)).To(Succeed())
	return names(&t)
}

var _ = Describe("The caller at the tool, with --txn-token-key-dir", Ordered, func() {
	const (
		namespace = "identity"
		toolSet   = "id-tools"
		agent     = "identity-agent"
	)
	var (
		keyDir   string
		idGW     *harness.Gateway
		toolsURL string
		tok      string
		op       *harness.OpenIDProvider
	)

	BeforeAll(func() {
		cs, err := kubernetes.NewForConfig(cp.Config)
		Expect(err).NotTo(HaveOccurred())
		Expect(cp.CreateNamespace(ctx, namespace)).To(Succeed())
		keyDir = filepath.Join(workDir, "txn-keys")
		Expect(os.MkdirAll(keyDir, 0o700)).To(Succeed())
		writeKeyDir(keyDir, ecKey(), nil)

		By("starting an OpenID Provider whose client carol is a person in two IdP groups")
		op, err = harness.StartOpenIDProvider(workDir, harness.OIDCClient{ID: "carol", Secret: "carol-secret",
			Audience: []string{tokenAudience}, Groups: []string{"id-users", "auditors"}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(op.Close)
		cfg := filepath.Join(workDir, "authentication-config-txn.yaml")
		Expect(os.WriteFile(cfg, []byte(op.AuthenticationConfiguration(tokenAudience, "")), 0o600)).To(Succeed())

		By("starting a gateway that authenticates ServiceAccounts and the IdP's users, and mints their tokens")
		toolsAddr, err := harness.FreeAddr()
		Expect(err).NotTo(HaveOccurred())
		resolve := map[string]string{}
		for _, w := range wls {
			resolve[w.host()] = w.addr()
		}
		resolve[toolSet+"."+namespace+".svc.cluster.local:"+strconv.Itoa(servicePort)] = toolsAddr
		idGW = &harness.Gateway{Bin: gatewayBin, Kubeconfig: cp.Kubeconfig, TableNamespace: tableNamespace, Resolve: resolve,
			Args: []string{"--auth=kubernetes,oidc", "--authentication-config", cfg, "--token-audience", tokenAudience, "--auth-cache-ttl", "1s",
				"--txn-token-key-dir", keyDir, "--public-url", "https://toolplane-gateway.test"},
			LogPath: filepath.Join(workDir, "gateway-txn.log")}
		Expect(idGW.Start(ctx)).To(Succeed())
		DeferCleanup(func() { Expect(idGW.Stop(30 * time.Second)).To(Succeed()) })

		By("starting example-tools, which verifies the tokens against the gateway's JWKS")
		bin, err := harness.Build(ctx, filepath.Join("..", ".."), workDir, "example-tools")
		Expect(err).NotTo(HaveOccurred())
		tools := &harness.Process{Name: "example-tools", Bin: bin, LogPath: filepath.Join(workDir, "example-tools-txn.log"),
			Args: []string{"--addr", toolsAddr, "--name", toolSet, "--only", "whoami,typed_echo", "--allow-any-host-on-loopback",
				"--caller-jwks-url", idGW.URL() + gateway.JWKSPath, "--caller-audience", namespace + "/" + toolSet}}
		toolsURL = "http://" + toolsAddr
		Expect(tools.Start(ctx, toolsURL+spec.DefaultPath)).To(Succeed())
		DeferCleanup(func() { Expect(tools.Stop(30 * time.Second)).To(Succeed()) })

		By("publishing its ToolSet")
		_, p, err := net.SplitHostPort(toolsAddr)
		Expect(err).NotTo(HaveOccurred())
		port, err := strconv.Atoi(p)
		Expect(err).NotTo(HaveOccurred())
		_, err = harness.CreateReadyPod(ctx, cp.Client, namespace, toolSet+"-0", toolSet, port)
		Expect(err).NotTo(HaveOccurred())
		ts := harness.NewToolSet(namespace, toolSet, toolSet, spec.DefaultPath, 30*time.Second)
		ts.Spec.Service = &v1alpha1.ServiceReference{Name: toolSet, Port: servicePort}
		ts.Spec.Prefix = "id_"
		Expect(cp.Client.Create(ctx, ts)).To(Succeed())
		// The other specs compare the open gateway's lists with the table:
		// this one leaves both as it found them, and each change whole.
		DeferCleanup(func() {
			Expect(cp.Client.Delete(ctx, ts)).To(Succeed())
			waitForTable(func(owners map[string]string) bool { _, ok := owners["id_whoami"]; return !ok })
			Eventually(openGatewayTools, settle, 200*time.Millisecond).ShouldNot(ContainElement("id_whoami"))
		})
		waitForTable(func(owners map[string]string) bool { return owners["id_whoami"] == namespace+"/"+toolSet })
		Eventually(openGatewayTools, settle, 200*time.Millisecond).Should(ContainElement("id_whoami"))

		By("granting a ServiceAccount and the IdP group id-users the ToolSet's tools")
		_, err = cs.CoreV1().ServiceAccounts("agents").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: agent}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		tr, err := cs.CoreV1().ServiceAccounts("agents").CreateToken(ctx, agent, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: []string{tokenAudience}, ExpirationSeconds: ptr.To[int64](3600)},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		tok = tr.Status.Token
		_, err = cs.RbacV1().Roles(namespace).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "call-tools"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"toolplane.io"}, Resources: []string{"tools"}, Verbs: []string{"call"}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = cs.RbacV1().RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "call-tools"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "call-tools"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "agents", Name: agent},
				{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "oidc:id-users"}},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
	})

	type identity struct {
		Subject string   `json:"subject"`
		Groups  []string `json:"groups"`
	}
	// whoamiAs calls id_whoami through the gateway with bearer token
	// token; whoami does as the agent. Once the gateway holds the
	// ToolSet's table, every call must work.
	whoamiAs := func(g Gomega, token string) identity {
		s := connect(idGW.URL()+"/mcp", "2026-07-28", nil, bearer(token))
		r, err := call(s, "id_whoami", map[string]any{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.IsError).To(BeFalse(), text(r))
		b, err := json.Marshal(r.StructuredContent)
		g.Expect(err).NotTo(HaveOccurred())
		var id identity
		g.Expect(json.Unmarshal(b, &id)).To(Succeed())
		return id
	}
	whoami := func(g Gomega) identity { return whoamiAs(g, tok) }
	wantCaller := func(id identity) {
		Expect(id.Subject).To(Equal("system:serviceaccount:agents:" + agent))
		Expect(id.Groups).To(ContainElements("system:serviceaccounts", "system:serviceaccounts:agents", "system:authenticated"))
	}
	jwks := func() []string {
		resp, err := http.Get(idGW.URL() + gateway.JWKSPath)
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusOK))
		var set jose.JSONWebKeySet
		Expect(json.NewDecoder(resp.Body).Decode(&set)).To(Succeed())
		var kids []string
		for _, k := range set.Keys {
			Expect(k.IsPublic()).To(BeTrue())
			kids = append(kids, k.KeyID)
		}
		return kids
	}
	direct := func(txnToken string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, toolsURL+spec.InvokePrefix+"whoami", strings.NewReader("{}"))
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Content-Type", "application/json")
		if txnToken != "" {
			req.Header.Set(server.TxnTokenHeader, txnToken)
		}
		resp, err := http.DefaultClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		return resp.StatusCode, string(b)
	}

	It("gives whoami the ServiceAccount's subject and groups, as the tool verified them", func() {
		var id identity
		Eventually(func(g Gomega) { id = whoami(g) }, settle, 250*time.Millisecond).Should(Succeed())
		wantCaller(id)

		By("a direct call without a token is anonymous, one with a forged token is refused")
		status, body := direct("")
		Expect(status).To(Equal(http.StatusOK))
		Expect(body).To(ContainSubstring(`"structuredContent":{"subject":"","groups":[]}`))
		forgedDir := GinkgoT().TempDir()
		writeKeyDir(forgedDir, ecKey(), nil)
		forger, err := gateway.NewTxnTokens(gateway.TxnTokenOptions{KeyDir: forgedDir})
		Expect(err).NotTo(HaveOccurred())
		forged, err := forger.Mint(&gateway.Caller{User: "system:admin", Groups: []string{"system:masters"}},
			&spec.TableTool{Name: "id_whoami", SourceName: "whoami", ToolSet: spec.ObjectReference{Namespace: namespace, Name: toolSet}}, "x", "", "toolplane-gateway")
		Expect(err).NotTo(HaveOccurred())
		status, body = direct(forged)
		Expect(status).To(Equal(http.StatusUnauthorized), body)
		Expect(body).NotTo(ContainSubstring("system:admin"))
	})

	It("gives whoami a person's subject and groups from the IdP's token, mapped with their prefix", func() {
		person, err := op.Token(ctx, "carol", "carol-secret")
		Expect(err).NotTo(HaveOccurred())
		// The gateway fetches the IdP's discovery document and keys in the
		// background: until then the person's token is refused.
		var id identity
		Eventually(func(g Gomega) { id = whoamiAs(g, person) }, settle, 250*time.Millisecond).Should(Succeed())
		Expect(id.Subject).To(Equal("oidc:carol"))
		Expect(id.Groups).To(ConsistOf("oidc:id-users", "oidc:auditors"))
	})

	It("keeps calls working through a key rotation, the JWKS listing the current and previous keys", func() {
		first := jwks()
		Expect(first).To(HaveLen(1))
		wantCaller(whoami(Default))
		old, err := os.ReadFile(filepath.Join(keyDir, gateway.CurrentKeyFile))
		Expect(err).NotTo(HaveOccurred())

		By("step 1: a new current key, the old one previous; the gateway rereads the files (every 10s)")
		writeKeyDir(keyDir, ecKey(), old)
		Eventually(func() []string {
			wantCaller(whoami(Default)) // every call works meanwhile
			return jwks()
		}, settle, 500*time.Millisecond).Should(And(HaveLen(2), HaveExactElements(Not(Equal(first[0])), Equal(first[0]))))
		next := jwks()[0]

		By("step 2: the old key dropped; the new one signs, and example-tools fetches it")
		cur, err := os.ReadFile(filepath.Join(keyDir, gateway.CurrentKeyFile))
		Expect(err).NotTo(HaveOccurred())
		writeKeyDir(keyDir, cur, nil)
		Eventually(func() []string {
			wantCaller(whoami(Default))
			return jwks()
		}, settle, 500*time.Millisecond).Should(Equal([]string{next}))
		for range 3 {
			wantCaller(whoami(Default))
		}
	})

	It("sends no token to a workload when auth is off", func() {
		resolve := map[string]string{wls["crm-tools"].host(): wls["crm-tools"].addr()}
		open := &harness.Gateway{Bin: gatewayBin, Kubeconfig: cp.Kubeconfig, TableNamespace: tableNamespace, Resolve: resolve,
			Args: []string{"--txn-token-key-dir", keyDir}, LogPath: filepath.Join(workDir, "gateway-txn-open.log")}
		Expect(open.Start(ctx)).To(Succeed())
		DeferCleanup(func() { Expect(open.Stop(30 * time.Second)).To(Succeed()) })
		s := connect(open.URL()+"/mcp", "2026-07-28", nil, nil)
		r, err := call(s, "crm_headers", nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(r.IsError).To(BeFalse(), text(r))
		Expect(text(r)).NotTo(ContainSubstring(server.TxnTokenHeader))
		Expect(text(r)).To(ContainSubstring("Content-Type"), "the header tool lists what it got")
	})
})
