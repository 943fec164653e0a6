package gateway

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	josejwt "github.com/go-jose/go-jose/v4/jwt"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	apiserver "k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/apis/apiserver/install"
	apiservervalidation "k8s.io/apiserver/pkg/apis/apiserver/validation"
	authenticationcel "k8s.io/apiserver/pkg/authentication/cel"
	"k8s.io/apiserver/plugin/pkg/authenticator/token/oidc"
	certutil "k8s.io/client-go/util/cert"

	"github.com/toolplane/toolplane/internal/ttlcache"
)

// AuthModeOIDC is [Caller.AuthMode] of a caller whose JWT an issuer of
// the [AuthenticationConfiguration] signed; "kubernetes" is that of a
// caller the API server reviewed.
const AuthModeOIDC = "oidc"

// authConfigScheme decodes AuthenticationConfiguration files as
// kube-apiserver's --authentication-config does: every served version of
// apiserver.config.k8s.io (v1, v1beta1, v1alpha1), strictly, so that a
// misspelt field is an error rather than a claim mapping silently
// dropped.
var (
	authConfigScheme = runtime.NewScheme()
	authConfigCodecs = serializer.NewCodecFactory(authConfigScheme, serializer.EnableStrict)
)

func init() { install.Install(authConfigScheme) }

// LoadAuthenticationConfiguration reads and validates the
// apiserver.config.k8s.io AuthenticationConfiguration in file, the very
// file kube-apiserver's --authentication-config takes: jwt[] with each
// issuer's url, audiences and certificateAuthority, its claimMappings
// (username and groups with their prefixes, uid, extra) and its
// claimValidationRules and userValidationRules. It is validated by the API
// server's own rules, CEL expressions compiled; anonymous, which has no
// meaning for the gateway, is refused, and so is a file with no jwt.
func LoadAuthenticationConfiguration(file string) (*apiserver.AuthenticationConfiguration, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading the authentication configuration: %w", err)
	}
	return ParseAuthenticationConfiguration(data)
}

// ParseAuthenticationConfiguration is [LoadAuthenticationConfiguration]
// of a file's content.
func ParseAuthenticationConfiguration(data []byte) (*apiserver.AuthenticationConfiguration, error) {
	if len(data) == 0 {
		return nil, errors.New("the authentication configuration is empty")
	}
	obj, gvk, err := authConfigCodecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("decoding the authentication configuration: %w", err)
	}
	cfg, ok := obj.(*apiserver.AuthenticationConfiguration)
	if !ok {
		return nil, fmt.Errorf("the authentication configuration is a %v, not an AuthenticationConfiguration", gvk)
	}
	if cfg.Anonymous != nil {
		return nil, errors.New("the authentication configuration sets anonymous, which the gateway does not serve: a caller without a token is refused")
	}
	if len(cfg.JWT) == 0 {
		return nil, errors.New("the authentication configuration has no jwt authenticator")
	}
	if errs := apiservervalidation.ValidateAuthenticationConfiguration(authenticationcel.NewDefaultCompiler(), cfg, nil); len(errs) > 0 {
		return nil, fmt.Errorf("the authentication configuration is not valid: %w", errs.ToAggregate())
	}
	return cfg, nil
}

// JWTAuthenticator authenticates the JWTs of the issuers of an
// AuthenticationConfiguration with the API server's own JWT authenticator
// (k8s.io/apiserver's oidc plugin, which kube-apiserver builds from the
// same file): discovery and keys from each issuer (trusting its
// certificateAuthority), signature, expiry, audiences, claim mappings
// with their prefixes, claim and user validation rules. A token maps to
// the user, uid, groups and extra the API server itself would give it, so
// a RoleBinding means the same to the gateway as to kubectl.
type JWTAuthenticator struct {
	authenticators []oidc.AuthenticatorTokenWithHealthCheck
	issuers        []string
}

// NewJWTAuthenticator builds the authenticators of cfg, each fetching its
// issuer's discovery document and keys in the background until ctx ends
// (a token of an issuer not reached yet is refused): the gateway starts
// whether or not its IdP answers.
func NewJWTAuthenticator(ctx context.Context, cfg *apiserver.AuthenticationConfiguration) (*JWTAuthenticator, error) {
	j := &JWTAuthenticator{}
	compiler := authenticationcel.NewDefaultCompiler()
	for _, a := range cfg.JWT {
		client, err := issuerClient(a.Issuer.CertificateAuthority)
		if err != nil {
			return nil, fmt.Errorf("the certificateAuthority of issuer %s: %w", a.Issuer.URL, err)
		}
		authn, err := oidc.New(ctx, oidc.Options{
			JWTAuthenticator: a,
			Compiler:         compiler,
			// As kube-apiserver with an --authentication-config: every
			// asymmetric algorithm, never none or an HMAC.
			SupportedSigningAlgs: oidc.AllValidSigningAlgorithms(),
			Client:               client,
		})
		if err != nil {
			return nil, fmt.Errorf("the authenticator of issuer %s: %w", a.Issuer.URL, err)
		}
		j.authenticators = append(j.authenticators, authn)
		j.issuers = append(j.issuers, a.Issuer.URL)
	}
	return j, nil
}

// Bounds of the requests to an issuer (its discovery document and keys).
const (
	// issuerFetchEvery and issuerFetchBurst bound how often the gateway
	// asks an issuer for its keys. The JWT authenticator (go-oidc) asks
	// again whenever a token fails the keys it holds and the issuer sent
	// no Cache-Control, so every forged token that names the issuer would
	// be a request to the IdP; a newly rotated key is still learnt within
	// issuerFetchEvery however many forged tokens arrive.
	issuerFetchEvery = 10 * time.Second
	issuerFetchBurst = 2
	// issuerTimeout bounds one request, as kube-apiserver's client does.
	issuerTimeout = 30 * time.Second
	// maxIssuerResponseBytes bounds a discovery document or a key set,
	// which go-oidc reads whole.
	maxIssuerResponseBytes = 1 << 20
)

// errIssuerFetchLimited is what a request to an issuer over its rate
// gets: the token that caused it is refused.
var errIssuerFetchLimited = errors.New("gateway: too many requests to the issuer; retry later")

// issuerClient is the HTTP client of one issuer's authenticator: the
// issuer's CA (PEM) if given, else the host's roots, and the bounds of
// issuerTransport. It stands in for the client kube-apiserver builds from
// certificateAuthority, which has no such bounds.
func issuerClient(caPEM string) (*http.Client, error) {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if caPEM != "" {
		roots, err := certutil.NewPoolFromBytes([]byte(caPEM))
		if err != nil {
			return nil, err
		}
		tlsConfig.RootCAs = roots
	}
	tr := utilnet.SetTransportDefaults(&http.Transport{TLSClientConfig: tlsConfig})
	return &http.Client{
		Transport: &issuerTransport{next: tr, limit: rate.NewLimiter(rate.Every(issuerFetchEvery), issuerFetchBurst)},
		Timeout:   issuerTimeout,
	}, nil
}

// issuerTransport sends at most one request per issuerFetchEvery (after a
// burst), refusing the others at once, and bounds each response's body
// to maxIssuerResponseBytes: a larger one is cut short, so it fails to
// decode.
type issuerTransport struct {
	next  http.RoundTripper
	limit *rate.Limiter
}

func (t *issuerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if !t.limit.Allow() {
		return nil, errIssuerFetchLimited
	}
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.LimitReader(resp.Body, maxIssuerResponseBytes), resp.Body}
	return resp, nil
}

// Issuers returns the issuer URLs, in the order of the configuration.
func (j *JWTAuthenticator) Issuers() []string { return append([]string(nil), j.issuers...) }

// Healthy returns nil once every issuer's discovery document is read, else the first
// issuer's reason.
func (j *JWTAuthenticator) Healthy() error {
	for _, a := range j.authenticators {
		if err := a.HealthCheck(); err != nil {
			return err
		}
	}
	return nil
}

// Authenticate authenticates token as a JWT of one of the issuers. mine
// is false if its (unverified) iss claim names none of them, or it is no
// JWT at all: then it is no business of this authenticator, and err is
// nil. A token that names an issuer is that issuer's to accept or refuse:
// if refused, err wraps [ErrUnauthenticated], and no other authenticator
// is asked, as kube-apiserver's union of JWT authenticators does.
func (j *JWTAuthenticator) Authenticate(ctx context.Context, token string) (c *Caller, mine bool, err error) {
	for _, a := range j.authenticators {
		resp, ok, err := a.AuthenticateToken(ctx, token)
		if err != nil {
			return nil, true, fmt.Errorf("%w: %w", ErrUnauthenticated, err)
		}
		if !ok {
			continue
		}
		u := resp.User
		c := &Caller{User: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups(), AuthMode: AuthModeOIDC}
		if extra := u.GetExtra(); len(extra) > 0 {
			c.Extra = make(map[string][]string, len(extra))
			for k, v := range extra {
				c.Extra[k] = v
			}
		}
		return c, true, nil
	}
	return nil, false, nil
}

// OIDCAuth is [Auth] for callers who present the JWTs of an identity
// provider (--auth=oidc), and optionally ServiceAccount tokens too
// (--auth=kubernetes,oidc). Either way a caller is authorized by
// Kubernetes' SubjectAccessReview of its mapped user and groups, exactly
// as [KubernetesAuth] authorizes a ServiceAccount: a RoleBinding to a
// person (oidc:alice@example.com) or to an IdP group (oidc:sre) grants
// call on toolplane.io/tools.
//
// Which authenticator a token goes to is decided by its iss claim alone:
// a token naming an issuer of JWT is that issuer's, accepted or refused by
// it and never sent on; any other token goes to the API server's
// TokenReview if Review is set, else is refused. So a person's IdP token
// never leaves the gateway, even when it is expired or meant for another
// audience (a TokenReview would hand it to the API server, and to every
// webhook authenticator behind it, for nothing), while every token the API
// server accepts (ServiceAccount tokens, whatever its own authenticators
// take) still works in the mixed mode, as it does with --auth=kubernetes.
// The issuers must therefore not include the cluster's ServiceAccount
// issuer, whose tokens would then be refused for lacking the configured
// audience and claims.
//
// An accepted JWT's caller is kept by the token's SHA-256 for Kubernetes'
// TTL, but never past the token's exp; a refused one is not kept.
type OIDCAuth struct {
	// JWT authenticates the tokens of the configured issuers. Required.
	JWT *JWTAuthenticator
	// Kubernetes authorizes every caller, and authenticates the tokens of
	// no issuer of JWT when Review is set. Required.
	Kubernetes *KubernetesAuth
	// Review sends the tokens that no issuer of JWT claims to
	// Kubernetes' TokenReview (--auth=kubernetes,oidc). False refuses
	// them (--auth=oidc).
	Review bool
	// Logger, if set, logs why a token was refused, at debug level: the
	// caller is told no more than that its token is invalid.
	Logger *slog.Logger

	once sync.Once
	// tokens keeps the callers of accepted JWTs by the token's SHA-256,
	// for Kubernetes' TTL and never past the token's exp: a refused token
	// is not kept, so forged ones cannot fill it.
	tokens *ttlcache.Cache[[32]byte, *Caller]
}

// Authenticate implements [Authenticator].
func (a *OIDCAuth) Authenticate(ctx context.Context, token string) (*Caller, error) {
	if len(token) > maxTokenBytes {
		return nil, fmt.Errorf("%w: a token of more than %d bytes", ErrUnauthenticated, maxTokenBytes)
	}
	a.once.Do(func() {
		n := a.Kubernetes.MaxEntries
		if n <= 0 {
			n = DefaultAuthCacheEntries
		}
		a.tokens = ttlcache.New[[32]byte, *Caller](max(100, n/10))
	})
	key := sha256.Sum256([]byte(token))
	if c, ok := a.tokens.Get(key); ok {
		return c, nil
	}
	c, mine, err := a.JWT.Authenticate(ctx, token)
	switch {
	case mine && err != nil:
		if a.Logger != nil {
			a.Logger.Debug("Refused a token", "reason", err)
		}
		return nil, fmt.Errorf("%w: token refused by its issuer", ErrUnauthenticated)
	case mine:
		if ttl := min(a.Kubernetes.DecisionTTL(), time.Until(expiry(token))); ttl > 0 {
			a.tokens.Put(key, c, ttl)
		}
		return c, nil
	case a.Review:
		return a.Kubernetes.Authenticate(ctx, token)
	default:
		return nil, fmt.Errorf("%w: the token is not a JWT of a configured issuer", ErrUnauthenticated)
	}
}

// expiry is the exp of a JWT the JWT authenticator has accepted (so whose
// signature and exp it has checked, which is why reading it unverified
// here is sound), or the zero time, which caches nothing.
func expiry(token string) time.Time {
	t, err := josejwt.ParseSigned(token, jwtAlgorithms)
	if err != nil {
		return time.Time{}
	}
	var c josejwt.Claims
	if err := t.UnsafeClaimsWithoutVerification(&c); err != nil || c.Expiry == nil {
		return time.Time{}
	}
	return c.Expiry.Time()
}

// jwtAlgorithms are the algorithms of oidc.AllValidSigningAlgorithms, for
// parsing the tokens it accepted.
var jwtAlgorithms = func() []jose.SignatureAlgorithm {
	var out []jose.SignatureAlgorithm
	for _, a := range oidc.AllValidSigningAlgorithms() {
		out = append(out, jose.SignatureAlgorithm(a))
	}
	return out
}()

// Allowed implements [Authorizer] with the SubjectAccessReview of
// Kubernetes.
func (a *OIDCAuth) Allowed(ctx context.Context, c *Caller, namespace, name string) (bool, error) {
	return a.Kubernetes.Allowed(ctx, c, namespace, name)
}

// Cached implements [DecisionCache] with the decisions of Kubernetes.
func (a *OIDCAuth) Cached(callerKey, namespace, name string) (allowed, ok bool) {
	return a.Kubernetes.Cached(callerKey, namespace, name)
}

// DecisionTTL implements [DecisionCache].
func (a *OIDCAuth) DecisionTTL() time.Duration { return a.Kubernetes.DecisionTTL() }
