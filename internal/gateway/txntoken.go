package gateway

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolplane/toolplane/toolkit/server"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// JWKSPath serves the public keys of the gateway's transaction tokens.
const JWKSPath = "/.well-known/jwks.json"

// The files of a transaction-token key directory: the key that signs, and
// the one it replaced, which the JWKS still lists so that tokens it signed
// (and verifiers that have not fetched the new key yet) keep working.
const (
	CurrentKeyFile  = "current.key"
	PreviousKeyFile = "previous.key"
)

// Defaults of the zero fields of [TxnTokenOptions].
const (
	// DefaultTxnTokenLifetime is how long a transaction token is valid: a
	// call's token is minted as the call leaves, and used at once.
	DefaultTxnTokenLifetime = time.Minute
	// DefaultKeyPollInterval is how often the key files are read again.
	DefaultKeyPollInterval = 10 * time.Second
	// DefaultKeyActivationDelay is how long a new current key is published
	// before it signs: a mounted Secret reaches each replica at its own
	// time (the kubelet's sync period, about a minute, plus its cache), and
	// no token may be signed with a key that a replica's JWKS, which a
	// workload may fetch, does not list yet.
	DefaultKeyActivationDelay = 2 * time.Minute
)

// maxKeyFileBytes bounds a key file: a PEM or JWK private key is well under
// 1 KiB.
const maxKeyFileBytes = 64 << 10

// TxnTokenOptions configure [NewTxnTokens].
type TxnTokenOptions struct {
	// KeyDir holds the signing keys, as a mounted Secret does: current.key,
	// which signs, and optionally previous.key, the key it replaced. Each
	// is a PEM private key (SEC1 "EC PRIVATE KEY" or PKCS #8 "PRIVATE
	// KEY") or a JWK, of ECDSA P-256 (ES256) or Ed25519 (EdDSA). Required.
	KeyDir string
	// Issuer is the iss of every token: the gateway's public URL. Empty
	// leaves iss out.
	Issuer string
	// Lifetime is how long a token is valid. Zero means
	// [DefaultTxnTokenLifetime].
	Lifetime time.Duration
	// PollInterval is how often [TxnTokens.Run] reads the key files again.
	// Zero means [DefaultKeyPollInterval].
	PollInterval time.Duration
	// ActivationDelay is how long a new current key, seen while the key it
	// replaces still signs, is only published. Zero means
	// [DefaultKeyActivationDelay]; negative signs with it at once.
	ActivationDelay time.Duration
	// Logger receives reloads and the failures to reload. The default is
	// [slog.Default].
	Logger *slog.Logger
}

// TxnTokens mints the transaction tokens that the gateway sends with every
// call it routes for an authenticated caller, in the Txn-Token header, and
// serves their public keys at [JWKSPath]. A token follows the IETF OAuth
// Transaction Tokens draft (see docs/operations.md, "The caller at the
// tool", for where it departs): a JWT of typ txntoken+jwt, signed with the
// current key, whose aud is the owner ToolSet ("<namespace>/<name>"), sub
// the caller's user, groups its groups, txn a request id, tctx the tool,
// rctx how the caller authenticated and the trace id. It is safe for
// concurrent use.
type TxnTokens struct {
	o     TxnTokenOptions
	state atomic.Pointer[keyState]
	now   func() time.Time
	mu    sync.Mutex // held by Reload
	// files are the key files' bytes as last read, to tell a change.
	files [2][]byte
}

// keyState is one load of the key files.
type keyState struct {
	current, previous *txnKey // previous may be nil
	// signer signs until activeAt (zero: for ever), current from then on.
	signer   *txnKey
	activeAt time.Time
	jwks     []byte
}

type txnKey struct {
	kid    string
	alg    jose.SignatureAlgorithm
	public jose.JSONWebKey
	// header is the token's protected header, base64url-encoded, as
	// go-jose writes it for this key: it is the same for every token.
	header string
	ed     ed25519.PrivateKey // EdDSA
	ec     *ecdsa.PrivateKey  // ES256
}

// NewTxnTokens loads the keys of o.KeyDir. It fails if current.key is
// missing or not a key it can sign with.
func NewTxnTokens(o TxnTokenOptions) (*TxnTokens, error) {
	if o.KeyDir == "" {
		return nil, errors.New("transaction tokens need a key directory")
	}
	if o.Lifetime < 0 || o.PollInterval < 0 {
		return nil, errors.New("the transaction tokens' lifetime and poll interval must not be negative")
	}
	if o.Lifetime == 0 {
		o.Lifetime = DefaultTxnTokenLifetime
	}
	if o.PollInterval == 0 {
		o.PollInterval = DefaultKeyPollInterval
	}
	if o.ActivationDelay == 0 {
		o.ActivationDelay = DefaultKeyActivationDelay
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	t := &TxnTokens{o: o, now: time.Now}
	if _, err := t.Reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// Lifetime is how long a minted token is valid.
func (t *TxnTokens) Lifetime() time.Duration { return t.o.Lifetime }

// Run reads the key files again every PollInterval until ctx is done, so
// that a rotated Secret takes effect without a restart. A reload that
// fails keeps the keys loaded, and says so in the log.
func (t *TxnTokens) Run(ctx context.Context) {
	tick := time.NewTicker(t.o.PollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if changed, err := t.Reload(); err != nil {
				t.o.Logger.Error("Reloading the transaction-token keys failed; the keys loaded before still sign", "dir", t.o.KeyDir, "error", err)
			} else if changed {
				s := t.state.Load()
				t.o.Logger.Info("Reloaded the transaction-token keys", "current", s.current.kid, "previous", kidOf(s.previous),
					"signer", s.signer.kid, "currentSignsAt", s.activeAt)
			}
		}
	}
}

// Reload reads the key files, and takes them if they changed. It is
// called by [TxnTokens.Run]; call it yourself to reload at once.
func (t *TxnTokens) Reload() (changed bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur, err := readKeyFile(filepath.Join(t.o.KeyDir, CurrentKeyFile))
	if err != nil {
		return false, err
	}
	if cur == nil {
		return false, fmt.Errorf("%s holds no %s", t.o.KeyDir, CurrentKeyFile)
	}
	prev, err := readKeyFile(filepath.Join(t.o.KeyDir, PreviousKeyFile))
	if err != nil {
		return false, err
	}
	old := t.state.Load()
	if old != nil && bytes.Equal(cur, t.files[0]) && bytes.Equal(prev, t.files[1]) {
		return false, nil
	}
	s := &keyState{}
	if s.current, err = parseTxnKey(cur); err != nil {
		return false, fmt.Errorf("%s: %w", CurrentKeyFile, err)
	}
	if len(bytes.TrimSpace(prev)) > 0 {
		if s.previous, err = parseTxnKey(prev); err != nil {
			return false, fmt.Errorf("%s: %w", PreviousKeyFile, err)
		}
		if s.previous.kid == s.current.kid {
			s.previous = nil
		}
	}
	s.signer = s.current
	if old != nil && t.o.ActivationDelay > 0 {
		// A new current key signs only once every replica can have
		// published it; until then the key that signed goes on signing,
		// if it is still listed.
		signing := old.signerAt(t.now())
		if signing.kid != s.current.kid && s.previous != nil && s.previous.kid == signing.kid {
			s.signer = s.previous
			s.activeAt = t.now().Add(t.o.ActivationDelay)
			if old.current.kid == s.current.kid && !old.activeAt.IsZero() {
				s.activeAt = old.activeAt // the same rotation, reread
			}
		}
	}
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{s.current.public}}
	if s.previous != nil {
		set.Keys = append(set.Keys, s.previous.public)
	}
	if s.jwks, err = json.Marshal(set); err != nil {
		return false, err
	}
	t.files = [2][]byte{cur, prev}
	t.state.Store(s)
	return true, nil
}

func (s *keyState) signerAt(now time.Time) *txnKey {
	if !s.activeAt.IsZero() && !now.Before(s.activeAt) {
		return s.current
	}
	return s.signer
}

func kidOf(k *txnKey) string {
	if k == nil {
		return ""
	}
	return k.kid
}

// readKeyFile reads a key file, nil if it does not exist.
func readKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxKeyFileBytes {
		return nil, fmt.Errorf("%s is over %d bytes", path, maxKeyFileBytes)
	}
	return b, nil
}

// parseTxnKey reads a private key, PEM or JWK, of P-256 or Ed25519, and
// makes its signer. Its kid is the JWK's own, if it has one, else its RFC
// 7638 thumbprint.
func parseTxnKey(b []byte) (*txnKey, error) {
	var (
		priv crypto.Signer
		kid  string
	)
	if b = bytes.TrimSpace(b); len(b) > 0 && b[0] == '{' {
		var jwk jose.JSONWebKey
		if err := jwk.UnmarshalJSON(b); err != nil {
			return nil, fmt.Errorf("not a JWK: %w", err)
		}
		s, ok := jwk.Key.(crypto.Signer)
		if !ok || jwk.IsPublic() {
			return nil, errors.New("the JWK is not a private key")
		}
		priv, kid = s, jwk.KeyID
	} else {
		block, _ := pem.Decode(b)
		if block == nil {
			return nil, errors.New("neither PEM nor a JWK")
		}
		var (
			k   any
			err error
		)
		switch block.Type {
		case "EC PRIVATE KEY":
			k, err = x509.ParseECPrivateKey(block.Bytes)
		case "PRIVATE KEY":
			k, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		default:
			return nil, fmt.Errorf("a PEM block of type %q, not a private key", block.Type)
		}
		if err != nil {
			return nil, err
		}
		s, ok := k.(crypto.Signer)
		if !ok {
			return nil, errors.New("not a signing key")
		}
		priv = s
	}
	var alg jose.SignatureAlgorithm
	switch k := priv.(type) {
	case *ecdsa.PrivateKey:
		if k.Curve != elliptic.P256() {
			return nil, fmt.Errorf("an ECDSA key of %s; use P-256 (ES256)", k.Curve.Params().Name)
		}
		alg = jose.ES256
	case ed25519.PrivateKey:
		alg = jose.EdDSA
	default:
		return nil, fmt.Errorf("a %T; use ECDSA P-256 (ES256) or Ed25519 (EdDSA)", priv)
	}
	public := jose.JSONWebKey{Key: priv.Public(), Algorithm: string(alg), Use: "sig"}
	if kid == "" {
		tp, err := public.Thumbprint(crypto.SHA256)
		if err != nil {
			return nil, err
		}
		kid = base64.RawURLEncoding.EncodeToString(tp)
	}
	public.KeyID = kid
	// The header is go-jose's own: the one it writes when it signs with
	// this key, taken from a token it signed.
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: priv, KeyID: kid}},
		(&jose.SignerOptions{}).WithType(server.TxnTokenType))
	if err != nil {
		return nil, err
	}
	jws, err := signer.Sign([]byte("{}"))
	if err != nil {
		return nil, err
	}
	compact, err := jws.CompactSerialize()
	if err != nil {
		return nil, err
	}
	header, _, _ := strings.Cut(compact, ".")
	k := &txnKey{kid: kid, alg: alg, public: public, header: header}
	switch p := priv.(type) {
	case *ecdsa.PrivateKey:
		k.ec = p
	case ed25519.PrivateKey:
		k.ed = p
	}
	return k, nil
}

// sign is the compact JWS of payload: the key's header, the payload and
// the signature over both, each base64url-encoded, as go-jose serializes
// it (RFC 7515 section 7.1), its signature of EdDSA (RFC 8037) or ES256 (r
// and s, 32 bytes each, big-endian: RFC 7518 section 3.4).
func (k *txnKey) sign(payload []byte) (string, error) {
	enc := base64.RawURLEncoding
	n := len(k.header) + 1 + enc.EncodedLen(len(payload))
	b := make([]byte, n, n+1+enc.EncodedLen(64))
	copy(b, k.header)
	b[len(k.header)] = '.'
	enc.Encode(b[len(k.header)+1:], payload)
	var sig []byte
	switch {
	case k.ed != nil:
		sig = ed25519.Sign(k.ed, b)
	case k.ec != nil:
		h := sha256.Sum256(b)
		r, s, err := ecdsa.Sign(rand.Reader, k.ec, h[:])
		if err != nil {
			return "", err
		}
		sig = make([]byte, 64)
		r.FillBytes(sig[:32])
		s.FillBytes(sig[32:])
	default:
		return "", errors.New("a transaction-token key that cannot sign")
	}
	b = append(b, '.')
	b = enc.AppendEncode(b, sig)
	return string(b), nil
}

// txnTokenClaims are a transaction token's claims.
type txnTokenClaims struct {
	Issuer   string   `json:"iss,omitempty"`
	Subject  string   `json:"sub"`
	Audience string   `json:"aud"`
	IssuedAt int64    `json:"iat"`
	Expiry   int64    `json:"exp"`
	Txn      string   `json:"txn"`
	Groups   []string `json:"groups,omitempty"`
	// RequestingWorkload is the draft's req_wl: the gateway.
	RequestingWorkload string `json:"req_wl"`
	// Tctx is the draft's transaction context: what the call is.
	Tctx txnContext `json:"tctx"`
	// Rctx is the draft's request context: how it came in.
	Rctx requestContext `json:"rctx"`
}

type txnContext struct {
	// Tool is the tool's published name; SourceTool its name at the
	// workload, where a ToolSet's prefix makes them differ.
	Tool       string `json:"tool"`
	SourceTool string `json:"sourceTool,omitempty"`
}

type requestContext struct {
	// Authn is how the gateway authenticated the caller ("kubernetes",
	// "oidc").
	Authn   string `json:"authn,omitempty"`
	TraceID string `json:"traceId,omitempty"`
}

// appendJSON appends the claims as json.Marshal writes them (the field
// order and omissions of their tags), without its reflection: a token is
// minted for every call. TestTxnTokenClaimsJSON holds it to json.Marshal.
func (c *txnTokenClaims) appendJSON(b []byte) []byte {
	b = append(b, '{')
	if c.Issuer != "" {
		b = appendJSONString(append(b, `"iss":`...), c.Issuer)
		b = append(b, ',')
	}
	b = appendJSONString(append(b, `"sub":`...), c.Subject)
	b = appendJSONString(append(b, `,"aud":`...), c.Audience)
	b = strconv.AppendInt(append(b, `,"iat":`...), c.IssuedAt, 10)
	b = strconv.AppendInt(append(b, `,"exp":`...), c.Expiry, 10)
	b = appendJSONString(append(b, `,"txn":`...), c.Txn)
	if len(c.Groups) > 0 {
		b = append(b, `,"groups":[`...)
		for i, g := range c.Groups {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, g)
		}
		b = append(b, ']')
	}
	b = appendJSONString(append(b, `,"req_wl":`...), c.RequestingWorkload)
	b = appendJSONString(append(b, `,"tctx":{"tool":`...), c.Tctx.Tool)
	if c.Tctx.SourceTool != "" {
		b = appendJSONString(append(b, `,"sourceTool":`...), c.Tctx.SourceTool)
	}
	b = append(b, `},"rctx":{`...)
	if c.Rctx.Authn != "" {
		b = appendJSONString(append(b, `"authn":`...), c.Rctx.Authn)
		if c.Rctx.TraceID != "" {
			b = append(b, ',')
		}
	}
	if c.Rctx.TraceID != "" {
		b = appendJSONString(append(b, `"traceId":`...), c.Rctx.TraceID)
	}
	return append(b, "}}"...)
}

// appendJSONString appends s as a JSON string: as it is when it is
// printable ASCII that needs no escape, else as json.Marshal escapes it.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// Mint signs a token for caller c's call of tool, with request id txn and
// trace id traceID (empty if none), from workload (the gateway's name).
func (t *TxnTokens) Mint(c *Caller, tool *spec.TableTool, txn, traceID, workload string) (string, error) {
	now := t.now()
	claims := txnTokenClaims{
		Issuer:             t.o.Issuer,
		Subject:            c.User,
		Audience:           tool.ToolSet.String(),
		IssuedAt:           now.Unix(),
		Expiry:             now.Add(t.o.Lifetime).Unix(),
		Txn:                txn,
		Groups:             c.Groups,
		RequestingWorkload: workload,
		Tctx:               txnContext{Tool: tool.Name},
		Rctx:               requestContext{Authn: c.AuthMode, TraceID: traceID},
	}
	if tool.SourceName != tool.Name {
		claims.Tctx.SourceTool = tool.SourceName
	}
	payload := claims.appendJSON(make([]byte, 0, 512))
	// Signed over go-jose's header for the key, which never changes, by
	// the standard library's Ed25519 or ECDSA, as go-jose would sign it
	// (TestTxnTokenIsGoJOSEs): go-jose's signer would build, encode and
	// parse that header again for every token.
	return t.state.Load().signerAt(now).sign(payload)
}

// newRequestID is a call's request id: 130 random bits.
func newRequestID() string { return rand.Text() }

// serveJWKS serves the public keys: the current and the previous.
func (t *TxnTokens) serveJWKS(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "use GET", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/jwk-set+json")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(t.state.Load().jwks)
}

// addTxnToken mints c's token for its call of tool into out. A token that
// cannot be minted (only a failing random source does that) is left out
// and logged: the workload sees an anonymous call, which it refuses if it
// requires a caller, never a caller it was not told of.
func (g *Gateway) addTxnToken(ctx context.Context, out http.Header, c *Caller, tool *spec.TableTool) {
	var traceID string
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		traceID = sc.TraceID().String()
	}
	// The call's request id, as its audit line names it, so that the two
	// join; a fresh one where the call has none.
	id := requestIDFrom(ctx)
	if id == "" {
		id = newRequestID()
	}
	tok, err := g.opts.TxnTokens.Mint(c, tool, id, traceID, g.opts.Name)
	if err != nil {
		g.logger.Error("Minting a transaction token failed; the call goes without one", "tool", tool.Name, "error", err)
		return
	}
	out.Set(server.TxnTokenHeader, tok)
}
