package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"
	josejson "github.com/go-jose/go-jose/v4/json"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/toolplane/toolplane/toolkit"
)

// TxnTokenHeader is the HTTP header that carries a transaction token, as
// the IETF OAuth Transaction Tokens draft names it. The toolplane gateway
// sends one with every call it routes under authentication.
const TxnTokenHeader = "Txn-Token"

// TxnTokenType is the JOSE typ header of a transaction token.
const TxnTokenType = "txntoken+jwt"

// Defaults of the zero fields of [TxnTokenOptions].
const (
	// DefaultTxnTokenLeeway is the clock skew allowed between the token's
	// issuer and this server, on exp and iat.
	DefaultTxnTokenLeeway = 30 * time.Second
	// DefaultJWKSFetchTimeout bounds one fetch of the JWKS.
	DefaultJWKSFetchTimeout = 5 * time.Second
	// DefaultMaxJWKSBytes bounds the JWKS document: 64 KiB holds hundreds
	// of keys, and a real issuer publishes two or three.
	DefaultMaxJWKSBytes = 64 << 10
	// DefaultJWKSMinRefreshInterval is the least time between two fetches
	// of the JWKS, so that tokens with made-up key ids cannot make this
	// server fetch it on every call.
	DefaultJWKSMinRefreshInterval = 10 * time.Second
	// DefaultJWKSMaxAge is how long fetched keys are used before they are
	// fetched again (in the background, while they go on being used), so
	// that a key the issuer dropped stops being accepted.
	DefaultJWKSMaxAge = 5 * time.Minute
)

// maxTxnTokenBytes bounds a Txn-Token header: the gateway's are about 1
// KiB, more for a caller of many groups (an OIDC user's, from a token the
// gateway takes up to 16 KiB of), and parsing a larger one is work a
// caller should not cause.
const maxTxnTokenBytes = 32 << 10

// ErrTxnToken is matched by the error of [TxnTokenVerifier.Verify] for a
// token that is not valid: malformed, of the wrong type, signed by a key
// the JWKS does not list, forged, expired, or for another audience or
// issuer. Calls that carry such a token are refused: 401 on the invoke
// endpoint, a JSON-RPC error ([CodeTxnTokenInvalid]) on MCP.
var ErrTxnToken = errors.New("server: invalid transaction token")

// ErrTxnTokenRequired is matched by the refusal of a call without a
// transaction token when [TxnTokenOptions.Required] is set.
var ErrTxnTokenRequired = errors.New("server: a transaction token is required")

// CodeUnauthorized is the invoke endpoint's error code for a call refused
// for its transaction token (401).
const CodeUnauthorized = "unauthorized"

// CodeTxnTokenInvalid is the JSON-RPC error code of an MCP tools/call
// refused for its transaction token: in the range JSON-RPC leaves to
// servers.
const CodeTxnTokenInvalid = -32001

// TxnTokenOptions turn on the verification of transaction tokens, the
// short-lived JWTs that the toolplane gateway signs for every call it
// routes, naming the caller it authenticated: see [Options.TxnToken].
type TxnTokenOptions struct {
	// JWKSURL is where the issuer's public keys are served, such as
	// http://toolplane-gateway.toolplane-system.svc/.well-known/jwks.json.
	// Required. The keys are fetched on the first call that carries a
	// token, again when a token names a key id they do not hold (at most
	// once per MinRefreshInterval), and in the background every MaxAge.
	JWKSURL string
	// Audience is the audience a token must be issued for. The gateway
	// issues each token for the ToolSet that owns the tool called,
	// "<namespace>/<name>": a token for one ToolSet's workload is refused
	// by every other. Required.
	Audience string
	// Issuer, if set, is the iss a token must carry: the gateway's public
	// URL.
	Issuer string
	// Required refuses calls that carry no token. Without it such a call
	// is anonymous: its [toolkit.Caller] has no Subject (unless an outer
	// middleware set one), and a tool that needs a caller refuses it
	// itself. A call with a token that is not valid is refused either way.
	Required bool
	// Leeway is the clock skew allowed on exp and iat. Zero means
	// [DefaultTxnTokenLeeway].
	Leeway time.Duration
	// HTTPClient fetches the JWKS. Nil means a client of its own that
	// follows no redirect. Each fetch is bounded by FetchTimeout and
	// MaxJWKSBytes whatever the client.
	HTTPClient *http.Client
	// FetchTimeout bounds one fetch of the JWKS; a call that waits for
	// one waits no longer. Zero means [DefaultJWKSFetchTimeout].
	FetchTimeout time.Duration
	// MaxJWKSBytes bounds the JWKS document; a larger one is refused and
	// the keys held are kept. Zero means [DefaultMaxJWKSBytes].
	MaxJWKSBytes int64
	// MinRefreshInterval is the least time between two fetches of the
	// JWKS. Zero means [DefaultJWKSMinRefreshInterval].
	MinRefreshInterval time.Duration
	// MaxAge is how long fetched keys are used before they are fetched
	// again, in the background. Zero means [DefaultJWKSMaxAge].
	MaxAge time.Duration
}

// TxnTokenVerifier verifies transaction tokens against an issuer's JWKS,
// which it fetches, bounded in time and size, and caches. [Handler] and
// [AddTools] build one from [TxnTokenOptions]; build one yourself to
// verify tokens in a transport of your own. It is safe for concurrent use.
type TxnTokenVerifier struct {
	o      TxnTokenOptions
	client *http.Client
	now    func() time.Time

	keys atomic.Pointer[keySet]

	mu          sync.Mutex
	inflight    chan struct{} // closed when the fetch in flight ends; nil if none
	lastAttempt time.Time
	lastErr     error
}

// keySet is one fetch of the JWKS: its usable keys by key id.
type keySet struct {
	byID map[string]jose.JSONWebKey
	// byHeader holds the same keys by the protected header that the
	// gateway signs each one's tokens with, base64url-encoded: see
	// [TxnTokenVerifier.verifyKnownHeader].
	byHeader map[string]knownKey
	fetched  time.Time
}

// knownKey is a public key of the JWKS, for the tokens whose protected
// header is the one the gateway writes for it.
type knownKey struct {
	ed ed25519.PublicKey // EdDSA
	ec *ecdsa.PublicKey  // ES256
}

// NewTxnTokenVerifier returns a verifier for o, or an error wrapping
// [ErrInvalidOptions] when o lacks JWKSURL or Audience or has a negative
// bound. It fetches nothing yet.
func NewTxnTokenVerifier(o *TxnTokenOptions) (*TxnTokenVerifier, error) {
	if o == nil || o.JWKSURL == "" || o.Audience == "" {
		return nil, fmt.Errorf("%w: TxnToken needs a JWKSURL and an Audience", ErrInvalidOptions)
	}
	v := &TxnTokenVerifier{o: *o, now: time.Now}
	if v.o.Leeway < 0 || v.o.FetchTimeout < 0 || v.o.MaxJWKSBytes < 0 || v.o.MinRefreshInterval < 0 || v.o.MaxAge < 0 {
		return nil, fmt.Errorf("%w: TxnToken's durations and sizes must not be negative", ErrInvalidOptions)
	}
	if v.o.Leeway == 0 {
		v.o.Leeway = DefaultTxnTokenLeeway
	}
	if v.o.FetchTimeout == 0 {
		v.o.FetchTimeout = DefaultJWKSFetchTimeout
	}
	if v.o.MaxJWKSBytes == 0 {
		v.o.MaxJWKSBytes = DefaultMaxJWKSBytes
	}
	if v.o.MinRefreshInterval == 0 {
		v.o.MinRefreshInterval = DefaultJWKSMinRefreshInterval
	}
	if v.o.MaxAge == 0 {
		v.o.MaxAge = DefaultJWKSMaxAge
	}
	v.client = v.o.HTTPClient
	if v.client == nil {
		v.client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	return v, nil
}

// txnClaims are the claims of a transaction token that a verifier reads,
// beyond the registered ones.
type txnClaims struct {
	Txn    string   `json:"txn"`
	Groups []string `json:"groups"`
}

// Verify verifies raw, a transaction token, and returns the caller it
// names: Subject from sub, Groups from groups, RequestID from txn. A token
// that is not valid gives an error wrapping [ErrTxnToken] that says why
// (never the token). Verify fetches the JWKS only when its cache holds no
// key of the token's key id, at most once per MinRefreshInterval.
func (v *TxnTokenVerifier) Verify(ctx context.Context, raw string) (toolkit.Caller, error) {
	if len(raw) > maxTxnTokenBytes {
		return toolkit.Caller{}, fmt.Errorf("%w: over %d bytes", ErrTxnToken, maxTxnTokenBytes)
	}
	if c, err, ok := v.verifyKnownHeader(raw); ok {
		return c, err
	}
	return v.verifyJOSE(ctx, raw)
}

// verifyJOSE is [TxnTokenVerifier.Verify] by go-jose: any compact JWS of
// ES256 or EdDSA, whatever its header's encoding.
func (v *TxnTokenVerifier) verifyJOSE(ctx context.Context, raw string) (toolkit.Caller, error) {
	tok, err := jwt.ParseSigned(raw, []jose.SignatureAlgorithm{jose.ES256, jose.EdDSA})
	if err != nil {
		return toolkit.Caller{}, fmt.Errorf("%w: not a signed JWT of ES256 or EdDSA", ErrTxnToken)
	}
	h := tok.Headers[0]
	if typ, _ := h.ExtraHeaders[jose.HeaderType].(string); !strings.EqualFold(typ, TxnTokenType) {
		return toolkit.Caller{}, fmt.Errorf("%w: its typ is not %s", ErrTxnToken, TxnTokenType)
	}
	key, err := v.key(ctx, h.KeyID)
	if err != nil {
		return toolkit.Caller{}, err
	}
	if key.Algorithm != "" && key.Algorithm != h.Algorithm {
		return toolkit.Caller{}, fmt.Errorf("%w: its key is for %s, not %s", ErrTxnToken, key.Algorithm, h.Algorithm)
	}
	// One decoding of the payload for the registered claims and ours.
	var claims tokenClaims
	if err := tok.Claims(key.Key, &claims); err != nil {
		return toolkit.Caller{}, fmt.Errorf("%w: its signature does not verify", ErrTxnToken)
	}
	return v.check(&claims)
}

// tokenClaims are the claims a verifier decodes, once.
type tokenClaims struct {
	jwt.Claims
	txnClaims
}

// check checks the verified claims of a token, and returns the caller they
// name.
func (v *TxnTokenVerifier) check(claims *tokenClaims) (toolkit.Caller, error) {
	std := &claims.Claims
	if std.Expiry == nil || std.IssuedAt == nil {
		return toolkit.Caller{}, fmt.Errorf("%w: it has no exp or iat", ErrTxnToken)
	}
	exp := jwt.Expected{Issuer: v.o.Issuer, AnyAudience: jwt.Audience{v.o.Audience}, Time: v.now()}
	if err := std.ValidateWithLeeway(exp, v.o.Leeway); err != nil {
		switch {
		case errors.Is(err, jwt.ErrExpired):
			return toolkit.Caller{}, fmt.Errorf("%w: it has expired", ErrTxnToken)
		case errors.Is(err, jwt.ErrInvalidAudience):
			return toolkit.Caller{}, fmt.Errorf("%w: it is not issued for %s", ErrTxnToken, v.o.Audience)
		case errors.Is(err, jwt.ErrInvalidIssuer):
			return toolkit.Caller{}, fmt.Errorf("%w: it is not issued by %s", ErrTxnToken, v.o.Issuer)
		default:
			return toolkit.Caller{}, fmt.Errorf("%w: %w", ErrTxnToken, err)
		}
	}
	if std.Subject == "" {
		return toolkit.Caller{}, fmt.Errorf("%w: it names no subject", ErrTxnToken)
	}
	return toolkit.Caller{Subject: std.Subject, Groups: claims.Groups, RequestID: claims.Txn}, nil
}

// verifyKnownHeader verifies raw without parsing its header when that
// header is, byte for byte, the one the gateway signs with for a key of the
// JWKS held: {"alg":…,"kid":…,"typ":"txntoken+jwt"}, the alg the key's
// own (EdDSA for Ed25519, ES256 for P-256), encoded as go-jose encodes it.
// Such a token can name no other algorithm, key or type, so what is left
// is what go-jose does after parsing: the signature over the header and
// payload segments, then the claims, decoded by go-jose's own JSON
// package (case-sensitive, duplicate keys refused) and checked by
// [TxnTokenVerifier.check]. ok is false, and raw is left to
// [TxnTokenVerifier.verifyJOSE], for any other header, and for payload or
// signature segments that are not base64url in their one canonical form
// (go-jose verifies the canonical encoding of what it decoded, which such
// segments are not). It accepts nothing that verifyJOSE refuses: see
// FuzzTxnTokenKnownHeader.
func (v *TxnTokenVerifier) verifyKnownHeader(raw string) (c toolkit.Caller, err error, ok bool) {
	ks := v.keys.Load()
	if ks == nil {
		return c, nil, false
	}
	head, rest, _ := strings.Cut(raw, ".")
	k, found := ks.byHeader[head]
	if !found {
		return c, nil, false
	}
	payloadSeg, sigSeg, found := strings.Cut(rest, ".")
	if !found || !isBase64URL(payloadSeg) || !isBase64URL(sigSeg) {
		return c, nil, false
	}
	var sig [2 * 32]byte // both algorithms' signatures are 64 bytes
	if base64.RawURLEncoding.EncodedLen(len(sig)) != len(sigSeg) {
		return c, nil, false
	}
	if _, err := base64.RawURLEncoding.Strict().Decode(sig[:], []byte(sigSeg)); err != nil {
		return c, nil, false
	}
	payload, err := base64.RawURLEncoding.Strict().DecodeString(payloadSeg)
	if err != nil {
		return c, nil, false
	}
	if v.now().Sub(ks.fetched) > v.o.MaxAge {
		v.refresh()
	}
	signed := []byte(raw[:len(head)+1+len(payloadSeg)])
	switch {
	case k.ed != nil:
		ok = ed25519.Verify(k.ed, signed, sig[:])
	case k.ec != nil:
		// As go-jose verifies ES256: r and s, 32 bytes each, big-endian.
		h := sha256.Sum256(signed)
		ok = ecdsa.Verify(k.ec, h[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:]))
	}
	if !ok {
		return c, fmt.Errorf("%w: its signature does not verify", ErrTxnToken), true
	}
	var claims tokenClaims
	if err := josejson.Unmarshal(payload, &claims); err != nil {
		return c, fmt.Errorf("%w: its signature does not verify", ErrTxnToken), true
	}
	c, err = v.check(&claims)
	return c, err, true
}

// isBase64URL reports whether s holds only the base64url alphabet, which
// leaves out the line breaks a base64 decoder skips.
func isBase64URL(s string) bool {
	for i := 0; i < len(s); i++ {
		switch b := s[i]; {
		case 'A' <= b && b <= 'Z', 'a' <= b && b <= 'z', '0' <= b && b <= '9', b == '-', b == '_':
		default:
			return false
		}
	}
	return true
}

// knownHeader is the base64url protected header the gateway signs k's
// tokens with, and k's verifier; ok is false for a key whose JWK names an
// algorithm its type does not sign with (go-jose refuses its tokens).
func knownHeader(k jose.JSONWebKey) (string, knownKey, bool) {
	var (
		alg jose.SignatureAlgorithm
		kk  knownKey
	)
	switch pub := k.Key.(type) {
	case ed25519.PublicKey:
		alg, kk.ed = jose.EdDSA, pub
	case *ecdsa.PublicKey:
		alg, kk.ec = jose.ES256, pub
	default:
		return "", kk, false
	}
	if k.Algorithm != "" && k.Algorithm != string(alg) {
		return "", kk, false
	}
	// go-jose writes the protected header as a JSON object of sorted
	// keys, with its own JSON package.
	b, err := josejson.Marshal(map[string]string{"alg": string(alg), "kid": k.KeyID, "typ": TxnTokenType})
	if err != nil {
		return "", kk, false
	}
	return base64.RawURLEncoding.EncodeToString(b), kk, true
}

// key returns the key of id: from the cache, or after a fetch of the JWKS
// if the cache has none (and a fetch is allowed), starting a background
// fetch when the cache is older than MaxAge.
func (v *TxnTokenVerifier) key(ctx context.Context, id string) (jose.JSONWebKey, error) {
	if id == "" {
		return jose.JSONWebKey{}, fmt.Errorf("%w: it names no key id", ErrTxnToken)
	}
	if ks := v.keys.Load(); ks != nil {
		if k, ok := ks.byID[id]; ok {
			if v.now().Sub(ks.fetched) > v.o.MaxAge {
				v.refresh()
			}
			return k, nil
		}
	}
	if done := v.refresh(); done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			return jose.JSONWebKey{}, fmt.Errorf("waiting for the JWKS: %w", ctx.Err())
		}
	}
	if ks := v.keys.Load(); ks != nil {
		if k, ok := ks.byID[id]; ok {
			return k, nil
		}
	}
	v.mu.Lock()
	lastErr := v.lastErr
	v.mu.Unlock()
	if lastErr != nil {
		return jose.JSONWebKey{}, &jwksError{id: clipID(id), err: lastErr}
	}
	return jose.JSONWebKey{}, fmt.Errorf("%w: the JWKS lists no key %s", ErrTxnToken, clipID(id))
}

// refresh starts a fetch of the JWKS unless one is in flight or the last
// began less than MinRefreshInterval ago, and returns a channel closed when
// the fetch in flight (new or not) ends; nil if there is none.
func (v *TxnTokenVerifier) refresh() <-chan struct{} {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.inflight != nil {
		return v.inflight
	}
	now := v.now()
	if !v.lastAttempt.IsZero() && now.Sub(v.lastAttempt) < v.o.MinRefreshInterval {
		return nil
	}
	v.lastAttempt = now
	done := make(chan struct{})
	v.inflight = done
	// The fetch is shared by every call waiting for it, so it runs on a
	// context of its own: a caller that goes away does not end it.
	go func() {
		ks, err := v.fetch()
		v.mu.Lock()
		if err == nil {
			v.keys.Store(ks)
		}
		v.lastErr = err
		v.inflight = nil
		v.mu.Unlock()
		close(done)
	}()
	return done
}

// fetch gets and parses the JWKS, within FetchTimeout and MaxJWKSBytes.
func (v *TxnTokenVerifier) fetch() (*keySet, error) {
	ctx, cancel := context.WithTimeout(context.Background(), v.o.FetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.o.JWKSURL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s answered %d", v.o.JWKSURL, resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, v.o.MaxJWKSBytes+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > v.o.MaxJWKSBytes {
		return nil, fmt.Errorf("the JWKS is over %d bytes", v.o.MaxJWKSBytes)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("the JWKS is not a JWK set: %w", err)
	}
	ks := &keySet{byID: map[string]jose.JSONWebKey{}, byHeader: map[string]knownKey{}, fetched: v.now()}
	for _, k := range set.Keys {
		if k.KeyID == "" || !k.IsPublic() || (k.Use != "" && k.Use != "sig") || !usableKey(k.Key) {
			continue
		}
		ks.byID[k.KeyID] = k
	}
	// After the loop, so that a kid listed twice has the key byID has.
	for _, k := range ks.byID {
		if h, kk, ok := knownHeader(k); ok {
			ks.byHeader[h] = kk
		}
	}
	return ks, nil
}

// usableKey reports whether k is a public key of ES256 (P-256) or EdDSA
// (Ed25519), the algorithms a token may be signed with.
func usableKey(k any) bool {
	switch k := k.(type) {
	case *ecdsa.PublicKey:
		return k.Curve == elliptic.P256()
	case ed25519.PublicKey:
		return len(k) == ed25519.PublicKeySize
	}
	return false
}

func clipID(id string) string {
	if len(id) > 64 {
		id = id[:64] + "…"
	}
	return fmt.Sprintf("%q", id)
}

// verifyCall verifies the transaction token of a call's header, if v is
// set, and returns ctx carrying the caller it names. A call without a
// token passes unchanged, unless v requires one.
func (v *TxnTokenVerifier) verifyCall(ctx context.Context, header http.Header) (context.Context, error) {
	if v == nil {
		return ctx, nil
	}
	raw := header.Get(TxnTokenHeader)
	if raw == "" {
		if v.o.Required {
			return ctx, ErrTxnTokenRequired
		}
		return ctx, nil
	}
	if len(header.Values(TxnTokenHeader)) > 1 {
		return ctx, fmt.Errorf("%w: more than one %s header", ErrTxnToken, TxnTokenHeader)
	}
	c, err := v.Verify(ctx, raw)
	if err != nil {
		return ctx, err
	}
	// The verified identity replaces whatever an outer layer set: only the
	// token speaks for the caller. Scopes are not the token's to give.
	prev, _ := toolkit.CallerFrom(ctx)
	c.Header = prev.Header
	return toolkit.WithCaller(ctx, c), nil
}

// jwksError is a token refused because the JWKS, which does not hold its
// key, could not be fetched: the caller is told so, the log why.
type jwksError struct {
	id  string
	err error
}

func (e *jwksError) Error() string {
	return fmt.Sprintf("%s: no key %s is known, and the JWKS could not be fetched: %v", ErrTxnToken, e.id, e.err)
}

func (e *jwksError) Unwrap() []error { return []error{ErrTxnToken, e.err} }

// logRefusal logs a refusal that is the server's trouble rather than the
// caller's: the JWKS could not be fetched, or the wait for it ended.
func logRefusal(logger *slog.Logger, err error) {
	var je *jwksError
	if errors.As(err, &je) || !errors.Is(err, ErrTxnToken) && !errors.Is(err, ErrTxnTokenRequired) {
		logger.Warn("Refused a call: its transaction token could not be checked", "error", err)
	}
}

// txnRefusal is what a refused call is told: why its token was refused,
// never the token, and not the details of a failed JWKS fetch (which the
// log has).
func txnRefusal(err error) string {
	var je *jwksError
	if errors.As(err, &je) {
		return "the " + TxnTokenHeader + " header was refused: no key " + je.id + " is known, and the JWKS could not be fetched"
	}
	if errors.Is(err, ErrTxnTokenRequired) {
		return "this server takes only calls that carry a " + TxnTokenHeader + " header"
	}
	msg := err.Error()
	msg = strings.TrimPrefix(msg, ErrTxnToken.Error()+": ")
	return "the " + TxnTokenHeader + " header was refused: " + msg
}
