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

// permits reports whether c may call the tool at index i of s: always
// without Options.Auth; with it, a grant on every namespace, on every tool
// of the tool's namespace, or on the tool itself. A nil c (no token) may
// call nothing under auth.
func (g *Gateway) permits(ctx context.Context, c *Caller, s *snapshot, i int) (bool, error) {
	if g.opts.Auth == nil {
		return true, nil
	}
	if c == nil {
		return false, nil
	}
	t := &s.table.Tools[i]
	for _, q := range [][2]string{{"", ""}, {t.ToolSet.Namespace, ""}, {t.ToolSet.Namespace, t.Name}} {
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

// permitted decides [Gateway.permits] for each tool at idx of s,
// concurrently; out[k] answers idx[k].
func (g *Gateway) permitted(ctx context.Context, c *Caller, s *snapshot, idx []int) ([]bool, error) {
	out := make([]bool, len(idx))
	if g.opts.Auth == nil {
		for k := range out {
			out[k] = true
		}
		return out, nil
	}
	eg, ctx := errgroup.WithContext(ctx)
	eg.SetLimit(authConcurrency)
	for k, i := range idx {
		eg.Go(func() error {
			ok, err := g.permits(ctx, c, s, i)
			out[k] = ok
			return err
		})
	}
	return out, eg.Wait()
}

func authTokenInfo(r *http.Request) *auth.TokenInfo { return auth.TokenInfoFromContext(r.Context()) }
