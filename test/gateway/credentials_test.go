package gateway

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/test/harness"
)

var _ = Describe("An MCP ToolSet that needs a token and a private CA", func() {
	It("is scraped by the operator and called through the gateway with its token over TLS, read from its Secret and ConfigMap", func() {
		const (
			ns      = "secure"
			name    = "secure-mcp"
			token   = "secure-mcp-s3cret"
			svcHost = name + "." + ns + ".svc.cluster.local"
		)
		Expect(cp.CreateNamespace(ctx, ns)).To(Succeed())

		By("a Go SDK MCP server on loopback that serves a private CA's certificate and wants the token")
		caPEM, cert := privateCACert(svcHost)
		s := mcp.NewServer(&mcp.Implementation{Name: name}, nil)
		mcp.AddTool(s, &mcp.Tool{Name: "secure_lookup"}, func(context.Context, *mcp.CallToolRequest, map[string]any) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "authorized"}}}, nil, nil
		})
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true, DisableLocalhostProtection: true})
		var refused atomic.Int64
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+token {
				refused.Add(1)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		}))
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		srv.StartTLS()
		DeferCleanup(srv.Close)
		_, p, err := net.SplitHostPort(srv.Listener.Addr().String())
		Expect(err).NotTo(HaveOccurred())
		port, err := strconv.Atoi(p)
		Expect(err).NotTo(HaveOccurred())

		By("its Secret, CA ConfigMap, ready Pod and ToolSet")
		Expect(cp.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mcp-token"},
			Data: map[string][]byte{"token": []byte(token)}})).To(Succeed())
		Expect(cp.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mcp-ca"},
			Data: map[string]string{"ca.crt": string(caPEM)}})).To(Succeed())
		_, err = harness.CreateReadyPod(ctx, cp.Client, ns, name+"-0", name, port)
		Expect(err).NotTo(HaveOccurred())
		ts := harness.NewToolSet(ns, name, name, "/mcp", 30*time.Second)
		ts.Spec.Protocol = v1alpha1.ProtocolMCP
		ts.Spec.Scheme = "https"
		ts.Spec.TLS = &v1alpha1.TLSConfig{CA: &v1alpha1.CASource{ConfigMap: &v1alpha1.KeyReference{Name: "mcp-ca", Key: "ca.crt"}}}
		ts.Spec.Authorization = &v1alpha1.Authorization{BearerToken: v1alpha1.KeyReference{Name: "mcp-token", Key: "token"}}
		ts.Spec.Service = &v1alpha1.ServiceReference{Name: name, Port: 8443}
		Expect(cp.Client.Create(ctx, ts)).To(Succeed())
		waitForTable(func(owners map[string]string) bool { return owners["secure_lookup"] == ns+"/"+name })

		By("a gateway with --backend-credentials=kubernetes")
		logPath := filepath.Join(workDir, "gateway-credentials.log")
		g := &harness.Gateway{Bin: gatewayBin, Kubeconfig: cp.Kubeconfig, TableNamespace: tableNamespace,
			Resolve: map[string]string{svcHost + ":8443": srv.Listener.Addr().String()},
			Args:    []string{"--backend-credentials=kubernetes", "--call-timeout", callTimeout.String(), "--log-level=debug"},
			LogPath: logPath}
		Expect(g.Start(ctx)).To(Succeed())
		DeferCleanup(func() { Expect(g.Stop(30 * time.Second)).To(Succeed()) })
		cs := connect(g.URL()+"/mcp", "2026-07-28", nil, nil)
		Eventually(func(gm Gomega) {
			res, err := call(cs, "secure_lookup", nil)
			gm.Expect(err).NotTo(HaveOccurred())
			gm.Expect(text(res)).To(Equal("authorized"))
		}, settle, 250*time.Millisecond).Should(Succeed())
		Expect(refused.Load()).To(BeZero(), "a request without the token reached the server")

		By("the gateway's log, at debug, never holding the token")
		logs, err := os.ReadFile(logPath)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(logs)).To(ContainSubstring("secure_lookup"), "the log has the call: the check proves something")
		Expect(string(logs)).NotTo(ContainSubstring(token))
	})
})

// privateCACert returns the PEM of a new CA, and a serving certificate it
// issued for dnsName and 127.0.0.1 (the Pod IP the operator scrapes).
func privateCACert(dnsName string) ([]byte, tls.Certificate) {
	GinkgoHelper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	Expect(err).NotTo(HaveOccurred())
	ca, err := x509.ParseCertificate(caDER)
	Expect(err).NotTo(HaveOccurred())
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: dnsName},
		DNSNames: []string{dnsName}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	Expect(err).NotTo(HaveOccurred())
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
