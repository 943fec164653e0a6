package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/singleflight"
)

// Auth authenticates the callers of a [Gateway] and authorizes their tools.
// [KubernetesAuth] does it with TokenReview and SubjectAccessReview. An
// authentication mode (ServiceAccount tokens, OIDC, both) is an
// [Authenticator]; what a caller may call is decided by an [Authorizer],
// whatever the mode that authenticated it.
type Auth interface {
	Authenticator
	Authorizer
}

// Authenticator turns a bearer token into a [Caller].
type Authenticator interface {
	// Authenticate returns the caller who presented the bearer token. A
	// token that is not valid gives an error wrapping
	// [ErrUnauthenticated]; any other error means the answer is unknown.
	Authenticate(ctx context.Context, token string) (*Caller, error)
}

// Authorizer answers one question: may c call the tool published as name
// by a ToolSet in namespace? The gateway never asks it directly from a
// request path: every path that shows or calls a tool (tools/list and its
// views, GET /v1/tools, search, call_tool, the catalog, list_changed) goes
// through [Gateway.permits] or [Gateway.permitted], which ask the broad
// questions first and bound how many questions one request may cause.
type Authorizer interface {
	// Allowed reports whether c may call the tool published as name by a
	// ToolSet in namespace. An empty name asks whether c may call every
	// tool of namespace, and an empty namespace (with an empty name)
	// whether c may call every tool of every namespace: the gateway asks
	// those first, so that a broad grant costs one question, not one per
	// tool.
	Allowed(ctx context.Context, c *Caller, namespace, name string) (bool, error)
}

// DecisionCache is implemented by an [Authorizer] that keeps its answers,
// as [KubernetesAuth] does. The gateway uses it to tell the questions that
// cost a review from those answered from memory, so that it can bound the
// former per request ([Options.MaxReviewsPerRequest]) and keep what a
// caller may see of a table for as long as the answers hold. An Authorizer
// that does not implement it has every question counted against the bound,
// and nothing kept.
type DecisionCache interface {
	// Cached answers Allowed for the caller of [Caller.Key] key from
	// memory alone: ok is false when answering would cost a review.
	Cached(key, namespace, name string) (allowed, ok bool)
	// DecisionTTL is how long an answer that allows is reused: the
	// gateway keeps what a caller may see of a table no longer.
	DecisionTTL() time.Duration
}

// ErrReviewBudget means a request asked more authorization questions than
// [Options.MaxReviewsPerRequest] allows it to: the answers given so far
// are kept, so the same request again goes further.
var ErrReviewBudget = errors.New("gateway: the request's authorization budget is spent; retry")

// ErrUnauthenticated means a caller presented no valid token.
var ErrUnauthenticated = errors.New("gateway: unauthenticated")

// Caller is an authenticated caller, as the API server's TokenReview
// describes it.
type Caller struct {
	User   string
	UID    string
	Groups []string
	Extra  map[string][]string
	// AuthMode is how the caller authenticated ("kubernetes" for a token
	// the API server reviewed), for audit and metrics. It is not part of
	// [Caller.Key]: what a caller may do depends on who it is, not on how
	// it proved it.
	AuthMode string
}

// CredentialIDKey is the key of [Caller.Extra] under which the API server
// names the credential a caller presented (a ServiceAccount token's JWT
// id): a new value for every token, so nothing that authorization depends
// on. [Caller.AccessExtra] leaves it out.
const CredentialIDKey = "authentication.kubernetes.io/credential-id"

// AccessExtra is what of c.Extra an authorization question carries: all of
// it but [CredentialIDKey]. The credential id identifies one token, for
// audit; no authorizer of the API server reads it, and a Role cannot grant
// or deny by it, so leaving it out changes no RBAC answer while letting
// every token of one identity share its answers. The rest (a bound token's
// pod name and uid, node name and uid, an OpenShift token's scopes, a
// webhook's own keys) stays, because an authorizer may narrow a grant by
// it, and dropping it could widen what a caller may do. Nil if nothing is
// left.
func (c *Caller) AccessExtra() map[string][]string {
	var out map[string][]string
	for k, v := range c.Extra {
		if k == CredentialIDKey {
			continue
		}
		if out == nil {
			out = make(map[string][]string, len(c.Extra))
		}
		out[k] = v
	}
	return out
}

// Key identifies c for authorization: its user, uid and groups (in their
// order) and [Caller.AccessExtra], hashed. Callers of one key are asked
// the same questions and get the same answers, so the gateway shares
// decisions, and what one may see of a table, between them: two tokens of
// one ServiceAccount (or of one Pod, for bound tokens) have one key.
func (c *Caller) Key() string {
	h := sha256.New()
	field := func(s string) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	field(c.User)
	field(c.UID)
	field(strconv.Itoa(len(c.Groups)))
	for _, g := range c.Groups {
		field(g)
	}
	extra := c.AccessExtra()
	keys := slices.Sorted(maps.Keys(extra))
	field(strconv.Itoa(len(keys)))
	for _, k := range keys {
		field(k)
		field(strconv.Itoa(len(extra[k])))
		for _, v := range extra[k] {
			field(v)
		}
	}
	return string(h.Sum(nil))
}

// callerKey is the key of the Caller in the MCP SDK's TokenInfo.Extra.
const callerKey = "toolplane.io/caller"

// verifyToken is the MCP SDK's token verifier: it authenticates with
// Options.Auth and hands the caller on in the request's TokenInfo, which
// the SDK passes to every method handler and, in a session, checks against
// the session's user on every request.
func (g *Gateway) verifyToken(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	c, err := g.opts.Auth.Authenticate(ctx, token)
	if err != nil {
		if errors.Is(err, ErrUnauthenticated) {
			g.metrics.authn.WithLabelValues("unauthenticated").Inc()
			return nil, fmt.Errorf("%w: %w", auth.ErrInvalidToken, err)
		}
		g.metrics.authn.WithLabelValues("error").Inc()
		g.logger.Error("Authenticating a caller failed", "error", err)
		return nil, errors.New("authentication is unavailable")
	}
	g.metrics.authn.WithLabelValues("ok").Inc()
	return &auth.TokenInfo{UserID: c.User, Extra: map[string]any{callerKey: c}}, nil
}

func callerFrom(t *auth.TokenInfo) *Caller {
	if t == nil {
		return nil
	}
	c, _ := t.Extra[callerKey].(*Caller)
	return c
}

// DefaultMaxReviewsPerRequest is the default of
// [Options.MaxReviewsPerRequest].
const DefaultMaxReviewsPerRequest = 1000

// authConcurrency bounds the authorization questions of one request in
// flight at once, and maxQuestionsInFlight those of every request: each is
// a goroutine that may wait on the review client's rate limit, so that
// many concurrent cold requests wait for a slot in their own goroutine
// rather than hold 16 each.
const (
	authConcurrency      = 16
	maxQuestionsInFlight = 128
)

// reviewBudget is how many questions one request may still ask that its
// Authorizer cannot answer from memory. Every path of one request draws
// from the same budget: the request's context carries it.
type reviewBudget struct{ left atomic.Int64 }

type budgetKey struct{}

// withReviewBudget gives ctx a budget of n questions, unless it carries
// one already.
func withReviewBudget(ctx context.Context, n int) context.Context {
	if _, ok := ctx.Value(budgetKey{}).(*reviewBudget); ok {
		return ctx
	}
	b := &reviewBudget{}
	b.left.Store(int64(n))
	return context.WithValue(ctx, budgetKey{}, b)
}

func budgetFrom(ctx context.Context, n int) *reviewBudget {
	if b, ok := ctx.Value(budgetKey{}).(*reviewBudget); ok {
		return b
	}
	b := &reviewBudget{}
	b.left.Store(int64(n))
	return b
}

// take spends one question, if any is left.
func (b *reviewBudget) take() bool { return b.left.Add(-1) >= 0 }

// permits reports whether c may call the tool at index i of s: always
// without Options.Auth; with it, a grant on every namespace, on every tool
// of the tool's namespace, or on the tool itself. A nil c (no token) may
// call nothing under auth. It asks at most three questions, within the
// request's budget.
func (g *Gateway) permits(ctx context.Context, c *Caller, s *snapshot, i int) (bool, error) {
	ok, _, err := g.decide(ctx, c, s, []int{i})
	return ok[0], err
}

// permitted decides [Gateway.permits] for each tool at idx of s; out[k]
// answers idx[k]. It asks the broad questions first (every namespace, then
// each namespace of idx), and one question per tool only in the namespaces
// that c may not call wholesale; the questions its Authorizer cannot answer
// from memory ([DecisionCache]) are bounded by the request's budget,
// [Options.MaxReviewsPerRequest]. When that is spent, out answers the
// tools decided so far (false for the rest) and the error wraps
// [ErrReviewBudget]; the answers given are kept, so a retry goes further.
// The budget is the request's when ctx carries one (withReviewBudget: the
// MCP middleware and GET /v1/tools set it), else one of its own: a handler
// that calls permitted more than once for one request should set it
// first. An Authorizer that is not a [DecisionCache] has every question
// counted, and a wrapper of [KubernetesAuth] should pass its
// DecisionCache methods on.
func (g *Gateway) permitted(ctx context.Context, c *Caller, s *snapshot, idx []int) ([]bool, error) {
	out, _, err := g.decide(ctx, c, s, idx)
	return out, err
}

// decide is [Gateway.permitted] that also says how many of idx, from the
// first, it decided: all of them unless the budget ran out (or err).
func (g *Gateway) decide(ctx context.Context, c *Caller, s *snapshot, idx []int) (out []bool, decided int, err error) {
	out = make([]bool, len(idx))
	if g.opts.Auth == nil {
		for k := range out {
			out[k] = true
		}
		return out, len(idx), nil
	}
	if c == nil || len(idx) == 0 {
		return out, len(idx), nil
	}
	ctx, end := g.authorizeSpan(ctx, len(idx))
	defer func() { end(decided, err) }()
	b := budgetFrom(ctx, g.opts.MaxReviewsPerRequest)
	q := &questions{g: g, c: c, key: c.Key(), budget: b}
	q.cache, _ = g.opts.Auth.(DecisionCache)

	// Every namespace first: one question for a caller granted all.
	all, known, err := q.ask(ctx, "", "")
	switch {
	case err != nil:
		return out, 0, err
	case !known:
		g.metrics.authzBudget.Inc()
		return out, 0, fmt.Errorf("%w (%d questions)", ErrReviewBudget, g.opts.MaxReviewsPerRequest)
	case all:
		for k := range out {
			out[k] = true
		}
		return out, len(idx), nil
	}

	// Then each namespace of idx, in the order of idx.
	nsIndex := map[string]int{}
	var namespaces []string
	for _, i := range idx {
		ns := s.table.Tools[i].ToolSet.Namespace
		if _, ok := nsIndex[ns]; !ok {
			nsIndex[ns] = len(namespaces)
			namespaces = append(namespaces, ns)
		}
	}
	nsAnswers, err := q.askAll(ctx, len(namespaces), func(j int) (string, string) { return namespaces[j], "" })
	if err != nil {
		return out, 0, err
	}
	// Then each tool of a namespace not granted wholesale.
	tool := make([]int, 0, len(idx)) // positions in idx that need their own question
	for k, i := range idx {
		a := nsAnswers[nsIndex[s.table.Tools[i].ToolSet.Namespace]]
		switch {
		case !a.known:
		case a.allowed:
			out[k] = true
		default:
			tool = append(tool, k)
		}
	}
	toolAnswers, err := q.askAll(ctx, len(tool), func(j int) (string, string) {
		t := &s.table.Tools[idx[tool[j]]]
		return t.ToolSet.Namespace, t.Name
	})
	if err != nil {
		return out, 0, err
	}
	for j, k := range tool {
		out[k] = toolAnswers[j].allowed
	}
	// The decided prefix: up to the first tool whose namespace or own
	// question went unanswered.
	unknown := make([]bool, len(idx))
	for k, i := range idx {
		if !nsAnswers[nsIndex[s.table.Tools[i].ToolSet.Namespace]].known {
			unknown[k] = true
		}
	}
	for j, k := range tool {
		if !toolAnswers[j].known {
			unknown[k] = true
		}
	}
	decided = len(idx)
	for k := range idx {
		if unknown[k] {
			decided = k
			break
		}
	}
	for k := decided; k < len(out); k++ {
		out[k] = false
	}
	if decided < len(idx) {
		g.metrics.authzBudget.Inc()
		return out, decided, fmt.Errorf("%w (%d questions)", ErrReviewBudget, g.opts.MaxReviewsPerRequest)
	}
	return out, decided, nil
}

// questions asks one request's authorization questions of one caller.
type questions struct {
	g      *Gateway
	c      *Caller
	key    string
	cache  DecisionCache // nil if the Authorizer keeps no answers
	budget *reviewBudget
}

type answer struct{ allowed, known bool }

// ask answers one question: from the Authorizer's memory if it can, else
// by asking it if the budget allows (known false if not).
func (q *questions) ask(ctx context.Context, namespace, name string) (allowed, known bool, err error) {
	if q.cache != nil {
		if ok, hit := q.cache.Cached(q.key, namespace, name); hit {
			return ok, true, nil
		}
	}
	if !q.budget.take() {
		return false, false, nil
	}
	select {
	case q.g.questionSlots <- struct{}{}:
	case <-ctx.Done():
		return false, false, ctx.Err()
	}
	defer func() { <-q.g.questionSlots }()
	ok, err := q.g.opts.Auth.Allowed(ctx, q.c, namespace, name)
	return ok, err == nil, err
}

// askAll answers n questions, those that cost a review concurrently, in
// order, until the budget is spent.
func (q *questions) askAll(ctx context.Context, n int, question func(j int) (namespace, name string)) ([]answer, error) {
	out := make([]answer, n)
	var ask []int
	for j := range n {
		ns, name := question(j)
		if q.cache != nil {
			if ok, hit := q.cache.Cached(q.key, ns, name); hit {
				out[j] = answer{allowed: ok, known: true}
				continue
			}
		}
		ask = append(ask, j)
	}
	if len(ask) == 0 {
		return out, nil
	}
	eg, ctx := errgroup.WithContext(ctx)
	eg.SetLimit(authConcurrency)
	for _, j := range ask {
		if !q.budget.take() {
			break
		}
		select {
		case q.g.questionSlots <- struct{}{}:
		case <-ctx.Done():
			if err := eg.Wait(); err != nil {
				return out, err
			}
			return out, ctx.Err()
		}
		eg.Go(func() error {
			defer func() { <-q.g.questionSlots }()
			ns, name := question(j)
			ok, err := q.g.opts.Auth.Allowed(ctx, q.c, ns, name)
			if err != nil {
				return err
			}
			out[j] = answer{allowed: ok, known: true}
			return nil
		})
	}
	return out, eg.Wait()
}

func authTokenInfo(r *http.Request) *auth.TokenInfo { return auth.TokenInfoFromContext(r.Context()) }

// maxShareRuns bounds how often one caller of [share] runs fn again after
// the callers whose runs it waited for went away.
const maxShareRuns = 3

// share runs fn once for the concurrent callers of key in g, with the ctx
// of the caller whose run it is: nothing runs on when every caller has
// gone away, so callers that connect and leave cannot pile up work. A
// caller whose wait ended because the caller running fn went away (its ctx
// canceled, this one's not) runs fn itself. shared reports whether the
// result was handed to more than one caller.
func share(ctx context.Context, g *singleflight.Group, key string, fn func(context.Context) (any, error)) (v any, err error, shared bool) {
	for range maxShareRuns {
		ch := g.DoChan(key, func() (any, error) { return fn(ctx) })
		select {
		case r := <-ch:
			if r.Err != nil && errors.Is(r.Err, context.Canceled) && ctx.Err() == nil {
				continue
			}
			return r.Val, r.Err, r.Shared
		case <-ctx.Done():
			return nil, ctx.Err(), false
		}
	}
	return nil, fmt.Errorf("%w: the requests asking the same were canceled", context.Canceled), false
}
