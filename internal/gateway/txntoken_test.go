package gateway_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/server"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// groupAuth authenticates a bearer token as the ServiceAccount of that
// name in namespace crm, with the groups the API server gives one, and
// lets it call everything.
type groupAuth struct{}

func (groupAuth) Authenticate(_ context.Context, token string) (*gateway.Caller, error) {
	return &gateway.Caller{User: "system:serviceaccount:crm:" + token, AuthMode: "kubernetes",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:crm", "system:authenticated"}}, nil
}

func (groupAuth) Allowed(context.Context, *gateway.Caller, string, string) (bool, error) {
	return true, nil
}

type identity struct {
	Subject   string   `json:"subject"`
	Groups    []string `json:"groups"`
	RequestID string   `json:"requestId"`
	Token     string   `json:"token"`
}

// identityTool reports the caller the workload verified, and the
// Txn-Token header it got.
func identityTool() *toolkit.Tool {
	return toolkit.MustNew("whoami", "Reports the verified caller", func(ctx context.Context, _ struct{}) (identity, error) {
		c, _ := toolkit.CallerFrom(ctx)
		return identity{Subject: c.Subject, Groups: c.Groups, RequestID: c.RequestID, Token: c.Header.Get(server.TxnTokenHeader)}, nil
	})
}

// pemKey is an ECDSA P-256 private key in PEM, as Helm's genPrivateKey
// "ecdsa" writes it (SEC1, "EC PRIVATE KEY").
func pemKey(t testing.TB) []byte {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

// edKey is an Ed25519 private key in PEM (PKCS #8), as the chart's
// genPrivateKey "ed25519" writes it.
func edKey(t testing.TB) []byte {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

func writeKeys(t testing.TB, dir string, current, previous []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, gateway.CurrentKeyFile), current, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, gateway.PreviousKeyFile), previous, 0o600); err != nil {
		t.Fatal(err)
	}
}

// txnFixture is a gateway with transaction tokens (and auth, if asked)
// routing to a workload that verifies them against the gateway's JWKS.
type txnFixture struct {
	g      *gateway.Gateway
	tokens *gateway.TxnTokens
	url    string
	dir    string
}

func newTxnFixture(t testing.TB, auth gateway.Auth, o gateway.TxnTokenOptions, verify server.TxnTokenOptions) *txnFixture {
	t.Helper()
	f := &txnFixture{dir: t.TempDir()}
	if o.KeyDir == "" {
		o.KeyDir = f.dir
		writeKeys(t, f.dir, pemKey(t), nil)
	}
	var err error
	if f.tokens, err = gateway.NewTxnTokens(o); err != nil {
		t.Fatal(err)
	}
	r := new(routes)
	f.g, f.url = newGateway(t, r, gateway.Options{Auth: auth, TxnTokens: f.tokens})

	verify.JWKSURL = f.url + gateway.JWKSPath
	wl := newVerifyingWorkload(t, "crm", "crm-tools", "crm_", verify, identityTool(), headerTool("headers"))
	r.add(wl)
	if err := f.g.SetTable(table(wl.tableTools())); err != nil {
		t.Fatal(err)
	}
	return f
}

// newVerifyingWorkload is newWorkload whose server verifies transaction
// tokens with verify, for the audience of its ToolSet.
func newVerifyingWorkload(t testing.TB, namespace, service, prefix string, verify server.TxnTokenOptions, tools ...*toolkit.Tool) *workload {
	t.Helper()
	verify.Audience = namespace + "/" + service
	reg := &toolkit.Registry{}
	if err := reg.Add(tools...); err != nil {
		t.Fatal(err)
	}
	h := server.New(reg, &server.Options{Name: service, AllowAnyHostOnLoopback: true, TxnToken: &verify})
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		h.Close()
		srv.Close()
	})
	return &workload{namespace: namespace, service: service, prefix: prefix, reg: reg, srv: srv}
}

// whoami calls crm_whoami through the gateway as the bearer token tok
// (none if empty), with the extra header pairs.
func (f *txnFixture) whoami(t testing.TB, tok string, header ...string) (identity, *mcp.CallToolResult) {
	t.Helper()
	h := headerTransport{}
	if tok != "" {
		h["Authorization"] = "Bearer " + tok
	}
	for i := 0; i+1 < len(header); i += 2 {
		h[header[i]] = header[i+1]
	}
	cs := connect(t, f.url+"/mcp", "2026-07-28", nil, &http.Client{Transport: h})
	res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "crm_whoami", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	var id identity
	if !res.IsError {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &id); err != nil {
			t.Fatal(err)
		}
	}
	return id, res
}

// jwtParts decodes a compact JWS's header and claims, unverified.
func jwtParts(t testing.TB, tok string) (header, claims map[string]any) {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("not a compact JWS: %q", tok)
	}
	for i, into := range []*map[string]any{&header, &claims} {
		b, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, into); err != nil {
			t.Fatal(err)
		}
	}
	return header, claims
}

func TestTxnTokenNamesTheCallerAtTheTool(t *testing.T) {
	f := newTxnFixture(t, groupAuth{}, gateway.TxnTokenOptions{Issuer: "https://toolplane-gateway.test"},
		server.TxnTokenOptions{Issuer: "https://toolplane-gateway.test", Required: true})
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	id, res := f.whoami(t, "agent", "traceparent", traceparent)
	if res.IsError {
		t.Fatalf("whoami: %s", text(res))
	}
	if id.Subject != "system:serviceaccount:crm:agent" ||
		!slices.Equal(id.Groups, []string{"system:serviceaccounts", "system:serviceaccounts:crm", "system:authenticated"}) {
		t.Errorf("the tool saw %+v", id)
	}
	if id.RequestID == "" {
		t.Error("the call has no request id")
	}
	header, claims := jwtParts(t, id.Token)
	if header["typ"] != server.TxnTokenType || header["alg"] != "ES256" || header["kid"] == "" {
		t.Errorf("header = %v", header)
	}
	iat, _ := claims["iat"].(float64)
	exp, _ := claims["exp"].(float64)
	tctx, _ := claims["tctx"].(map[string]any)
	rctx, _ := claims["rctx"].(map[string]any)
	if claims["aud"] != "crm/crm-tools" || claims["iss"] != "https://toolplane-gateway.test" || claims["txn"] != id.RequestID ||
		claims["req_wl"] != "toolplane-gateway" || exp-iat != gateway.DefaultTxnTokenLifetime.Seconds() ||
		tctx["tool"] != "crm_whoami" || tctx["sourceTool"] != "whoami" ||
		rctx["authn"] != "kubernetes" || rctx["traceId"] != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("claims = %v", claims)
	}

	// Each call has a token of its own.
	again, _ := f.whoami(t, "agent")
	if again.RequestID == id.RequestID || again.Token == id.Token {
		t.Error("two calls carried the same request id or token")
	}

	// A caller's own Txn-Token is never passed on: the workload sees the
	// gateway's.
	forged := id.Token[:len(id.Token)-4] + "AAAA"
	mine, res := f.whoami(t, "other", server.TxnTokenHeader, forged)
	if res.IsError || mine.Subject != "system:serviceaccount:crm:other" || mine.Token == forged {
		t.Errorf("with the caller's own Txn-Token: %+v %s", mine, text(res))
	}
}

func TestNoTxnTokenWithoutAuth(t *testing.T) {
	f := newTxnFixture(t, nil, gateway.TxnTokenOptions{}, server.TxnTokenOptions{})
	// A caller's token, sent to a gateway without auth, reaches no
	// workload, and the gateway mints none: there is no caller to vouch
	// for.
	tool := &spec.TableTool{Name: "crm_whoami", SourceName: "whoami", ToolSet: spec.ObjectReference{Namespace: "crm", Name: "crm-tools"}}
	tok, err := f.tokens.Mint(&gateway.Caller{User: "admin"}, tool, "x", "", "toolplane-gateway")
	if err != nil {
		t.Fatal(err)
	}
	id, res := f.whoami(t, "", server.TxnTokenHeader, tok)
	if res.IsError || id.Subject != "" || id.Token != "" {
		t.Errorf("without auth the workload saw %+v %s", id, text(res))
	}
	cs := connect(t, f.url+"/mcp", "2026-07-28", nil, &http.Client{Transport: headerTransport{server.TxnTokenHeader: tok}})
	hres, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "crm_headers", Arguments: map[string]any{}})
	if err != nil || hres.IsError {
		t.Fatal(err, hres)
	}
	if strings.Contains(strings.ToLower(text(hres)), "txn-token") {
		t.Errorf("the workload got a Txn-Token without auth:\n%s", text(hres))
	}
}

func TestTxnTokenKeyRotationKeepsCallsWorking(t *testing.T) {
	dir := t.TempDir()
	a, b := pemKey(t), pemKey(t)
	writeKeys(t, dir, a, nil)
	f := newTxnFixture(t, groupAuth{}, gateway.TxnTokenOptions{KeyDir: dir, ActivationDelay: time.Hour},
		server.TxnTokenOptions{Required: true, MinRefreshInterval: time.Millisecond})
	kids := func() []string {
		resp, err := http.Get(f.url + gateway.JWKSPath)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var set jose.JSONWebKeySet
		if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, k := range set.Keys {
			if !k.IsPublic() {
				t.Errorf("the JWKS serves a private key: %s", k.KeyID)
			}
			out = append(out, k.KeyID)
		}
		return out
	}
	signedBy := func() string {
		t.Helper()
		id, res := f.whoami(t, "agent")
		if res.IsError || id.Subject != "system:serviceaccount:crm:agent" {
			t.Fatalf("whoami: %+v %s", id, text(res))
		}
		h, _ := jwtParts(t, id.Token)
		return h["kid"].(string)
	}
	kidA := signedBy()
	if got := kids(); !slices.Equal(got, []string{kidA}) {
		t.Fatalf("JWKS = %v, want [%s]", got, kidA)
	}

	// Rotation, step 1: b is current, a previous. Both are published at
	// once; a goes on signing until b has had time to reach every
	// replica's JWKS.
	writeKeys(t, dir, b, a)
	if changed, err := f.tokens.Reload(); err != nil || !changed {
		t.Fatalf("Reload = %v, %v", changed, err)
	}
	got := kids()
	if len(got) != 2 || got[1] != kidA {
		t.Fatalf("JWKS = %v, want [b, %s]", got, kidA)
	}
	kidB := got[0]
	if k := signedBy(); k != kidA {
		t.Errorf("signed by %s during the activation delay, want the previous key %s", k, kidA)
	}

	// A reload that finds a broken key file keeps the keys it has.
	if err := os.WriteFile(filepath.Join(dir, gateway.CurrentKeyFile), []byte("-----BEGIN NOTHING-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := f.tokens.Reload(); err == nil {
		t.Error("a broken current.key reloaded")
	}
	if k := signedBy(); k != kidA {
		t.Errorf("after a failed reload signed by %s, want %s", k, kidA)
	}

	// Step 2: a is dropped, so b signs; the workload, which holds only a,
	// fetches the JWKS again for b's kid, and the call works.
	writeKeys(t, dir, b, nil)
	if _, err := f.tokens.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := kids(); !slices.Equal(got, []string{kidB}) {
		t.Errorf("JWKS = %v, want [%s]", got, kidB)
	}
	if k := signedBy(); k != kidB {
		t.Errorf("signed by %s, want the new key %s", k, kidB)
	}
}

func TestTxnTokenKeyFiles(t *testing.T) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	pkcs8 := func(k any) []byte {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	}
	jwk := func(k any, kid string) []byte {
		b, err := json.Marshal(jose.JSONWebKey{Key: k, KeyID: kid})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	pub, _ := x509.MarshalPKIXPublicKey(ec.Public())
	for _, tc := range []struct {
		name, alg, kid string
		file           []byte
	}{
		{"SEC1 P-256", "ES256", "", pemKey(t)},
		{"PKCS8 P-256", "ES256", "", pkcs8(ec)},
		{"PKCS8 Ed25519", "EdDSA", "", pkcs8(ed)},
		{"JWK P-256", "ES256", "mine", jwk(ec, "mine")},
		{"JWK Ed25519", "EdDSA", "", jwk(ed, "")},
		{"P-384", "", "", pkcs8(p384)},
		{"RSA", "", "", pkcs8(rsaKey)},
		{"public key", "", "", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})},
		{"public JWK", "", "", jwk(ec.Public(), "k")},
		{"garbage", "", "", []byte("hello")},
		{"empty", "", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeKeys(t, dir, tc.file, nil)
			tt, err := gateway.NewTxnTokens(gateway.TxnTokenOptions{KeyDir: dir})
			if tc.alg == "" {
				if err == nil {
					t.Fatal("loaded")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			g := gateway.New(&gateway.Options{TxnTokens: tt})
			defer g.Close()
			rec := httptest.NewRecorder()
			g.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, gateway.JWKSPath, nil))
			var set jose.JSONWebKeySet
			if err := json.Unmarshal(rec.Body.Bytes(), &set); err != nil || len(set.Keys) != 1 {
				t.Fatalf("JWKS %s: %v", rec.Body, err)
			}
			k := set.Keys[0]
			if k.Algorithm != tc.alg || !k.IsPublic() || k.Use != "sig" || (tc.kid != "" && k.KeyID != tc.kid) || k.KeyID == "" {
				t.Errorf("JWKS key = %+v", k)
			}
		})
	}
	t.Run("no current key", func(t *testing.T) {
		if _, err := gateway.NewTxnTokens(gateway.TxnTokenOptions{KeyDir: t.TempDir()}); err == nil {
			t.Error("loaded an empty directory")
		}
	})
}

// The gateway signs its tokens itself, over go-jose's header for the key:
// every token is one go-jose verifies, with the claims the gateway means,
// whatever the key and however it is written (a JWK's own kid included,
// which go-jose escapes in the header), and an ES256 signature whose r or
// s starts with zero bytes as well.
func TestTxnTokenIsGoJOSEs(t *testing.T) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	jwk := func(k any, kid string) []byte {
		b, err := json.Marshal(jose.JSONWebKey{Key: k, KeyID: kid})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	caller := &gateway.Caller{User: "system:serviceaccount:crm:agent", Groups: []string{"system:serviceaccounts", "a<b>&c"}, AuthMode: "kubernetes"}
	tool := &spec.TableTool{Name: "crm_echo", SourceName: "echo", ToolSet: spec.ObjectReference{Namespace: "crm", Name: "crm-tools"}}
	for _, tc := range []struct {
		name, alg string
		file      []byte
		n         int
	}{
		{"SEC1 P-256", "ES256", pemKey(t), 300},
		{"PKCS8 Ed25519", "EdDSA", edKey(t), 20},
		{"JWK P-256 of an odd kid", "ES256", jwk(ec, `k<1>&"é`), 20},
		{"JWK Ed25519 of an odd kid", "EdDSA", jwk(ed, `k<1>&"é`), 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeKeys(t, dir, tc.file, nil)
			tt, err := gateway.NewTxnTokens(gateway.TxnTokenOptions{KeyDir: dir, Issuer: "https://gw.test"})
			if err != nil {
				t.Fatal(err)
			}
			g := gateway.New(&gateway.Options{TxnTokens: tt})
			defer g.Close()
			rec := httptest.NewRecorder()
			g.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, gateway.JWKSPath, nil))
			var set jose.JSONWebKeySet
			if err := json.Unmarshal(rec.Body.Bytes(), &set); err != nil || len(set.Keys) != 1 {
				t.Fatalf("JWKS %s: %v", rec.Body, err)
			}
			key := set.Keys[0]
			for i := range tc.n {
				tok, err := tt.Mint(caller, tool, "req-"+string(rune('a'+i%26)), "4bf92f3577b34da6a3ce929d0e0e4736", "toolplane-gateway")
				if err != nil {
					t.Fatal(err)
				}
				jws, err := jose.ParseSigned(tok, []jose.SignatureAlgorithm{jose.SignatureAlgorithm(tc.alg)})
				if err != nil {
					t.Fatalf("go-jose does not parse %q: %v", tok, err)
				}
				h := jws.Signatures[0].Protected
				if h.KeyID != key.KeyID || h.Algorithm != tc.alg || h.ExtraHeaders[jose.HeaderType] != server.TxnTokenType || len(h.ExtraHeaders) != 1 {
					t.Fatalf("header %+v", h)
				}
				payload, err := jws.Verify(key.Key)
				if err != nil {
					t.Fatalf("go-jose does not verify %q: %v", tok, err)
				}
				var c map[string]any
				if err := json.Unmarshal(payload, &c); err != nil {
					t.Fatal(err)
				}
				if c["sub"] != caller.User || c["aud"] != "crm/crm-tools" || c["iss"] != "https://gw.test" || c["txn"] != "req-"+string(rune('a'+i%26)) ||
					!slices.Equal(anyStrings(c["groups"]), caller.Groups) || c["exp"].(float64)-c["iat"].(float64) != 60 {
					t.Fatalf("claims %v", c)
				}
			}
		})
	}
}

func anyStrings(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, s := range l {
		str, _ := s.(string)
		out = append(out, str)
	}
	return out
}

// BenchmarkTxnTokenMint is the cost of minting one call's token, for the
// chart's Ed25519 key and for P-256, and of the bare Ed25519 signature of
// as many bytes (crypto/ed25519), the floor of the EdDSA figure, in the
// same run:
//
//	go test -run '^$' -bench BenchmarkTxnTokenMint ./internal/gateway/
func BenchmarkTxnTokenMint(b *testing.B) {
	caller := &gateway.Caller{User: "system:serviceaccount:crm:agent", AuthMode: "kubernetes",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:crm", "system:authenticated"}}
	tool := &spec.TableTool{Name: "crm_echo", SourceName: "echo", ToolSet: spec.ObjectReference{Namespace: "crm", Name: "crm-tools"}}
	b.Run("ed25519.Sign", func(b *testing.B) {
		dir := b.TempDir()
		writeKeys(b, dir, edKey(b), nil)
		tt, err := gateway.NewTxnTokens(gateway.TxnTokenOptions{KeyDir: dir, Issuer: "https://toolplane-gateway.test"})
		if err != nil {
			b.Fatal(err)
		}
		tok, err := tt.Mint(caller, tool, "KXWQ7B2N3VJ5MZ4RTD6EYHPGCA", "4bf92f3577b34da6a3ce929d0e0e4736", "toolplane-gateway")
		if err != nil {
			b.Fatal(err)
		}
		msg := []byte(tok[:strings.LastIndexByte(tok, '.')]) // what a token's signature signs
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			ed25519.Sign(priv, msg)
		}
	})
	for _, tc := range []struct {
		alg  string
		file []byte
	}{{"EdDSA", edKey(b)}, {"ES256", pemKey(b)}} {
		b.Run(tc.alg, func(b *testing.B) {
			dir := b.TempDir()
			writeKeys(b, dir, tc.file, nil)
			tt, err := gateway.NewTxnTokens(gateway.TxnTokenOptions{KeyDir: dir, Issuer: "https://toolplane-gateway.test"})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tt.Mint(caller, tool, "KXWQ7B2N3VJ5MZ4RTD6EYHPGCA", "4bf92f3577b34da6a3ce929d0e0e4736", "toolplane-gateway"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
