package gateway

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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
	// DefaultAuthCacheTTL is how long a token's review and an access
	// decision are reused: so how long a revoked grant or a deleted
	// ServiceAccount's token can still work.
	DefaultAuthCacheTTL = 10 * time.Second
	// DefaultAuthCacheEntries bounds each of the two caches.
	DefaultAuthCacheEntries = 100_000
)

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
// Reviews and decisions are cached for TTL, bounded to MaxEntries each.
type KubernetesAuth struct {
	// Client creates the reviews; it needs create on tokenreviews and
	// subjectaccessreviews.
	Client kubernetes.Interface
	// Audiences, if set, are the audiences a token must be issued for
	// (TokenReview's spec.audiences). Set one of the gateway's own, such as
	// "toolplane-gateway", and give agents tokens of that audience, so that
	// a token meant for the API server, or for anything else, is refused.
	// Empty means the API server's own audiences.
	Audiences []string
	// TTL is how long a review or a decision is reused. Zero means
	// [DefaultAuthCacheTTL].
	TTL time.Duration
	// MaxEntries bounds each cache. Zero means [DefaultAuthCacheEntries].
	MaxEntries int

	once      sync.Once
	tokens    *ttlCache[[32]byte, *Caller]
	decisions *ttlCache[string, bool]
	metrics   *metrics
}

func (k *KubernetesAuth) init() {
	k.once.Do(func() {
		ttl, n := k.TTL, k.MaxEntries
		if ttl <= 0 {
			ttl = DefaultAuthCacheTTL
		}
		if n <= 0 {
			n = DefaultAuthCacheEntries
		}
		k.tokens = newTTLCache[[32]byte, *Caller](ttl, n)
		k.decisions = newTTLCache[string, bool](ttl, n)
	})
}

// Authenticate implements [Auth] with a TokenReview.
func (k *KubernetesAuth) Authenticate(ctx context.Context, token string) (*Caller, error) {
	k.init()
	key := sha256.Sum256([]byte(token))
	if c, ok := k.tokens.get(key); ok {
		k.count("token", "hit")
		if c == nil {
			return nil, fmt.Errorf("%w: token refused by the API server", ErrUnauthenticated)
		}
		return c, nil
	}
	k.count("token", "miss")
	tr, err := k.Client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: k.Audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("reviewing the token: %w", err)
	}
	st := tr.Status
	if !st.Authenticated || (len(k.Audiences) > 0 && !slices.ContainsFunc(st.Audiences, func(a string) bool { return slices.Contains(k.Audiences, a) })) {
		k.tokens.put(key, nil)
		return nil, fmt.Errorf("%w: token refused by the API server", ErrUnauthenticated)
	}
	c := &Caller{User: st.User.Username, UID: st.User.UID, Groups: st.User.Groups}
	if len(st.User.Extra) > 0 {
		c.Extra = make(map[string][]string, len(st.User.Extra))
		for k, v := range st.User.Extra {
			c.Extra[k] = v
		}
	}
	k.tokens.put(key, c)
	return c, nil
}

// Allowed implements [Auth] with a SubjectAccessReview.
func (k *KubernetesAuth) Allowed(ctx context.Context, c *Caller, namespace, name string) (bool, error) {
	k.init()
	key := callerKeyOf(c) + "\x00" + namespace + "\x00" + name
	if ok, hit := k.decisions.get(key); hit {
		k.count("access", "hit")
		return ok, nil
	}
	k.count("access", "miss")
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
	if len(c.Extra) > 0 {
		sar.Spec.Extra = make(map[string]authorizationv1.ExtraValue, len(c.Extra))
		for k, v := range c.Extra {
			sar.Spec.Extra[k] = v
		}
	}
	res, err := k.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("reviewing access: %w", err)
	}
	allowed := res.Status.Allowed && !res.Status.Denied
	k.decisions.put(key, allowed)
	return allowed, nil
}

func (k *KubernetesAuth) count(kind, result string) {
	if k.metrics != nil {
		k.metrics.authzCache.WithLabelValues(kind, result).Inc()
	}
}

// callerKeyOf identifies everything of c that a decision depends on.
func callerKeyOf(c *Caller) string {
	var b strings.Builder
	b.WriteString(c.User)
	b.WriteByte(0)
	b.WriteString(c.UID)
	for _, g := range c.Groups {
		b.WriteByte(0)
		b.WriteString(g)
	}
	keys := make([]string, 0, len(c.Extra))
	for k := range c.Extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.WriteByte(1)
		b.WriteString(k)
		for _, v := range c.Extra[k] {
			b.WriteByte(0)
			b.WriteString(v)
		}
	}
	sum := sha256.Sum256([]byte(b.String()))
	return string(sum[:])
}

// ttlCache is a map whose entries expire after ttl, bounded to max entries:
// when full it drops the expired ones, and if none expired, all of them.
type ttlCache[K comparable, V any] struct {
	mu      sync.Mutex
	ttl     time.Duration
	max     int
	entries map[K]ttlEntry[V]
}

type ttlEntry[V any] struct {
	v       V
	expires time.Time
}

func newTTLCache[K comparable, V any](ttl time.Duration, max int) *ttlCache[K, V] {
	return &ttlCache[K, V]{ttl: ttl, max: max, entries: map[K]ttlEntry[V]{}}
}

func (c *ttlCache[K, V]) get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok || time.Now().After(e.expires) {
		var zero V
		return zero, false
	}
	return e.v, true
}

func (c *ttlCache[K, V]) put(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if len(c.entries) >= c.max {
		for key, e := range c.entries {
			if now.After(e.expires) {
				delete(c.entries, key)
			}
		}
		if len(c.entries) >= c.max {
			clear(c.entries)
		}
	}
	c.entries[k] = ttlEntry[V]{v: v, expires: now.Add(c.ttl)}
}
