// Package metricsauth puts a metrics server behind the Kubernetes API
// server's authentication and authorization: a caller needs a bearer token
// the API server accepts (a TokenReview) and the right to the request's
// verb on its path (a SubjectAccessReview of non-resource attributes, as
// the metrics-reader ClusterRole grants get on /metrics).
//
// It answers what controller-runtime's
// filters.WithAuthenticationAndAuthorization answers, with the same cache
// times, for a fraction of the binary: that filter builds on
// k8s.io/apiserver's delegating authenticator and authorizer, which bring
// CEL, OpenTelemetry and an informer for every API group, 30 MB of the
// manager's 83 and some 15 MiB of its resident pages. It also bounds what
// the other does not: the reviews in flight and the rate of each kind, in
// lanes that a caller without credentials cannot fill for a scraper the
// API server accepted before; the questions asked (GET and HEAD of the
// metrics path only); and the size of a token.
//
// What a flood of forged tokens can still do is delay the first review of
// a token never seen (a scraper's first, or its next after the kubelet
// rotates it): such tokens share one lane, as they share the API server.
package metricsauth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/singleflight"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/toolplane/toolplane/internal/ttlcache"
)

// How long answers are reused: controller-runtime's filter's times, so a
// revoked grant stops working as late as it did.
const (
	// TokenTTL is how long a token's review is reused, accepted or not.
	TokenTTL = time.Minute
	// AllowTTL is how long a decision that allows is reused.
	AllowTTL = 5 * time.Minute
	// DenyTTL is how long a decision that denies is reused.
	DenyTTL = 30 * time.Second
	// KnownTTL is how long a token the API server accepted is reviewed
	// again, once its review expires, in the lane of known tokens: a
	// ServiceAccount token the kubelet projects lives an hour.
	KnownTTL = time.Hour
)

// Options tune a Filter; zero values take the defaults.
type Options struct {
	// TokenTTL, AllowTTL, DenyTTL and KnownTTL default to the constants
	// of those names.
	TokenTTL, AllowTTL, DenyTTL, KnownTTL time.Duration
	// Paths are the paths served; any other is answered 404 without a
	// question to the API server. Empty means /metrics.
	Paths []string
}

// Bounds on what callers can make the filter hold or ask.
const (
	// maxEntries bounds each cache: the scrapers of a cluster are a few
	// ServiceAccounts.
	maxEntries = 1000
	// maxTokenBytes bounds a token sent for review: a ServiceAccount token
	// is about a kilobyte.
	maxTokenBytes = 16 << 10
	// maxInFlight bounds the reviews in flight at once in each lane: the
	// TokenReviews of tokens never accepted (which anyone who reaches the
	// port can send), those of tokens accepted before, and the
	// SubjectAccessReviews (which need an accepted token). A request that
	// needs one more in its lane is answered 503 at once rather than
	// queued: a flood holds no more than this many requests open, and
	// never a slot of another lane.
	maxInFlight = 8
	// reviewTimeout bounds one review, its wait for the rate limit
	// included.
	reviewTimeout = 10 * time.Second
	// reviewQPS and reviewBurst bound the reviews each lane sends to the
	// API server.
	reviewQPS   = 5
	reviewBurst = 10
)

var errBusy = errors.New("too many reviews in flight")

// Filter authenticates and authorizes requests with the API server.
type Filter struct {
	opts Options
	// unknown, known and access are the three lanes: the TokenReviews of
	// tokens never accepted, those of tokens accepted within KnownTTL, and
	// the SubjectAccessReviews. Each has its slots and its client, whose
	// rate limit is its own.
	unknown, known, access lane
	// accepted and refused are the tokens reviewed, apart: a flood of
	// forged tokens fills refused and never drops a scraper's from
	// accepted. seen are the tokens accepted within KnownTTL, which the
	// known lane reviews again.
	accepted  *ttlcache.Cache[[32]byte, *authenticationv1.UserInfo]
	refused   *ttlcache.Cache[[32]byte, struct{}]
	seen      *ttlcache.Cache[[32]byte, struct{}]
	decisions *ttlcache.Cache[[32]byte, bool]
	inflight  singleflight.Group
}

type lane struct {
	name   string
	tokens authenticationclient.TokenReviewInterface
	access authorizationclient.SubjectAccessReviewInterface
	slots  chan struct{}
}

// WithAuthenticationAndAuthorization is a metricsserver.Options
// FilterProvider, in place of controller-runtime's filter of that name.
// cfg's rate limit is not used: each kind of review has its own.
func WithAuthenticationAndAuthorization(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	f, err := New(cfg, httpClient, Options{})
	if err != nil {
		return nil, err
	}
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return f.Wrap(log, next), nil
	}, nil
}

// New returns a Filter that sends its reviews with cfg's credentials over
// httpClient, each lane at reviewQPS.
func New(cfg *rest.Config, httpClient *http.Client, opts Options) (*Filter, error) {
	limited := func() *rest.Config {
		c := rest.CopyConfig(cfg)
		c.QPS, c.Burst, c.RateLimiter = reviewQPS, reviewBurst, nil
		return c
	}
	unknown, err := authenticationclient.NewForConfigAndClient(limited(), httpClient)
	if err != nil {
		return nil, fmt.Errorf("a TokenReview client: %w", err)
	}
	known, err := authenticationclient.NewForConfigAndClient(limited(), httpClient)
	if err != nil {
		return nil, fmt.Errorf("a TokenReview client: %w", err)
	}
	access, err := authorizationclient.NewForConfigAndClient(limited(), httpClient)
	if err != nil {
		return nil, fmt.Errorf("a SubjectAccessReview client: %w", err)
	}
	return NewWithClients(unknown.TokenReviews(), known.TokenReviews(), access.SubjectAccessReviews(), opts), nil
}

// NewWithClients returns a Filter that sends the TokenReviews of tokens
// never accepted with unknown, those of tokens accepted before with known,
// and its SubjectAccessReviews with access: give each its own rate limit.
func NewWithClients(unknown, known authenticationclient.TokenReviewInterface, access authorizationclient.SubjectAccessReviewInterface, opts Options) *Filter {
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&opts.TokenTTL, TokenTTL}, {&opts.AllowTTL, AllowTTL}, {&opts.DenyTTL, DenyTTL}, {&opts.KnownTTL, KnownTTL}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if len(opts.Paths) == 0 {
		opts.Paths = []string{"/metrics"}
	}
	return &Filter{
		opts:      opts,
		unknown:   lane{name: "u", tokens: unknown, slots: make(chan struct{}, maxInFlight)},
		known:     lane{name: "k", tokens: known, slots: make(chan struct{}, maxInFlight)},
		access:    lane{name: "a", access: access, slots: make(chan struct{}, maxInFlight)},
		accepted:  ttlcache.New[[32]byte, *authenticationv1.UserInfo](maxEntries),
		refused:   ttlcache.New[[32]byte, struct{}](maxEntries),
		seen:      ttlcache.New[[32]byte, struct{}](maxEntries),
		decisions: ttlcache.New[[32]byte, bool](maxEntries),
	}
}

// Wrap serves next only to GET and HEAD requests of one of the paths
// served, whose bearer token the API server accepts, from a user it allows
// the request's verb (its method in lower case) on its path. It answers
// 404 to another path and 405 to another method, both without asking; 401
// without an accepted token, 403 to a user not allowed, and 503 when the
// API server cannot be asked. next does not see the Authorization header.
func (f *Filter) Wrap(log logr.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !slices.Contains(f.opts.Paths, r.URL.Path) {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
			return
		}
		token, ok := bearerToken(r)
		if !ok || len(token) > maxTokenBytes {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		user, err := f.authenticate(r.Context(), token)
		if err != nil {
			unavailable(w, log, "Authentication failed", err)
			return
		}
		if user == nil {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		allowed, err := f.authorize(r.Context(), user, strings.ToLower(r.Method), r.URL.Path)
		if err != nil {
			unavailable(w, log, "Authorization failed", err)
			return
		}
		if !allowed {
			log.V(4).Info("Authorization denied", "user", user.Username, "path", r.URL.Path)
			http.Error(w, fmt.Sprintf("Authorization denied for user %s", user.Username), http.StatusForbidden)
			return
		}
		r.Header.Del("Authorization")
		next.ServeHTTP(w, r)
	})
}

// unavailable answers 503: the API server could not be asked (or too many
// questions are in flight), which says nothing of the caller. It logs only
// what the API server answered: a full lane or a caller gone away are the
// callers' doing, and as many lines as they like.
func unavailable(w http.ResponseWriter, log logr.Logger, msg string, err error) {
	if !errors.Is(err, errBusy) && !errors.Is(err, context.Canceled) {
		log.Error(err, msg)
	}
	w.Header().Set("Retry-After", "1")
	http.Error(w, msg, http.StatusServiceUnavailable)
}

// authenticate returns the user a TokenReview says token is, or nil if
// the API server refuses it. A token accepted within KnownTTL is reviewed
// in the known lane.
func (f *Filter) authenticate(ctx context.Context, token string) (*authenticationv1.UserInfo, error) {
	key := tokenKey(token)
	if u, ok := f.accepted.Get(key); ok {
		return u, nil
	}
	if _, ok := f.refused.Get(key); ok {
		return nil, nil
	}
	l := &f.unknown
	if _, ok := f.seen.Get(key); ok {
		l = &f.known
	}
	v, err := f.review(ctx, l, string(key[:]), func(ctx context.Context) (any, error) {
		tr, err := l.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		if err != nil {
			return nil, err
		}
		if !tr.Status.Authenticated {
			f.refused.Put(key, struct{}{}, f.opts.TokenTTL)
			return (*authenticationv1.UserInfo)(nil), nil
		}
		u := &tr.Status.User
		f.accepted.Put(key, u, f.opts.TokenTTL)
		f.seen.Put(key, struct{}{}, f.opts.KnownTTL)
		return u, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*authenticationv1.UserInfo), nil
}

// authorize returns whether a SubjectAccessReview allows user verb on
// path.
func (f *Filter) authorize(ctx context.Context, user *authenticationv1.UserInfo, verb, path string) (bool, error) {
	// Every field the review carries is in the key, so a cached answer is
	// the answer to the very same question.
	q, err := json.Marshal([]any{user.Username, user.UID, user.Groups, user.Extra, verb, path})
	if err != nil {
		return false, err
	}
	key := sha256.Sum256(q)
	if ok, hit := f.decisions.Get(key); hit {
		return ok, nil
	}
	v, err := f.review(ctx, &f.access, string(key[:]), func(ctx context.Context) (any, error) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
			User:                  user.Username,
			UID:                   user.UID,
			Groups:                user.Groups,
		}}
		if len(user.Extra) > 0 {
			sar.Spec.Extra = make(map[string]authorizationv1.ExtraValue, len(user.Extra))
			for k, v := range user.Extra {
				sar.Spec.Extra[k] = authorizationv1.ExtraValue(v)
			}
		}
		res, err := f.access.access.Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			return nil, err
		}
		allowed := res.Status.Allowed && !res.Status.Denied
		ttl := f.opts.DenyTTL
		if allowed {
			ttl = f.opts.AllowTTL
		}
		f.decisions.Put(key, allowed, ttl)
		return allowed, nil
	})
	if err != nil {
		return false, err
	}
	return v.(bool), nil
}

// review runs ask once for all concurrent callers of key in lane l, in
// one of l's slots, bounded by reviewTimeout. It outlives a caller that
// goes away (so its answer is cached for the next), never the timeout.
func (f *Filter) review(ctx context.Context, l *lane, key string, ask func(context.Context) (any, error)) (any, error) {
	ch := f.inflight.DoChan(l.name+key, func() (any, error) {
		select {
		case l.slots <- struct{}{}:
			defer func() { <-l.slots }()
		default:
			return nil, errBusy
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reviewTimeout)
		defer cancel()
		return ask(ctx)
	})
	select {
	case res := <-ch:
		return res.Val, res.Err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// tokenKey is the key of token in the caches and in flight: its SHA-256
// as the API server reads it. A JWT's three base64url segments are
// decoded and encoded again first: the decoder ignores the low bits of
// each segment's last character, so the API server accepts one
// ServiceAccount token in up to 4,096 spellings, which would otherwise be
// as many tokens accepted before, for one token of any workload. Two
// spellings share an answer only if they decode alike, so a caller served
// by the other's answer already holds the token.
func tokenKey(token string) [32]byte {
	segments := strings.Split(token, ".")
	if len(segments) != 3 {
		return sha256.Sum256([]byte(token))
	}
	canonical := make([]byte, 0, len(token))
	for i, seg := range segments {
		raw, err := base64.RawURLEncoding.DecodeString(seg)
		if err != nil {
			return sha256.Sum256([]byte(token))
		}
		if i > 0 {
			canonical = append(canonical, '.')
		}
		canonical = base64.RawURLEncoding.AppendEncode(canonical, raw)
	}
	return sha256.Sum256(canonical)
}

// bearerToken is the token of r's Authorization header: "Bearer" in any
// case, one space-separated token.
func bearerToken(r *http.Request) (string, bool) {
	f := strings.Fields(r.Header.Get("Authorization"))
	if len(f) != 2 || !strings.EqualFold(f[0], "bearer") {
		return "", false
	}
	return f[1], true
}
