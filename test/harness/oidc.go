package harness

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// OIDCClient is a confidential client of an [OpenIDProvider], which gets
// its tokens with the client_credentials grant: the token's subject is
// its ID, its aud the Audience, its groups claim the Groups.
type OIDCClient struct {
	ID, Secret string
	Audience   []string
	Groups     []string
	// Lifetime is how long its tokens are valid; negative issues tokens
	// that expired that long ago. Zero means five minutes.
	Lifetime time.Duration
}

// OpenIDProvider is a real OpenID Provider on loopback HTTPS: zitadel/oidc's
// certified op package, with the in-memory storage of its example server
// and the clients given to [StartOpenIDProvider]. Its discovery document,
// keys and token endpoint are the ones a relying party would use against
// any IdP.
type OpenIDProvider struct {
	// Issuer is its issuer URL (https://127.0.0.1:port).
	Issuer string
	// CA is the PEM of the certificate its server presents, for the
	// certificateAuthority of an AuthenticationConfiguration.
	CA []byte
	// CAFile holds CA, for clients that read a file (NODE_EXTRA_CA_CERTS).
	CAFile string

	srv      *httptest.Server
	requests sync.Map // path → *atomic.Int64
}

// KeysPath is the path of the provider's JWKS (its discovery document's
// jwks_uri).
const KeysPath = "/keys"

// Requests returns how many requests the provider has had for path.
func (p *OpenIDProvider) Requests(path string) int64 {
	if n, ok := p.requests.Load(path); ok {
		return n.(*atomic.Int64).Load()
	}
	return 0
}

// StartOpenIDProvider starts an OpenID Provider for clients, its CA
// written in dir.
func StartOpenIDProvider(dir string, clients ...OIDCClient) (*OpenIDProvider, error) {
	var handler atomic.Pointer[http.Handler]
	p := &OpenIDProvider{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := p.requests.LoadOrStore(r.URL.Path, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		(*handler.Load()).ServeHTTP(w, r)
	}))
	srv.StartTLS()
	p.Issuer, p.srv = srv.URL, srv
	p.CA = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	f, err := os.CreateTemp(dir, "oidc-ca-*.pem")
	if err != nil {
		srv.Close()
		return nil, err
	}
	p.CAFile = filepath.Clean(f.Name())
	_, err = f.Write(p.CA)
	if err = errors.Join(err, f.Close()); err != nil {
		srv.Close()
		return nil, err
	}

	st := &opStorage{Storage: storage.NewStorage(storage.NewUserStore(p.Issuer)), clients: map[string]OIDCClient{}}
	for _, c := range clients {
		st.clients[c.ID] = c
	}
	provider, err := op.NewProvider(&op.Config{CryptoKey: sha256.Sum256([]byte(p.Issuer)), CodeMethodS256: true},
		st, op.StaticIssuer(p.Issuer))
	if err != nil {
		srv.Close()
		return nil, err
	}
	h := http.Handler(provider)
	handler.Store(&h)
	return p, nil
}

// HTTPClient returns a client that trusts the provider's certificate.
func (p *OpenIDProvider) HTTPClient() *http.Client { return p.srv.Client() }

// AuthenticationConfiguration is an apiserver.config.k8s.io
// AuthenticationConfiguration trusting p (its CA inline) for audience,
// mapping sub and groups with the prefix "oidc:", as a cluster admin
// would; extra, if any, is YAML appended to the issuer's entry (say,
// claimValidationRules), indented by two spaces.
func (p *OpenIDProvider) AuthenticationConfiguration(audience, extra string) string {
	var ca strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(string(p.CA)), "\n") {
		ca.WriteString("        " + l + "\n")
	}
	return fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: %s
    audiences: [%s]
    certificateAuthority: |
%s  claimMappings:
    username:
      claim: sub
      prefix: "oidc:"
    groups:
      claim: groups
      prefix: "oidc:"
%s`, p.Issuer, audience, ca.String(), extra)
}

// Token gets an access token for a client with the client_credentials
// grant (client_secret_basic), at the token endpoint of the provider's
// discovery document. It reads the response as any client would, but for
// expires_in: the provider writes a token that expired already (a
// negative Lifetime) with an expires_in that is no number a strict client
// accepts.
func (p *OpenIDProvider) Token(ctx context.Context, id, secret string) (string, error) {
	var d oidc.DiscoveryConfiguration
	if err := p.getJSON(ctx, http.MethodGet, p.Issuer+oidc.DiscoveryEndpoint, nil, nil, &d); err != nil {
		return "", fmt.Errorf("reading the discovery document: %w", err)
	}
	form := url.Values{"grant_type": {"client_credentials"}, "scope": {"openid"}}
	var tok struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
	}
	err := p.getJSON(ctx, http.MethodPost, d.TokenEndpoint, strings.NewReader(form.Encode()), func(r *http.Request) {
		r.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}, &tok)
	if err != nil {
		return "", fmt.Errorf("the token endpoint: %w", err)
	}
	if tok.AccessToken == "" || !strings.EqualFold(tok.TokenType, "bearer") {
		return "", fmt.Errorf("the token endpoint gave no bearer token (type %q)", tok.TokenType)
	}
	return tok.AccessToken, nil
}

func (p *OpenIDProvider) getJSON(ctx context.Context, method, u string, body io.Reader, mod func(*http.Request), v any) error {
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return err
	}
	if mod != nil {
		mod(req)
	}
	resp, err := p.HTTPClient().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, b)
	}
	return json.Unmarshal(b, v)
}

// Close stops the provider.
func (p *OpenIDProvider) Close() {
	p.srv.Close()
	_ = os.Remove(p.CAFile)
}

// opStorage is the example server's storage with the clients of the test:
// JWT access tokens for the client_credentials grant, with their groups.
type opStorage struct {
	*storage.Storage
	clients map[string]OIDCClient
}

func (s *opStorage) ClientCredentials(_ context.Context, id, secret string) (op.Client, error) {
	c, ok := s.clients[id]
	if !ok || c.Secret != secret {
		return nil, errors.New("wrong client id or secret")
	}
	return &opClient{id: id}, nil
}

func (s *opStorage) ClientCredentialsTokenRequest(_ context.Context, id string, scopes []string) (op.TokenRequest, error) {
	c, ok := s.clients[id]
	if !ok {
		return nil, errors.New("unknown client")
	}
	return &oidc.JWTTokenRequest{Subject: id, Audience: c.Audience, Scopes: scopes}, nil
}

func (s *opStorage) CreateAccessToken(ctx context.Context, req op.TokenRequest) (string, time.Time, error) {
	id, exp, err := s.Storage.CreateAccessToken(ctx, req)
	if c, ok := s.clients[req.GetSubject()]; ok && c.Lifetime != 0 {
		exp = time.Now().Add(c.Lifetime)
	}
	return id, exp, err
}

func (s *opStorage) GetPrivateClaimsFromScopes(_ context.Context, userID, _ string, _ []string) (map[string]any, error) {
	if c, ok := s.clients[userID]; ok && len(c.Groups) > 0 {
		return map[string]any{"groups": c.Groups}, nil
	}
	return nil, nil
}

// opClient is a confidential client of the client_credentials grant only,
// whose access tokens are JWTs.
type opClient struct{ id string }

func (c *opClient) GetID() string                       { return c.id }
func (c *opClient) RedirectURIs() []string              { return nil }
func (c *opClient) PostLogoutRedirectURIs() []string    { return nil }
func (c *opClient) ApplicationType() op.ApplicationType { return op.ApplicationTypeWeb }
func (c *opClient) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodBasic }
func (c *opClient) ResponseTypes() []oidc.ResponseType  { return nil }
func (c *opClient) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeClientCredentials}
}
func (c *opClient) LoginURL(string) string               { return "" }
func (c *opClient) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeJWT }
func (c *opClient) IDTokenLifetime() time.Duration       { return 5 * time.Minute }
func (c *opClient) DevMode() bool                        { return false }
func (c *opClient) IsScopeAllowed(string) bool           { return true }
func (c *opClient) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c *opClient) ClockSkew() time.Duration             { return 0 }
func (c *opClient) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *opClient) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
