package gateway

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/toolplane/toolplane/internal/ttlcache"
)

// The RBAC coordinates of calling a tool: verb call on resource tools of
// group toolplane.io, named by the tool's published name, in the namespace
// of the ToolSet that owns it.
const (
	ToolGroup    = "toolplane.io"
	ToolResource = "tools"
	ToolVerb     = "call"
)

// Defaults of [KubernetesAuth].
const (
	// DefaultAuthCacheTTL is how long a token's review and a decision
	// that allows are reused: so how long a revoked grant or a deleted
	// ServiceAccount's token can still work.
	DefaultAuthCacheTTL = 10 * time.Second
	// DefaultAuthDenyCacheTTL is how long a decision that denies is
	// reused: so how long a new grant can take to show. It is longer than
	// DefaultAuthCacheTTL because a caller granted a few tools of a large
	// table is denied all the others, one question per tool, and with
	// [DefaultReviewQPS] the API server answers about 12,000 of them a
	// minute: a shorter time would have such callers ask again before the
	// first answers came back.
	DefaultAuthDenyCacheTTL = time.Minute
	// DefaultAuthCacheEntries bounds the decisions kept (about 8 MiB),
	// and a tenth of it the tokens (about 3 MiB). Live entries are fewer: the rate limit
	// lets at most QPS × TTL + Burst new ones in (12,400 denials a minute,
	// 2,400 tokens in 10 s at the defaults); the bound holds the expired
	// ones until a full cache drops them.
	DefaultAuthCacheEntries = 50_000
	// DefaultReviewQPS and DefaultReviewBurst are the rate of
	// TokenReviews and SubjectAccessReviews that cmd/gateway's Kubernetes
	// client sends at most (--auth-qps, --auth-burst): whatever callers
	// do, the API server sees no more. A question beyond it waits.
	DefaultReviewQPS   = 200
	DefaultReviewBurst = 400
)

// maxTokenBytes bounds a token sent for review: a ServiceAccount token is
// about a kilobyte, an OIDC ID token a few.
const maxTokenBytes = 16 << 10

// reviewTimeout bounds one TokenReview or SubjectAccessReview, waiting for
// the client's rate limit included.
const reviewTimeout = 10 * time.Second

// KubernetesAuth is [Auth] by the Kubernetes API server: a caller presents a
// ServiceAccount token (or any token the API server accepts), checked with
// a TokenReview, and each tool is authorized with a SubjectAccessReview of
// verb call on toolplane.io/tools, resourceName the published name, in the
// owner ToolSet's namespace. A team grants its agents its tools with a Role
// and RoleBinding in its own namespace:
//
//	rules:
//	- apiGroups: [toolplane.io]
//	  resources: [tools]
//	  verbs: [call]
//	  resourceNames: [crm_query_customer]   # omit for every tool of the namespace
//
// Reviews are cached by the token's SHA-256, for TTL. Decisions are cached
// by [Caller.Key] (user, uid, groups and [Caller.AccessExtra]: everything
// the SubjectAccessReview carries, so a cached answer is the answer to the
// very same question) and the tool's namespace and name, for TTL if they
// allow and DenyTTL if they deny: every token of one ServiceAccount shares
// them, since the token's credential id is in neither the review nor the
// key. Concurrent identical reviews are one review. Each cache is bounded
// to MaxEntries. The rate of reviews is bounded by Client's own rate limit
// (rest.Config QPS and Burst; cmd/gateway's --auth-qps and --auth-burst),
// and the reviews of one request by [Options.MaxReviewsPerRequest].
type KubernetesAuth struct {
	// Client creates the reviews; it needs create on tokenreviews and
	// subjectaccessreviews. Its rate limit bounds the reviews per second.
	Client kubernetes.Interface
	// TokenClient, if set, creates the TokenReviews instead of Client,
	// under a rate limit of its own: then a flood of forged tokens, which
	// anyone who reaches the gateway can send, waits behind its own limit
	// and never delays the SubjectAccessReviews of authenticated callers.
	TokenClient kubernetes.Interface
	// Audiences, if set, are the audiences a token must be issued for
	// (TokenReview's spec.audiences). Set one of the gateway's own, such as
	// "toolplane-gateway", and give agents tokens of that audience, so that
	// a token meant for the API server, or for anything else, is refused.
	// Empty means the API server's own audiences.
	Audiences []string
	// TTL is how long a token's review or a decision that allows is
	// reused. Zero means [DefaultAuthCacheTTL].
	TTL time.Duration
	// DenyTTL is how long a decision that denies is reused. Zero means
	// [DefaultAuthDenyCacheTTL].
	DenyTTL time.Duration
	// MaxEntries bounds the decisions kept, and a tenth of it (at least
	// 100) the tokens. Zero means [DefaultAuthCacheEntries].
	MaxEntries int

	once      sync.Once
	ttl, deny time.Duration
	tokens    *ttlcache.Cache[[32]byte, *Caller]
	decisions *ttlcache.Cache[string, bool]
	// inflight makes concurrent identical reviews one.
	inflight singleflight.Group
	metrics  *metrics
}

func (k *KubernetesAuth) init() {
	k.once.Do(func() {
		k.ttl, k.deny = k.TTL, k.DenyTTL
		n := k.MaxEntries
		if k.ttl <= 0 {
			k.ttl = DefaultAuthCacheTTL
		}
		if k.deny <= 0 {
			k.deny = DefaultAuthDenyCacheTTL
		}
		if n <= 0 {
			n = DefaultAuthCacheEntries
		}
		k.tokens = ttlcache.New[[32]byte, *Caller](max(100, n/10))
		k.decisions = ttlcache.New[string, bool](n)
	})
}

// Authenticate implements [Auth] with a TokenReview.
func (k *KubernetesAuth) Authenticate(ctx context.Context, token string) (*Caller, error) {
	k.init()
	if len(token) > maxTokenBytes {
		return nil, fmt.Errorf("%w: a token of more than %d bytes", ErrUnauthenticated, maxTokenBytes)
	}
	key := sha256.Sum256([]byte(token))
	if c, ok := k.tokens.Get(key); ok {
		k.count("token", "hit")
		if c == nil {
			return nil, fmt.Errorf("%w: token refused by the API server", ErrUnauthenticated)
		}
		return c, nil
	}
	v, err, shared := k.do(ctx, "t\x00"+string(key[:]), func(ctx context.Context) (any, error) {
		return k.review(ctx, key, token)
	})
	k.countShared("token", shared)
	if err != nil {
		return nil, err
	}
	return v.(*Caller), nil
}

func (k *KubernetesAuth) review(ctx context.Context, key [32]byte, token string) (*Caller, error) {
	client := k.TokenClient
	if client == nil {
		client = k.Client
	}
	tr, err := client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: k.Audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("reviewing the token: %w", err)
	}
	st := tr.Status
	if !st.Authenticated || (len(k.Audiences) > 0 && !slices.ContainsFunc(st.Audiences, func(a string) bool { return slices.Contains(k.Audiences, a) })) {
		k.tokens.Put(key, nil, k.ttl)
		return nil, fmt.Errorf("%w: token refused by the API server", ErrUnauthenticated)
	}
	c := &Caller{User: st.User.Username, UID: st.User.UID, Groups: st.User.Groups, AuthMode: "kubernetes"}
	if len(st.User.Extra) > 0 {
		c.Extra = make(map[string][]string, len(st.User.Extra))
		for k, v := range st.User.Extra {
			c.Extra[k] = v
		}
	}
	k.tokens.Put(key, c, k.ttl)
	return c, nil
}

// Allowed implements [Auth] with a SubjectAccessReview.
func (k *KubernetesAuth) Allowed(ctx context.Context, c *Caller, namespace, name string) (bool, error) {
	k.init()
	key := decisionKey(c.Key(), namespace, name)
	if ok, hit := k.decisions.Get(key); hit {
		k.count("access", "hit")
		return ok, nil
	}
	v, err, shared := k.do(ctx, "a\x00"+key, func(ctx context.Context) (any, error) {
		return k.access(ctx, key, c, namespace, name)
	})
	k.countShared("access", shared)
	if err != nil {
		return false, err
	}
	return v.(bool), nil
}

func (k *KubernetesAuth) access(ctx context.Context, key string, c *Caller, namespace, name string) (bool, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: namespace,
			Verb:      ToolVerb,
			Group:     ToolGroup,
			Resource:  ToolResource,
			Name:      name,
		},
		User:   c.User,
		UID:    c.UID,
		Groups: c.Groups,
	}}
	// Exactly what Caller.Key covers: a cached answer is never reused for
	// a question it did not answer.
	if extra := c.AccessExtra(); len(extra) > 0 {
		sar.Spec.Extra = make(map[string]authorizationv1.ExtraValue, len(extra))
		for k, v := range extra {
			sar.Spec.Extra[k] = v
		}
	}
	res, err := k.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("reviewing access: %w", err)
	}
	allowed := res.Status.Allowed && !res.Status.Denied
	ttl := k.deny
	if allowed {
		ttl = k.ttl
	}
	k.decisions.Put(key, allowed, ttl)
	return allowed, nil
}

// Cached implements [DecisionCache].
func (k *KubernetesAuth) Cached(callerKey, namespace, name string) (allowed, ok bool) {
	k.init()
	allowed, ok = k.decisions.Get(decisionKey(callerKey, namespace, name))
	if ok {
		k.count("access", "hit")
	}
	return allowed, ok
}

// DecisionTTL implements [DecisionCache]: TTL.
func (k *KubernetesAuth) DecisionTTL() time.Duration {
	k.init()
	return k.ttl
}

// do runs review once for every concurrent caller of key, with the ctx of
// the caller that runs it, bounded by reviewTimeout: a review never
// outlives every request that waits for it, so requests that go away
// leave nothing running. See [share].
func (k *KubernetesAuth) do(ctx context.Context, key string, review func(context.Context) (any, error)) (v any, err error, shared bool) {
	return share(ctx, &k.inflight, key, func(ctx context.Context) (any, error) {
		ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
		defer cancel()
		return review(ctx)
	})
}

func (k *KubernetesAuth) count(kind, result string) {
	if k.metrics != nil {
		k.metrics.authzCache.WithLabelValues(kind, result).Inc()
	}
}

// countShared counts a question that the cache did not answer: a review
// (miss), or a review it waited for with others (shared).
func (k *KubernetesAuth) countShared(kind string, shared bool) {
	if shared {
		k.count(kind, "shared")
	} else {
		k.count(kind, "miss")
	}
}

func decisionKey(callerKey, namespace, name string) string {
	return callerKey + "\x00" + namespace + "\x00" + name
}
