package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"golang.org/x/sync/errgroup"
)

// Auth authenticates the callers of a [Gateway] and authorizes their tools.
// [KubernetesAuth] does it with TokenReview and SubjectAccessReview.
type Auth interface {
	// Authenticate returns the caller who presented the bearer token. A
	// token that is not valid gives an error wrapping
	// [ErrUnauthenticated]; any other error means the answer is unknown.
	Authenticate(ctx context.Context, token string) (*Caller, error)
	// Allowed reports whether c may call the tool published as name by a
	// ToolSet in namespace. An empty name asks whether c may call every
	// tool of namespace, and an empty namespace (with an empty name)
	// whether c may call every tool of every namespace: the gateway asks
	// those first, so that a broad grant costs one question, not one per
	// tool.
	Allowed(ctx context.Context, c *Caller, namespace, name string) (bool, error)
}

// ErrUnauthenticated means a caller presented no valid token.
var ErrUnauthenticated = errors.New("gateway: unauthenticated")

// Caller is an authenticated caller, as the API server's TokenReview
// describes it.
type Caller struct {
	User   string
	UID    string
	Groups []string
	Extra  map[string][]string
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

// allowed decides whether c may call one tool: a grant on every namespace,
// on every tool of the namespace, or on the tool itself.
func (g *Gateway) allowed(ctx context.Context, c *Caller, namespace, name string) (bool, error) {
	if c == nil {
		return false, nil
	}
	for _, q := range [][2]string{{"", ""}, {namespace, ""}, {namespace, name}} {
		ok, err := g.opts.Auth.Allowed(ctx, c, q[0], q[1])
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

// authConcurrency bounds the authorization questions of one request in
// flight at once.
const authConcurrency = 16

// allowedAll decides allowed for the tools at idx of s, concurrently.
func (g *Gateway) allowedAll(ctx context.Context, c *Caller, s *snapshot, idx []int) ([]bool, error) {
	out := make([]bool, len(idx))
	eg, ctx := errgroup.WithContext(ctx)
	eg.SetLimit(authConcurrency)
	for k, i := range idx {
		t := &s.table.Tools[i]
		eg.Go(func() error {
			ok, err := g.allowed(ctx, c, t.ToolSet.Namespace, t.Name)
			out[k] = ok
			return err
		})
	}
	return out, eg.Wait()
}

func authTokenInfo(r *http.Request) *auth.TokenInfo { return auth.TokenInfoFromContext(r.Context()) }
