package gateway_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/test/harness"
)

// authConfig is an AuthenticationConfiguration trusting op for audience,
// with the prefixes a cluster admin would choose and a claim rule.
func authConfig(op *harness.OpenIDProvider, audience string) string {
	return op.AuthenticationConfiguration(audience, `  claimValidationRules:
  - expression: "claims.sub != 'banned'"
    message: banned
`)
}

func startOP(t *testing.T, clients ...harness.OIDCClient) *harness.OpenIDProvider {
	t.Helper()
	op, err := harness.StartOpenIDProvider(t.TempDir(), clients...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(op.Close)
	return op
}

func opToken(t *testing.T, op *harness.OpenIDProvider, id string) string {
	t.Helper()
	tok, err := op.Token(context.Background(), id, id+"-secret")
	if err != nil {
		t.Fatalf("a token for %s: %v", id, err)
	}
	return tok
}

// TestJWTAuthenticator checks the API server's JWT authenticator as the
// gateway builds it, against a real OpenID Provider and the tokens it
// issues through the client_credentials grant.
func TestJWTAuthenticator(t *testing.T) {
	const aud = "toolplane-gateway"
	client := func(id string, mod func(*harness.OIDCClient)) harness.OIDCClient {
		c := harness.OIDCClient{ID: id, Secret: id + "-secret", Audience: []string{aud}, Groups: []string{"sre"}}
		if mod != nil {
			mod(&c)
		}
		return c
	}
	op := startOP(t,
		client("alice", nil),
		client("other-audience", func(c *harness.OIDCClient) { c.Audience = []string{"another-resource"} }),
		client("expired", func(c *harness.OIDCClient) { c.Lifetime = -time.Hour }),
		client("banned", nil),
	)
	stranger := startOP(t, client("alice", nil)) // another issuer, same client

	cfg, err := gateway.ParseAuthenticationConfiguration([]byte(authConfig(op, aud)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	j, err := gateway.NewJWTAuthenticator(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The issuer's discovery document and keys are fetched in the
	// background, at once and every 10 s after a failure.
	deadline := time.Now().Add(30 * time.Second)
	for j.Healthy() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the authenticator never became healthy: %v", j.Healthy())
		}
		time.Sleep(50 * time.Millisecond)
	}

	good := opToken(t, op, "alice")
	c, mine, err := j.Authenticate(ctx, good)
	if err != nil || !mine {
		t.Fatalf("a good token: mine %v, %v", mine, err)
	}
	if c.User != "oidc:alice" || strings.Join(c.Groups, ",") != "oidc:sre" || c.AuthMode != gateway.AuthModeOIDC {
		t.Errorf("a good token maps to %+v, want user oidc:alice, groups [oidc:sre], auth mode oidc", c)
	}
	if c.Extra[gateway.CredentialIDKey] == nil {
		t.Errorf("the token's jti is not its credential id: extra %v", c.Extra)
	}

	sig := strings.LastIndexByte(good, '.')
	forged := good[:sig+1] + strings.Map(func(r rune) rune {
		if r == 'A' {
			return 'B'
		}
		return 'A'
	}, good[sig+1:])
	// Tokens the attacker signs itself, naming the issuer: with no
	// algorithm, and with HS256 keyed by something it knows.
	claims := fmt.Sprintf(`{"iss":%q,"aud":%q,"sub":"mallory","groups":["sre"],"exp":%d}`, op.Issuer, aud, time.Now().Add(time.Hour).Unix())
	b64 := base64.RawURLEncoding.EncodeToString
	unsigned := b64([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + b64([]byte(claims)) + "."
	hmacSigner, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: op.CA}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs, err := hmacSigner.Sign([]byte(claims))
	if err != nil {
		t.Fatal(err)
	}
	hmac, err := hs.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]string{
		"alg none":             unsigned,
		"alg HS256":            hmac,
		"another audience":     opToken(t, op, "other-audience"),
		"an expired token":     opToken(t, op, "expired"),
		"a bad signature":      forged,
		"a claim rule refuses": opToken(t, op, "banned"),
	} {
		_, mine, err := j.Authenticate(ctx, tok)
		if !mine || !errors.Is(err, gateway.ErrUnauthenticated) {
			t.Errorf("%s: mine %v, err %v; want the issuer's refusal", name, mine, err)
		}
	}
	for name, tok := range map[string]string{
		"another issuer": opToken(t, stranger, "alice"),
		"no JWT":         "not-a-token",
	} {
		if _, mine, err := j.Authenticate(ctx, tok); mine || err != nil {
			t.Errorf("%s: mine %v, err %v; want it left to others", name, mine, err)
		}
	}

	// --auth=oidc refuses what no issuer claims; it never reaches a
	// TokenReview (Kubernetes has no client: a review would panic).
	a := &gateway.OIDCAuth{JWT: j, Kubernetes: &gateway.KubernetesAuth{}}
	if _, err := a.Authenticate(ctx, opToken(t, stranger, "alice")); !errors.Is(err, gateway.ErrUnauthenticated) {
		t.Errorf("another issuer's token under --auth=oidc: %v, want ErrUnauthenticated", err)
	}
	a.Review = true // and with kubernetes,oidc, a refused IdP token is not reviewed either
	if _, err := a.Authenticate(ctx, forged); !errors.Is(err, gateway.ErrUnauthenticated) {
		t.Errorf("a forged IdP token under kubernetes,oidc: %v, want ErrUnauthenticated", err)
	}
}

func TestParseAuthenticationConfiguration(t *testing.T) {
	base := `apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: https://idp.example.com
    audiences: [toolplane-gateway]
  claimMappings:
    username: {claim: sub, prefix: "oidc:"}
`
	if _, err := gateway.ParseAuthenticationConfiguration([]byte(base)); err != nil {
		t.Fatalf("a valid configuration: %v", err)
	}
	for name, cfg := range map[string]string{
		"empty":              "",
		"no jwt":             "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\n",
		"a misspelt field":   strings.Replace(base, "audiences", "audience", 1),
		"an http issuer":     strings.Replace(base, "https://idp", "http://idp", 1),
		"no prefix":          strings.Replace(base, `, prefix: "oidc:"`, "", 1),
		"a bad expression":   base + "  claimValidationRules:\n  - expression: \"claims.sub ==\"\n",
		"anonymous":          base + "anonymous:\n  enabled: true\n",
		"another kind":       strings.Replace(base, "AuthenticationConfiguration", "AuthorizationConfiguration", 1),
		"a duplicate issuer": base + strings.SplitN(base, "jwt:\n", 2)[1],
	} {
		if _, err := gateway.ParseAuthenticationConfiguration([]byte(cfg)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// refusingAuth accepts the token "good" only, and answers "down" with an
// error that is not the token's fault.
type refusingAuth struct{}

func (refusingAuth) Authenticate(_ context.Context, token string) (*gateway.Caller, error) {
	switch token {
	case "good":
		return &gateway.Caller{User: "good"}, nil
	case "down":
		return nil, errors.New("the API server is down")
	}
	return nil, fmt.Errorf("%w: not good", gateway.ErrUnauthenticated)
}

func (refusingAuth) Allowed(context.Context, *gateway.Caller, string, string) (bool, error) {
	return true, nil
}

func TestProtectedResourceMetadata(t *testing.T) {
	pr := &gateway.ProtectedResource{URL: "https://tools.example.com", AuthorizationServers: []string{"https://idp.example.com"}, Scopes: []string{"openid", "groups"}}
	g, base := newGateway(t, nil, gateway.Options{Auth: refusingAuth{}, ProtectedResource: pr})
	if err := g.SetTable(table()); err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var md map[string]any
		if resp.StatusCode == http.StatusOK {
			if err := json.NewDecoder(resp.Body).Decode(&md); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode, md
	}
	for path, resource := range map[string]string{
		"":                            "https://tools.example.com",
		"/mcp":                        "https://tools.example.com/mcp",
		"/mcp/search":                 "https://tools.example.com/mcp/search",
		"/mcp/namespaces/crm":         "https://tools.example.com/mcp/namespaces/crm",
		"/mcp/namespaces/crm/search":  "https://tools.example.com/mcp/namespaces/crm/search",
		"/mcp/toolsets/crm/crm-tools": "https://tools.example.com/mcp/toolsets/crm/crm-tools",
		"/v1/tools":                   "https://tools.example.com/v1/tools",
	} {
		code, md := get(gateway.ResourceMetadataPath + path)
		if code != http.StatusOK {
			t.Errorf("the metadata of %q: %d", path, code)
			continue
		}
		want := map[string]any{"resource": resource, "authorization_servers": []any{"https://idp.example.com"},
			"bearer_methods_supported": []any{"header"}, "scopes_supported": []any{"openid", "groups"}}
		for k, v := range want {
			if fmt.Sprint(md[k]) != fmt.Sprint(v) {
				t.Errorf("the metadata of %q: %s is %v, want %v", path, k, md[k], v)
			}
		}
	}
	for _, path := range []string{"/nope", "/mcp/namespaces/a/b/c", gateway.ResourceMetadataPath, "/healthz"} {
		if code, _ := get(gateway.ResourceMetadataPath + path); code != http.StatusNotFound {
			t.Errorf("the metadata of %q, which is no endpoint: %d, want 404", path, code)
		}
	}

	post := func(path, token string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, c := range []struct{ path, token, want string }{
		{"/mcp", "", `Bearer resource_metadata="https://tools.example.com/.well-known/oauth-protected-resource/mcp", scope="openid groups"`},
		{"/mcp", "forged", `Bearer resource_metadata="https://tools.example.com/.well-known/oauth-protected-resource/mcp", scope="openid groups", error="invalid_token"`},
		{"/mcp/search", "forged", `Bearer resource_metadata="https://tools.example.com/.well-known/oauth-protected-resource/mcp/search", scope="openid groups", error="invalid_token"`},
		{"/v1/tools", "", `Bearer resource_metadata="https://tools.example.com/.well-known/oauth-protected-resource/v1/tools", scope="openid groups"`},
	} {
		resp := post(c.path, c.token)
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != c.want {
			t.Errorf("POST %s with token %q: %d, WWW-Authenticate %q; want 401, %q", c.path, c.token, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), c.want)
		}
	}
	if resp := post("/mcp", "good"); resp.StatusCode != http.StatusOK {
		t.Errorf("a good token: %d", resp.StatusCode)
	}
	if resp := post("/mcp", "down"); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a token that cannot be checked now: %d, Retry-After %q; want 503 to retry", resp.StatusCode, resp.Header.Get("Retry-After"))
	}

	// Without a ProtectedResource: a bare challenge, and no metadata.
	_, plain := newGateway(t, nil, gateway.Options{Auth: refusingAuth{}})
	resp, err := http.Post(plain+"/mcp", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != "Bearer" {
		t.Errorf("no ProtectedResource: %d, WWW-Authenticate %q; want 401, Bearer", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	if resp, err := http.Get(plain + gateway.ResourceMetadataPath + "/mcp"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("no ProtectedResource, yet metadata: %v %v", resp.StatusCode, err)
	}
}

func TestCheckURL(t *testing.T) {
	for u, ok := range map[string]bool{
		"https://tools.example.com": true, "https://tools.example.com/": true, "http://127.0.0.1:8080": true,
		"https://tools.example.com/toolplane": false, "ftp://x": false, "https://": false, "https://x?a=b": false, "https://u@x": false,
	} {
		if err := gateway.CheckURL(u); (err == nil) != ok {
			t.Errorf("CheckURL(%q) = %v", u, err)
		}
	}
}

// TestJWTAuthenticatorBoundsKeyFetches: a token that names a configured
// issuer but fails its signature makes the API server's JWT authenticator
// fetch the issuer's keys again (go-oidc, when the issuer sends no
// Cache-Control). Anyone who reaches the gateway can send such tokens: they
// must not become as many requests to the IdP.
func TestJWTAuthenticatorBoundsKeyFetches(t *testing.T) {
	const aud = "toolplane-gateway"
	op := startOP(t, harness.OIDCClient{ID: "alice", Secret: "alice-secret", Audience: []string{aud}})
	cfg, err := gateway.ParseAuthenticationConfiguration([]byte(authConfig(op, aud)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	j, err := gateway.NewJWTAuthenticator(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	good := opToken(t, op, "alice")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, _, err := j.Authenticate(ctx, good); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the authenticator never accepted a good token")
		}
		time.Sleep(50 * time.Millisecond)
	}
	before := op.Requests(harness.KeysPath)
	sig := strings.LastIndexByte(good, '.')
	const forged = 200
	for i := range forged {
		tok := good[:sig+1] + fmt.Sprintf("%08d", i) + good[sig+9:]
		if _, mine, err := j.Authenticate(ctx, tok); !mine || err == nil {
			t.Fatalf("a forged token: mine %v, err %v", mine, err)
		}
	}
	if n := op.Requests(harness.KeysPath) - before; n > 3 {
		t.Errorf("%d forged tokens made %d key fetches from the IdP, want at most 3", forged, n)
	}
	if _, _, err := j.Authenticate(ctx, good); err != nil {
		t.Errorf("a good token after the forged ones: %v", err)
	}
}

// BenchmarkOIDCAuthenticate is what an IdP token costs a request:
// "verified" the first time (the API server's JWT authenticator checks
// its signature, RS256, expiry, audience and claim rule, and maps its
// claims), "cached" on the requests after, until the decision TTL or its
// exp.
func BenchmarkOIDCAuthenticate(b *testing.B) {
	const aud = "toolplane-gateway"
	op, err := harness.StartOpenIDProvider(b.TempDir(), harness.OIDCClient{ID: "alice", Secret: "alice-secret", Audience: []string{aud}, Groups: []string{"sre"}})
	if err != nil {
		b.Fatal(err)
	}
	defer op.Close()
	cfg, err := gateway.ParseAuthenticationConfiguration([]byte(authConfig(op, aud)))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	j, err := gateway.NewJWTAuthenticator(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	a := &gateway.OIDCAuth{JWT: j, Kubernetes: &gateway.KubernetesAuth{}}
	tok, err := op.Token(ctx, "alice", "alice-secret")
	if err != nil {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := a.Authenticate(ctx, tok); err == nil {
			break
		} else if time.Now().After(deadline) {
			b.Fatal(err)
		}
	}
	b.Run("verified", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			fresh := &gateway.OIDCAuth{JWT: j, Kubernetes: a.Kubernetes}
			if _, err := fresh.Authenticate(ctx, tok); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := a.Authenticate(ctx, tok); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestOIDCAuthKeepsNoTokenPastItsExpiry: an accepted token is kept for
// the decision TTL (a minute here), but never past its own exp.
func TestOIDCAuthKeepsNoTokenPastItsExpiry(t *testing.T) {
	const aud = "toolplane-gateway"
	op := startOP(t, harness.OIDCClient{ID: "brief", Secret: "brief-secret", Audience: []string{aud}, Lifetime: 2 * time.Second})
	cfg, err := gateway.ParseAuthenticationConfiguration([]byte(authConfig(op, aud)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	j, err := gateway.NewJWTAuthenticator(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	a := &gateway.OIDCAuth{JWT: j, Kubernetes: &gateway.KubernetesAuth{TTL: time.Minute}}
	for deadline := time.Now().Add(30 * time.Second); j.Healthy() != nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal(j.Healthy())
		}
	}
	tok := opToken(t, op, "brief")
	issued := time.Now()
	if _, err := a.Authenticate(ctx, tok); err != nil {
		t.Fatalf("a fresh token: %v", err)
	}
	if _, err := a.Authenticate(ctx, tok); err != nil {
		t.Fatalf("the same token again: %v", err)
	}
	// Its exp is at most 2 s after it was issued (in whole seconds).
	time.Sleep(time.Until(issued.Add(3 * time.Second)))
	if _, err := a.Authenticate(ctx, tok); !errors.Is(err, gateway.ErrUnauthenticated) {
		t.Errorf("the token after its exp: %v, want ErrUnauthenticated", err)
	}
}
