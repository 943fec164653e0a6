package gateway_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// privateCA is a certificate authority of the test's own, which no system
// root trusts.
type privateCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newPrivateCA(t *testing.T) *privateCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "toolplane test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &privateCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// serving issues a serving certificate for dnsName.
func (ca *privateCA) serving(t *testing.T, dnsName string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: dnsName}, DNSNames: []string{dnsName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// tokenServer is an MCP server (Go SDK, stateless) that answers only
// requests with its bearer token, and records the Authorization header of
// every request it gets.
type tokenServer struct {
	srv   *httptest.Server
	token string

	mu   sync.Mutex
	seen []string
}

// newTokenServer serves tool at https (with cert) or plain http. With echo,
// a request without the right token is answered 401 with the header it
// sent in the body, as a careless server might.
func newTokenServer(t *testing.T, tool, token string, cert *tls.Certificate, echo bool) *tokenServer {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "secure-mcp"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: tool}, func(_ context.Context, _ *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "authorized"}}}, nil, nil
	})
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true, DisableLocalhostProtection: true})
	ts := &tokenServer{token: token}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get("Authorization")
		ts.mu.Lock()
		ts.seen = append(ts.seen, got)
		ts.mu.Unlock()
		if token != "" && got != "Bearer "+token {
			if echo {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_ = json.NewEncoder(w).Encode(spec.ErrorResponse{Error: spec.ErrorDetail{Code: "unauthorized", Message: "you sent " + got}})
				return
			}
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		mcpHandler.ServeHTTP(w, r)
	})
	ts.srv = httptest.NewUnstartedServer(h)
	if cert != nil {
		ts.srv.TLS = &tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12}
		ts.srv.StartTLS()
	} else {
		ts.srv.Start()
	}
	t.Cleanup(ts.srv.Close)
	return ts
}

func (ts *tokenServer) headers() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]string(nil), ts.seen...)
}

// secureTableTool is the entry of an MCP ToolSet's tool at endpoint.
func secureTableTool(namespace, toolSet, tool, endpoint string) spec.TableTool {
	return spec.TableTool{
		Name: tool, SourceName: tool, InputSchema: json.RawMessage(`{"type":"object"}`),
		ToolSet:   spec.ObjectReference{Namespace: namespace, Name: toolSet},
		Protocol:  spec.ProtocolMCP,
		Endpoints: &spec.Endpoints{MCP: endpoint},
	}
}

// credentialObjects are a ToolSet with authorization (and, with ca, a
// private CA from a ConfigMap) and the Secret of its token.
func credentialObjects(namespace, name, scheme, token string, ca []byte) []runtimeObject {
	ts := &v1alpha1.ToolSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: v1alpha1.ToolSetSpec{
			Protocol: v1alpha1.ProtocolMCP, Scheme: scheme,
			Authorization: &v1alpha1.Authorization{BearerToken: v1alpha1.KeyReference{Name: name + "-token", Key: "token"}},
		},
	}
	objs := []runtimeObject{ts, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-token"},
		Data:       map[string][]byte{"token": []byte(token + "\n")},
	}}
	if ca != nil {
		ts.Spec.TLS = &v1alpha1.TLSConfig{CA: &v1alpha1.CASource{ConfigMap: &v1alpha1.KeyReference{Name: name + "-ca", Key: "ca.crt"}}}
		objs = append(objs, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-ca"},
			Data:       map[string]string{"ca.crt": string(ca)},
		})
	}
	return objs
}

type runtimeObject = client.Object

// kubernetesCredentials reads objs as the gateway reads them from the API
// server: ToolSets, Secrets and ConfigMaps by name.
func kubernetesCredentials(t *testing.T, objs ...runtimeObject) *gateway.KubernetesCredentials {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	b := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...)
	return &gateway.KubernetesCredentials{Reader: b.Build()}
}

// TestMCPToolSetWithAuthorizationIsCalledOverTLSWithItsToken: an MCP
// ToolSet whose server wants a bearer token and serves a certificate of a
// private CA is called through the gateway with its token (read from its
// Secret) and its CA (read from its ConfigMap); without them the same call
// fails, on the certificate.
func TestMCPToolSetWithAuthorizationIsCalledOverTLSWithItsToken(t *testing.T) {
	const (
		host  = "secure.tenant.svc.cluster.local"
		token = "tenant-s3cret-token"
	)
	ca := newPrivateCA(t)
	cert := ca.serving(t, host)
	secure := newTokenServer(t, "secure_whoami", token, &cert, false)
	r := new(routes)
	r.set(host+":8443", secure.srv.Listener.Addr().String())
	tbl := table([]spec.TableTool{secureTableTool("tenant", "secure", "secure_whoami", "https://"+host+":8443/mcp")})

	creds := kubernetesCredentials(t, credentialObjects("tenant", "secure", "https", token, ca.pem)...)
	g, url := newGateway(t, r, gateway.Options{Credentials: creds, CallTimeout: 10 * time.Second})
	if err := g.SetTable(tbl); err != nil {
		t.Fatal(err)
	}
	// The caller's own Authorization, which must never reach the server.
	hc := &http.Client{Transport: headerTransport{"Authorization": "Bearer the-callers-own"}}
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			cs := connect(t, url+"/mcp", era, nil, hc)
			res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "secure_whoami"})
			if err != nil || res.IsError || text(res) != "authorized" {
				t.Fatalf("the call with the ToolSet's token and CA: %v %+v", err, res)
			}
		})
	}
	for _, h := range secure.headers() {
		if h != "Bearer "+token {
			t.Errorf("the server got Authorization %q, want only the ToolSet's token", h)
		}
	}

	t.Run("without the ToolSet's CA and token", func(t *testing.T) {
		g, url := newGateway(t, r, gateway.Options{CallTimeout: 10 * time.Second})
		if err := g.SetTable(tbl); err != nil {
			t.Fatal(err)
		}
		cs := connect(t, url+"/mcp", eras[0], nil, nil)
		res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "secure_whoami"})
		if err != nil || !res.IsError || !strings.Contains(text(res), "certificate") {
			t.Fatalf("a call that trusts only the system roots: %v %+v", err, res)
		}
	})
}

// TestAToolSetTokenIsNeverSentOverHTTPNorToAnotherToolSet: a ToolSet with
// authorization whose endpoint is plain http is refused with a clear error
// and its server gets no request at all; another ToolSet's server, called
// through the same gateway, never gets the first one's token.
func TestAToolSetTokenIsNeverSentOverHTTPNorToAnotherToolSet(t *testing.T) {
	const (
		secureHost = "secure.tenant.svc.cluster.local"
		token      = "tenant-s3cret-token"
	)
	ca := newPrivateCA(t)
	cert := ca.serving(t, secureHost)
	secure := newTokenServer(t, "secure_whoami", token, &cert, false)
	plain := newTokenServer(t, "plain_whoami", "", nil, false)           // http, ToolSet with authorization
	other := newTokenServer(t, "other_whoami", "", nil, false)           // http, another namespace, no credentials
	neighbour := newTokenServer(t, "neighbour_whoami", "", &cert, false) // https, same namespace, no credentials
	r := new(routes)
	r.set(secureHost+":8443", secure.srv.Listener.Addr().String())
	r.set("plain.tenant.svc.cluster.local:8080", plain.srv.Listener.Addr().String())
	r.set("other.elsewhere.svc.cluster.local:8080", other.srv.Listener.Addr().String())
	r.set(secureHost+":9443", neighbour.srv.Listener.Addr().String())

	objs := credentialObjects("tenant", "secure", "https", token, ca.pem)
	objs = append(objs, credentialObjects("tenant", "plain", "https", token, nil)...)
	objs = append(objs,
		&v1alpha1.ToolSet{ObjectMeta: metav1.ObjectMeta{Namespace: "elsewhere", Name: "other"}},
		&v1alpha1.ToolSet{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "neighbour"},
			Spec: v1alpha1.ToolSetSpec{Scheme: "https", TLS: &v1alpha1.TLSConfig{CA: &v1alpha1.CASource{ConfigMap: &v1alpha1.KeyReference{Name: "secure-ca", Key: "ca.crt"}}}}},
	)
	tbl := table([]spec.TableTool{
		secureTableTool("tenant", "secure", "secure_whoami", "https://"+secureHost+":8443/mcp"),
		// spec.service.scheme http under a ToolSet scraped over https.
		secureTableTool("tenant", "plain", "plain_whoami", "http://plain.tenant.svc.cluster.local:8080/mcp"),
		secureTableTool("elsewhere", "other", "other_whoami", "http://other.elsewhere.svc.cluster.local:8080/mcp"),
		// The same Service host as secure's, another port and ToolSet.
		secureTableTool("tenant", "neighbour", "neighbour_whoami", "https://"+secureHost+":9443/mcp"),
	})
	g, url := newGateway(t, r, gateway.Options{Credentials: kubernetesCredentials(t, objs...), CallTimeout: 10 * time.Second})
	if err := g.SetTable(tbl); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, url+"/mcp", eras[0], nil, nil)
	call := func(name string) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: name})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}
	for range 3 {
		for _, name := range []string{"secure_whoami", "other_whoami", "neighbour_whoami"} {
			if res := call(name); res.IsError || text(res) != "authorized" {
				t.Fatalf("%s: %s", name, text(res))
			}
		}
		res := call("plain_whoami")
		if !res.IsError || !strings.Contains(text(res), "tenant/plain") || !strings.Contains(text(res), "only over https") {
			t.Fatalf("a ToolSet with a token behind an http endpoint: %s", text(res))
		}
	}
	if got := plain.headers(); len(got) != 0 {
		t.Errorf("the http endpoint of a ToolSet with a token got %d requests", len(got))
	}
	for name, s := range map[string]*tokenServer{"other": other, "neighbour": neighbour} {
		got := s.headers()
		if len(got) == 0 {
			t.Fatalf("%s got no request: the check proves nothing", name)
		}
		for _, h := range got {
			if h != "" {
				t.Errorf("%s, another ToolSet, got Authorization %q", name, h)
			}
		}
	}
}

// TestAToolSetTokenIsNeverLogged: the gateway's log, at debug, of calls
// that succeed, that a server refuses while echoing the token back, and
// that are refused over http, never holds a token; neither do the error
// results the caller sees.
func TestAToolSetTokenIsNeverLogged(t *testing.T) {
	const (
		secureHost = "secure.tenant.svc.cluster.local"
		echoHost   = "echo.tenant.svc.cluster.local"
		token      = "tenant-s3cret-token"
		echoToken  = "echo-s3cret-token"
	)
	ca := newPrivateCA(t)
	secureCert, echoCert := ca.serving(t, secureHost), ca.serving(t, echoHost)
	secure := newTokenServer(t, "secure_whoami", token, &secureCert, false)
	// It wants another token than the one its ToolSet has, and says what
	// it got.
	echo := newTokenServer(t, "echo_whoami", "something-else", &echoCert, true)
	r := new(routes)
	r.set(secureHost+":8443", secure.srv.Listener.Addr().String())
	r.set(echoHost+":8443", echo.srv.Listener.Addr().String())
	objs := credentialObjects("tenant", "secure", "https", token, ca.pem)
	objs = append(objs, credentialObjects("tenant", "echo", "https", echoToken, ca.pem)...)
	objs = append(objs, credentialObjects("tenant", "plain", "https", token, nil)...)
	tbl := table([]spec.TableTool{
		secureTableTool("tenant", "secure", "secure_whoami", "https://"+secureHost+":8443/mcp"),
		secureTableTool("tenant", "echo", "echo_whoami", "https://"+echoHost+":8443/mcp"),
		// The same server as a toolkit workload's invoke endpoint, whose
		// error body the gateway quotes.
		{
			Name: "echo_invoke", SourceName: "echo_invoke", InputSchema: json.RawMessage(`{"type":"object"}`),
			ToolSet:   spec.ObjectReference{Namespace: "tenant", Name: "echo"},
			Endpoints: &spec.Endpoints{Invoke: "https://" + echoHost + ":8443/tools/echo_invoke", MCP: "https://" + echoHost + ":8443/mcp"},
		},
		secureTableTool("tenant", "plain", "plain_whoami", "http://plain.tenant.svc.cluster.local:8080/mcp"),
	})
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewJSONHandler(&lockedWriter{w: &logs, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	g, url := newGateway(t, r, gateway.Options{Credentials: kubernetesCredentials(t, objs...), CallTimeout: 10 * time.Second, Logger: logger})
	if err := g.SetTable(tbl); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, url+"/mcp", eras[0], nil, nil)
	var results []string
	for _, name := range []string{"secure_whoami", "echo_whoami", "echo_invoke", "plain_whoami"} {
		res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: name})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		results = append(results, text(res))
	}
	if !strings.Contains(results[1], "answered HTTP 401") {
		t.Errorf("an MCP server's refusal reads: %s", results[1])
	}
	if !strings.Contains(strings.Join(echo.headers(), ","), echoToken) {
		t.Fatal("the echoing server never got its ToolSet's token: the check proves nothing")
	}
	mu.Lock()
	out := logs.String()
	mu.Unlock()
	if !strings.Contains(out, "echo_whoami") || !strings.Contains(out, "you sent Bearer") {
		t.Fatalf("the log has no line of the failed call: the check proves nothing:\n%s", out)
	}
	for _, secret := range []string{token, echoToken} {
		if strings.Contains(out, secret) {
			t.Errorf("the gateway logged a ToolSet's token:\n%s", out)
		}
		for _, res := range results {
			if strings.Contains(res, secret) {
				t.Errorf("a caller was shown a ToolSet's token: %s", res)
			}
		}
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestCredentialsAreReadOncePerTTLAndNeverHoldACallPastItsTimeout: many
// calls of one ToolSet read its credentials once; a source that hangs
// fails a call at its own timeout, with an error result, and nothing else.
func TestCredentialsAreReadOncePerTTLAndNeverHoldACallPastItsTimeout(t *testing.T) {
	wl := newWorkload(t, "crm", "crm-tools", "", echoTool("crm"))
	slow := newWorkload(t, "slow", "slow-tools", "slow_", echoTool("slow"))
	var reads atomic.Int64
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	src := gateway.CredentialsFunc(func(ctx context.Context, ref spec.ObjectReference) (*gateway.BackendCredentials, error) {
		if ref.Namespace == "slow" {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil, ctx.Err()
		}
		reads.Add(1)
		return &gateway.BackendCredentials{}, nil
	})
	g, url := newGateway(t, new(routes).add(wl, slow), gateway.Options{Credentials: src, CredentialsTTL: time.Hour, CallTimeout: 500 * time.Millisecond})
	if err := g.SetTable(table(wl.tableTools(), slow.tableTools())); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, url+"/mcp", eras[0], nil, nil)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}})
			if err != nil || res.IsError {
				t.Errorf("%v %+v", err, res)
			}
		})
	}
	wg.Wait()
	if n := reads.Load(); n != 1 {
		t.Errorf("20 calls read the ToolSet's credentials %d times, want 1", n)
	}
	res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "slow_echo", Arguments: map[string]any{"text": "x"}})
	if err != nil || !res.IsError || !strings.Contains(text(res), "credentials") || !strings.Contains(text(res), "slow/slow-tools") {
		t.Fatalf("a call whose credentials hang: %v %+v", err, res)
	}
}
