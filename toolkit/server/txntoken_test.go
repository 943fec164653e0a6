package server_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/server"
	"github.com/toolplane/toolplane/toolkit/spec"
)

const testAudience = "crm/crm-tools"

// issuer plays the gateway: it signs transaction tokens and serves its
// public keys at /jwks.json, and counts the fetches.
type issuer struct {
	t       testing.TB
	srv     *httptest.Server
	fetches atomic.Int64

	mu   sync.Mutex
	keys []signingKey // served, in order
	body []byte       // if set, served instead of the keys
	hang chan struct{}
}

type signingKey struct {
	kid  string
	alg  jose.SignatureAlgorithm
	priv crypto.Signer
}

func newIssuer(t testing.TB) *issuer {
	is := &issuer{t: t}
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		is.fetches.Add(1)
		is.mu.Lock()
		hang, body := is.hang, is.body
		var set jose.JSONWebKeySet
		for _, k := range is.keys {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.priv.Public(), KeyID: k.kid, Algorithm: string(k.alg), Use: "sig"})
		}
		is.mu.Unlock()
		if hang != nil {
			select {
			case <-hang:
			case <-r.Context().Done():
			}
			return
		}
		if body == nil {
			var err error
			if body, err = json.Marshal(set); err != nil {
				t.Error(err)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	t.Cleanup(func() {
		is.mu.Lock()
		if is.hang != nil {
			close(is.hang)
			is.hang = nil
		}
		is.mu.Unlock()
		is.srv.Close()
	})
	return is
}

func (is *issuer) url() string { return is.srv.URL + "/jwks.json" }

func newKey(t testing.TB, kid string, alg jose.SignatureAlgorithm) signingKey {
	t.Helper()
	var (
		priv crypto.Signer
		err  error
	)
	if alg == jose.EdDSA {
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	} else {
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	if err != nil {
		t.Fatal(err)
	}
	return signingKey{kid: kid, alg: alg, priv: priv}
}

// publish makes keys the served JWKS.
func (is *issuer) publish(keys ...signingKey) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.keys = keys
}

type tokenClaims struct {
	jwt.Claims
	Txn    string   `json:"txn,omitempty"`
	Groups []string `json:"groups,omitempty"`
}

// sign signs c with k as a transaction token (typ txntoken+jwt, unless
// typ says otherwise).
func sign(t testing.TB, k signingKey, c tokenClaims, typ ...string) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType(jose.ContentType(server.TxnTokenType))
	if len(typ) > 0 {
		opts = (&jose.SignerOptions{}).WithType(jose.ContentType(typ[0]))
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: jose.JSONWebKey{Key: k.priv, KeyID: k.kid}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := jwt.Signed(s).Claims(c).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// claims are valid claims for testAudience, issued now for a minute.
func claims(sub string, groups ...string) tokenClaims {
	now := time.Now()
	return tokenClaims{
		Claims: jwt.Claims{Subject: sub, Audience: jwt.Audience{testAudience}, Issuer: "https://gateway.test",
			IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(time.Minute))},
		Txn: "req-1", Groups: groups,
	}
}

type callerOut struct {
	Subject   string   `json:"subject"`
	Groups    []string `json:"groups"`
	RequestID string   `json:"requestId"`
	Scopes    []string `json:"scopes"`
}

func callerTool(ctx context.Context, _ struct{}) (callerOut, error) {
	c, _ := toolkit.CallerFrom(ctx)
	return callerOut{Subject: c.Subject, Groups: c.Groups, RequestID: c.RequestID, Scopes: c.Scopes}, nil
}

// txnServer serves a "caller" tool that reports its caller, verifying
// transaction tokens with o (JWKSURL defaulted to is), behind
// callerMiddleware, which sets a caller of its own (alice).
func txnServer(t testing.TB, is *issuer, o server.TxnTokenOptions) string {
	t.Helper()
	if o.JWKSURL == "" {
		o.JWKSURL = is.url()
	}
	if o.Audience == "" {
		o.Audience = testAudience
	}
	reg := new(toolkit.Registry)
	if err := reg.Add(must(toolkit.New("caller", "Report the caller", callerTool))); err != nil {
		t.Fatal(err)
	}
	h := server.New(reg, &server.Options{TxnToken: &o})
	srv := httptest.NewServer(callerMiddleware(h))
	t.Cleanup(func() {
		h.Close()
		srv.Close()
	})
	return srv.URL
}

// invokeAs calls the caller tool on invoke with the Txn-Token tok (none if
// empty) and returns the status and the caller or the error body.
func invokeAs(t testing.TB, url, tok string) (int, callerOut, spec.ErrorResponse) {
	t.Helper()
	req, err := http.NewRequestWithContext(bounded(t), http.MethodPost, url+"/tools/caller", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if tok != "" {
		req.Header.Set(server.TxnTokenHeader, tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var (
		out  callerOut
		eres spec.ErrorResponse
	)
	if resp.StatusCode != http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&eres); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, out, eres
	}
	var res struct {
		StructuredContent callerOut `json:"structuredContent"`
		IsError           bool      `json:"isError"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("the call failed: %+v", res)
	}
	return resp.StatusCode, res.StructuredContent, eres
}

func TestTxnTokenNamesTheCaller(t *testing.T) {
	for _, alg := range []jose.SignatureAlgorithm{jose.ES256, jose.EdDSA} {
		t.Run(string(alg), func(t *testing.T) {
			is := newIssuer(t)
			k := newKey(t, "k1", alg)
			is.publish(k)
			url := txnServer(t, is, server.TxnTokenOptions{Issuer: "https://gateway.test"})

			status, c, e := invokeAs(t, url, sign(t, k, claims("system:serviceaccount:crm:agent", "system:serviceaccounts", "team-crm")))
			if status != http.StatusOK {
				t.Fatalf("invoke = %d %+v", status, e)
			}
			// The token's caller replaces the one the outer middleware set
			// (alice, with scopes): only the token speaks for the caller.
			want := callerOut{Subject: "system:serviceaccount:crm:agent", Groups: []string{"system:serviceaccounts", "team-crm"}, RequestID: "req-1"}
			if c.Subject != want.Subject || strings.Join(c.Groups, ",") != strings.Join(want.Groups, ",") || c.RequestID != want.RequestID || len(c.Scopes) != 0 {
				t.Errorf("caller = %+v, want %+v", c, want)
			}

			// A caller of many groups (an OIDC user's) fits.
			many := make([]string, 300)
			for i := range many {
				many[i] = fmt.Sprintf("idp:engineering:team-%03d", i)
			}
			status, c, e = invokeAs(t, url, sign(t, k, claims("alice@example.com", many...)))
			if status != http.StatusOK || len(c.Groups) != len(many) {
				t.Errorf("300 groups: %d %+v", status, e)
			}

			// Without a token the call is the outer middleware's, as
			// without verification.
			status, c, _ = invokeAs(t, url, "")
			if status != http.StatusOK || c.Subject != "alice" {
				t.Errorf("without a token: %d %+v, want alice", status, c)
			}
		})
	}
}

func TestTxnTokenRefusesWhatDoesNotVerify(t *testing.T) {
	is := newIssuer(t)
	k := newKey(t, "k1", jose.ES256)
	is.publish(k)
	url := txnServer(t, is, server.TxnTokenOptions{Issuer: "https://gateway.test"})

	forger := newKey(t, "k1", jose.ES256) // the listed kid, another key
	expired := claims("bob")
	expired.IssuedAt = jwt.NewNumericDate(time.Now().Add(-10 * time.Minute))
	expired.Expiry = jwt.NewNumericDate(time.Now().Add(-5 * time.Minute))
	otherAud := claims("bob")
	otherAud.Audience = jwt.Audience{"crm/other-tools"}
	otherIss := claims("bob")
	otherIss.Issuer = "https://evil.test"
	noExp := claims("bob")
	noExp.Expiry = nil
	noSub := claims("")
	valid := sign(t, k, claims("bob"))
	parts := strings.Split(valid, ".")
	tampered := claims("admin")
	tamperedPayload, _ := json.Marshal(tampered)
	hmac, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte("0123456789abcdef0123456789abcdef")},
		(&jose.SignerOptions{}).WithType(server.TxnTokenType).WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	hs, err := jwt.Signed(hmac).Claims(claims("bob")).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	unsignedHeader := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"txntoken+jwt","kid":"k1"}`))

	for _, tc := range []struct{ name, token, why string }{
		{"forged signature", sign(t, forger, claims("bob")), "signature"},
		{"tampered claims", parts[0] + "." + base64.RawURLEncoding.EncodeToString(tamperedPayload) + "." + parts[2], "signature"},
		{"expired", sign(t, k, expired), "expired"},
		{"wrong audience", sign(t, k, otherAud), "not issued for crm/crm-tools"},
		{"wrong issuer", sign(t, k, otherIss), "not issued by"},
		{"no exp", sign(t, k, noExp), "no exp"},
		{"no subject", sign(t, k, noSub), "no subject"},
		{"another typ", sign(t, k, claims("bob"), "JWT"), "typ"},
		{"HS256", hs, "ES256 or EdDSA"},
		{"alg none", unsignedHeader + "." + parts[1] + ".", "ES256 or EdDSA"},
		{"unknown kid", sign(t, newKey(t, "k9", jose.ES256), claims("bob")), "no key"},
		{"garbage", "not.a.jwt", "not a signed JWT"},
		{"huge", strings.Repeat("a", 33<<10), "over"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, c, e := invokeAs(t, url, tc.token)
			if status != http.StatusUnauthorized || e.Error.Code != server.CodeUnauthorized {
				t.Fatalf("invoke = %d %+v %+v, want 401 %s", status, c, e, server.CodeUnauthorized)
			}
			if !strings.Contains(e.Error.Message, tc.why) {
				t.Errorf("message %q does not say %q", e.Error.Message, tc.why)
			}
			if tc.token != "" && len(tc.token) > 20 && strings.Contains(e.Error.Message, tc.token[len(tc.token)-20:]) {
				t.Errorf("the refusal echoes the token: %q", e.Error.Message)
			}
		})
	}
	// The valid token still passes on the same server.
	if status, c, _ := invokeAs(t, url, valid); status != http.StatusOK || c.Subject != "bob" {
		t.Errorf("valid token: %d %+v", status, c)
	}
}

func TestTxnTokenClockSkewWithinLeeway(t *testing.T) {
	is := newIssuer(t)
	k := newKey(t, "k1", jose.EdDSA)
	is.publish(k)
	url := txnServer(t, is, server.TxnTokenOptions{Leeway: time.Minute})
	// Issued by a clock 30s ahead, expired 30s ago by ours: within a
	// minute's leeway both ways.
	c := claims("bob")
	c.IssuedAt = jwt.NewNumericDate(time.Now().Add(30 * time.Second))
	c.Expiry = jwt.NewNumericDate(time.Now().Add(-30 * time.Second))
	if status, _, e := invokeAs(t, url, sign(t, k, c)); status != http.StatusOK {
		t.Errorf("within the leeway: %d %+v", status, e)
	}
}

func TestTxnTokenRequired(t *testing.T) {
	is := newIssuer(t)
	k := newKey(t, "k1", jose.ES256)
	is.publish(k)
	url := txnServer(t, is, server.TxnTokenOptions{Required: true})
	status, _, e := invokeAs(t, url, "")
	if status != http.StatusUnauthorized || !strings.Contains(e.Error.Message, server.TxnTokenHeader) {
		t.Errorf("without a token: %d %+v, want 401", status, e)
	}
	if status, c, _ := invokeAs(t, url, sign(t, k, claims("bob"))); status != http.StatusOK || c.Subject != "bob" {
		t.Errorf("with a token: %d %+v", status, c)
	}
}

func TestTxnTokenKeyRotation(t *testing.T) {
	is := newIssuer(t)
	old, next := newKey(t, "old", jose.ES256), newKey(t, "new", jose.ES256)
	is.publish(old)
	url := txnServer(t, is, server.TxnTokenOptions{MinRefreshInterval: time.Nanosecond})
	if status, _, e := invokeAs(t, url, sign(t, old, claims("bob"))); status != http.StatusOK {
		t.Fatalf("old key: %d %+v", status, e)
	}
	// The issuer rotates: the new key is current, the old one previous.
	// A token of the new key makes the server fetch the keys again, and
	// a token of the old key, still in flight, is still accepted.
	is.publish(next, old)
	if status, _, e := invokeAs(t, url, sign(t, next, claims("bob"))); status != http.StatusOK {
		t.Fatalf("new key: %d %+v", status, e)
	}
	if status, _, e := invokeAs(t, url, sign(t, old, claims("bob"))); status != http.StatusOK {
		t.Fatalf("previous key: %d %+v", status, e)
	}
	// Then the old key is dropped; a verifier whose keys are older than
	// MaxAge fetches them again and refuses it.
	is.publish(next)
	v, err := server.NewTxnTokenVerifier(&server.TxnTokenOptions{JWKSURL: is.url(), Audience: testAudience, MaxAge: time.Nanosecond, MinRefreshInterval: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	is.publish(next, old)
	if _, err := v.Verify(bounded(t), sign(t, old, claims("bob"))); err != nil {
		t.Fatal(err)
	}
	is.publish(next)
	// The refresh runs in the background, while the key is still used.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := v.Verify(bounded(t), sign(t, old, claims("bob")))
		if errors.Is(err, server.ErrTxnToken) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dropped key is still accepted: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestTxnTokenUnknownKeysFetchTheJWKSAtMostOncePerInterval(t *testing.T) {
	is := newIssuer(t)
	k := newKey(t, "k1", jose.ES256)
	is.publish(k)
	url := txnServer(t, is, server.TxnTokenOptions{MinRefreshInterval: time.Hour})
	if status, _, _ := invokeAs(t, url, sign(t, k, claims("bob"))); status != http.StatusOK {
		t.Fatal(status)
	}
	// Tokens of made-up key ids, many at once: none of them verifies, and
	// none fetches the keys again within the interval.
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			tok := sign(t, newKey(t, "made-up-"+string(rune('a'+i%26)), jose.ES256), claims("bob"))
			if status, _, _ := invokeAs(t, url, tok); status != http.StatusUnauthorized {
				t.Errorf("made-up kid: %d", status)
			}
		})
	}
	wg.Wait()
	if n := is.fetches.Load(); n != 1 {
		t.Errorf("the JWKS was fetched %d times, want 1", n)
	}
}

func TestTxnTokenJWKSIsBounded(t *testing.T) {
	t.Run("huge body", func(t *testing.T) {
		is := newIssuer(t)
		k := newKey(t, "k1", jose.ES256)
		is.publish(k)
		set, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: k.priv.Public(), KeyID: "k1", Algorithm: "ES256"}}})
		// The real keys, then padding past the bound: refused whole.
		is.body = append(set[:len(set)-1], []byte(`,"pad":"`+strings.Repeat("x", 2<<20)+`"}`)...)
		url := txnServer(t, is, server.TxnTokenOptions{MaxJWKSBytes: 64 << 10})
		status, _, e := invokeAs(t, url, sign(t, k, claims("bob")))
		if status != http.StatusUnauthorized || !strings.Contains(e.Error.Message, "could not be fetched") {
			t.Errorf("huge JWKS: %d %+v, want 401", status, e)
		}
		// Why is the verifier's to say, not the caller's to hear.
		v, err := server.NewTxnTokenVerifier(&server.TxnTokenOptions{JWKSURL: is.url(), Audience: testAudience})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.Verify(bounded(t), sign(t, k, claims("bob"))); !errors.Is(err, server.ErrTxnToken) || !strings.Contains(err.Error(), "over 65536 bytes") {
			t.Errorf("Verify = %v, want it to say the JWKS is over the bound", err)
		}
	})
	t.Run("slow server", func(t *testing.T) {
		is := newIssuer(t)
		k := newKey(t, "k1", jose.ES256)
		is.publish(k)
		is.hang = make(chan struct{})
		url := txnServer(t, is, server.TxnTokenOptions{FetchTimeout: 200 * time.Millisecond})
		// The call ends, refused, at the fetch timeout: invokeAs's own
		// context would end it only after 10 seconds, failing the test.
		status, _, e := invokeAs(t, url, sign(t, k, claims("bob")))
		if status != http.StatusUnauthorized || !strings.Contains(e.Error.Message, "could not be fetched") {
			t.Errorf("slow JWKS: %d %+v, want 401", status, e)
		}
		if strings.Contains(e.Error.Message, is.srv.URL) {
			t.Errorf("the refusal names the JWKS URL: %s", e.Error.Message)
		}
	})
	t.Run("keys it cannot use", func(t *testing.T) {
		is := newIssuer(t)
		k := newKey(t, "k1", jose.ES256)
		// A symmetric key and a private key under the token's kid: neither
		// is a public signature key, so neither is used.
		priv, _ := json.Marshal(jose.JSONWebKey{Key: k.priv, KeyID: "k1", Algorithm: "ES256"})
		is.body = []byte(`{"keys":[{"kty":"oct","kid":"k1","k":"MDEyMzQ1Njc4OWFiY2RlZg"},` + string(priv) + `]}`)
		url := txnServer(t, is, server.TxnTokenOptions{})
		if status, _, _ := invokeAs(t, url, sign(t, k, claims("bob"))); status != http.StatusUnauthorized {
			t.Errorf("unusable keys: %d, want 401", status)
		}
	})
}

func TestTxnTokenOnMCP(t *testing.T) {
	is := newIssuer(t)
	k := newKey(t, "k1", jose.ES256)
	is.publish(k)
	url := txnServer(t, is, server.TxnTokenOptions{})
	expired := claims("bob")
	expired.IssuedAt = jwt.NewNumericDate(time.Now().Add(-10 * time.Minute))
	expired.Expiry = jwt.NewNumericDate(time.Now().Add(-5 * time.Minute))
	for _, version := range protocolVersions {
		t.Run(version, func(t *testing.T) {
			cs := connect(t, url, version, nil, server.TxnTokenHeader, sign(t, k, claims("bob", "team-crm")))
			res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "caller", Arguments: map[string]any{}})
			if err != nil || res.IsError {
				t.Fatalf("call: %v %+v", err, res)
			}
			b, _ := json.Marshal(res.StructuredContent)
			var c callerOut
			if err := json.Unmarshal(b, &c); err != nil {
				t.Fatal(err)
			}
			if c.Subject != "bob" || strings.Join(c.Groups, ",") != "team-crm" {
				t.Errorf("caller = %+v", c)
			}

			bad := connect(t, url, version, nil, server.TxnTokenHeader, sign(t, k, expired))
			_, err = bad.CallTool(bounded(t), &mcp.CallToolParams{Name: "caller", Arguments: map[string]any{}})
			var rpcErr *jsonrpc.Error
			if !errors.As(err, &rpcErr) || rpcErr.Code != server.CodeTxnTokenInvalid || !strings.Contains(rpcErr.Message, "expired") {
				t.Errorf("expired token: %v, want JSON-RPC error %d", err, server.CodeTxnTokenInvalid)
			}
		})
	}
}

func TestTxnTokenOptionsAreChecked(t *testing.T) {
	for _, o := range []*server.TxnTokenOptions{
		{Audience: testAudience},
		{JWKSURL: "http://127.0.0.1:1/jwks.json"},
		{JWKSURL: "http://127.0.0.1:1/jwks.json", Audience: testAudience, Leeway: -time.Second},
	} {
		if _, err := server.NewHandler(new(toolkit.Registry), &server.Options{TxnToken: o}); !errors.Is(err, server.ErrInvalidOptions) {
			t.Errorf("%+v: %v, want ErrInvalidOptions", o, err)
		}
	}
}

// BenchmarkTxnTokenVerify is the cost of verifying one token with its key
// cached, for ES256 and EdDSA, and of the bare Ed25519 verification of
// the same token's signature (crypto/ed25519), the floor of the EdDSA
// figure, in the same run:
//
//	go test -run '^$' -bench BenchmarkTxnTokenVerify ./server/
func BenchmarkTxnTokenVerify(b *testing.B) {
	b.Run("ed25519.Verify", func(b *testing.B) {
		k := newKey(b, "k1", jose.EdDSA)
		tok := sign(b, k, claims("system:serviceaccount:crm:agent", "system:serviceaccounts", "system:authenticated"))
		i := strings.LastIndexByte(tok, '.')
		sig, err := base64.RawURLEncoding.DecodeString(tok[i+1:])
		if err != nil {
			b.Fatal(err)
		}
		pub := k.priv.Public().(ed25519.PublicKey)
		msg := []byte(tok[:i])
		b.ReportAllocs()
		for b.Loop() {
			if !ed25519.Verify(pub, msg, sig) {
				b.Fatal("does not verify")
			}
		}
	})
	for _, alg := range []jose.SignatureAlgorithm{jose.ES256, jose.EdDSA} {
		b.Run(string(alg), func(b *testing.B) {
			is := newIssuer(b)
			k := newKey(b, "k1", alg)
			is.publish(k)
			v, err := server.NewTxnTokenVerifier(&server.TxnTokenOptions{JWKSURL: is.url(), Audience: testAudience})
			if err != nil {
				b.Fatal(err)
			}
			tok := sign(b, k, claims("system:serviceaccount:crm:agent", "system:serviceaccounts", "system:authenticated"))
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(ctx, tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// knownHeaderVerifier is a verifier of testAudience and issuer
// https://gateway.test with the keys of is fetched, and is's keys: one of
// EdDSA, of a kid that go-jose escapes in JSON, and one of ES256.
func knownHeaderVerifier(t testing.TB) (*server.TxnTokenVerifier, []signingKey) {
	is := newIssuer(t)
	keys := []signingKey{newKey(t, `k<1>&"é`, jose.EdDSA), newKey(t, "k2", jose.ES256)}
	is.publish(keys...)
	v, err := server.NewTxnTokenVerifier(&server.TxnTokenOptions{JWKSURL: is.url(), Audience: testAudience, Issuer: "https://gateway.test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(context.Background(), sign(t, keys[0], claims("bob"))); err != nil {
		t.Fatal(err)
	}
	return v, keys
}

// The tokens go-jose signs, as the gateway's are, take the path that does
// not parse their header; a token whose header is written otherwise takes
// go-jose's, and is accepted all the same.
func TestTxnTokenKnownHeader(t *testing.T) {
	v, keys := knownHeaderVerifier(t)
	for _, k := range keys {
		tok := sign(t, k, claims("bob", "team-crm"))
		c, err, ok := server.VerifyKnownHeader(v, tok)
		if !ok || err != nil || c.Subject != "bob" || strings.Join(c.Groups, ",") != "team-crm" || c.RequestID != "req-1" {
			t.Errorf("%s: %+v %v %v, want bob by the known header", k.alg, c, err, ok)
		}
		parts := strings.Split(tok, ".")
		// The same header with its members in another order: go-jose's
		// path, which accepts it.
		kid, _ := json.Marshal(k.kid)
		other := base64.RawURLEncoding.EncodeToString([]byte(`{"typ":"txntoken+jwt","alg":"` + string(k.alg) + `","kid":` + string(kid) + `}`))
		tok = other + "." + parts[1] + "." + signRaw(t, k, other+"."+parts[1])
		if _, _, ok := server.VerifyKnownHeader(v, tok); ok {
			t.Errorf("%s: a header of another encoding took the known-header path", k.alg)
		}
		if c, err := v.Verify(context.Background(), tok); err != nil || c.Subject != "bob" {
			t.Errorf("%s: %+v %v, want bob by go-jose", k.alg, c, err)
		}
	}
	// The header of one key with the signature of the other: refused.
	tok := sign(t, keys[0], claims("bob"))
	parts := strings.Split(tok, ".")
	forged := parts[0] + "." + parts[1] + "." + signRaw(t, keys[1], parts[0]+"."+parts[1])
	if _, err, ok := server.VerifyKnownHeader(v, forged); !ok || !errors.Is(err, server.ErrTxnToken) {
		t.Errorf("another key's signature: %v %v, want refused", err, ok)
	}
}

// signRaw is the base64url JWS signature of input by k.
func signRaw(t testing.TB, k signingKey, input string) string {
	t.Helper()
	switch priv := k.priv.(type) {
	case ed25519.PrivateKey:
		return base64.RawURLEncoding.EncodeToString(ed25519.Sign(priv, []byte(input)))
	case *ecdsa.PrivateKey:
		h := sha256.Sum256([]byte(input))
		r, s, err := ecdsa.Sign(rand.Reader, priv, h[:])
		if err != nil {
			t.Fatal(err)
		}
		sig := make([]byte, 64)
		r.FillBytes(sig[:32])
		s.FillBytes(sig[32:])
		return base64.RawURLEncoding.EncodeToString(sig)
	}
	t.Fatalf("a %T", k.priv)
	return ""
}

// FuzzTxnTokenKnownHeader signs any payload under a known header, then
// perhaps changes a byte of the token, re-encodes its payload segment
// non-canonically, or breaks a line in it: whatever the known-header path
// accepts, go-jose accepts too, with the same caller, and whatever it
// refuses go-jose refuses.
//
//	go test -run '^$' -fuzz FuzzTxnTokenKnownHeader -fuzztime 30s ./server/
func FuzzTxnTokenKnownHeader(f *testing.F) {
	now := time.Now().Unix()
	valid := fmt.Sprintf(`{"iss":"https://gateway.test","sub":"bob","aud":"%s","iat":%d,"exp":%d,"txn":"r1","groups":["a","b"]}`, testAudience, now, now+60)
	for _, p := range []string{
		valid,
		fmt.Sprintf(`{"sub":"bob","aud":["x","%s"],"iat":%d,"exp":%d,"iss":"https://gateway.test"}`, testAudience, now, now+60),
		fmt.Sprintf(`{"SUB":"bob","sub":"eve","aud":"%s","iat":%d,"exp":%d,"iss":"https://gateway.test"}`, testAudience, now, now+60),
		fmt.Sprintf(`{"sub":"bob","sub":"eve","aud":"%s","iat":%d,"exp":%d,"iss":"https://gateway.test"}`, testAudience, now, now+60),
		fmt.Sprintf(`{"sub":"bob","aud":"%s","iat":%d,"exp":%d,"iss":"https://gateway.test","groups":"a"}`, testAudience, now, now+60),
		fmt.Sprintf(`{"sub":"bob","aud":"%s","iat":%d.5,"exp":%d,"iss":"https://gateway.test"}`, testAudience, now, now+60),
		fmt.Sprintf(`{"sub":"bob","aud":"%s","iat":%d,"exp":%d}`, testAudience, now, now-600),
		`{"sub":"bob"}`, `[]`, `null`, ``, `{"sub":"\u0000"}`,
	} {
		for mode := range uint8(4) {
			f.Add([]byte(p), false, mode, uint16(0), byte('A'))
			f.Add([]byte(p), true, mode, uint16(30), byte('.'))
		}
	}
	v, keys := knownHeaderVerifier(f)
	headers := make([]string, len(keys))
	for i, k := range keys {
		headers[i] = strings.Split(sign(f, k, claims("bob")), ".")[0]
	}
	f.Fuzz(func(t *testing.T, payload []byte, es256 bool, mode uint8, pos uint16, b byte) {
		i := 0
		if es256 {
			i = 1
		}
		seg := base64.RawURLEncoding.EncodeToString(payload)
		tok := headers[i] + "." + seg + "." + signRaw(t, keys[i], headers[i]+"."+seg)
		switch mode % 4 {
		case 1: // one byte changed
			bs := []byte(tok)
			bs[int(pos)%len(bs)] = b
			tok = string(bs)
		case 2: // the payload's last character with other trailing bits, signed so
			if len(seg)%4 != 0 {
				last := strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", seg[len(seg)-1])
				seg = seg[:len(seg)-1] + string("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[(last+1+int(b)%3)%64])
			}
			tok = headers[i] + "." + seg + "." + signRaw(t, keys[i], headers[i]+"."+seg)
		case 3: // a line break in the payload, signed so
			at := int(pos) % (len(seg) + 1)
			seg = seg[:at] + "\n" + seg[at:]
			tok = headers[i] + "." + seg + "." + signRaw(t, keys[i], headers[i]+"."+seg)
		}
		fc, ferr, ok := server.VerifyKnownHeader(v, tok)
		if !ok {
			return
		}
		jc, jerr := server.VerifyJOSE(context.Background(), v, tok)
		switch {
		case ferr == nil && jerr != nil:
			t.Fatalf("the known-header path accepts %q (%+v), go-jose refuses it: %v", tok, fc, jerr)
		case ferr != nil && jerr == nil:
			t.Fatalf("the known-header path refuses %q (%v), go-jose accepts it: %+v", tok, ferr, jc)
		case ferr == nil && (fc.Subject != jc.Subject || fc.RequestID != jc.RequestID || !slices.Equal(fc.Groups, jc.Groups)):
			t.Fatalf("%q: the known-header path names %+v, go-jose %+v", tok, fc, jc)
		case ferr != nil && ferr.Error() != jerr.Error():
			t.Fatalf("%q: the known-header path says %v, go-jose %v", tok, ferr, jerr)
		}
	})
}
