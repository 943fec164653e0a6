package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// ResourceMetadataPath is where the gateway serves its OAuth 2.0 protected
// resource metadata (RFC 9728): at this path for the gateway as a whole,
// and at this path followed by an endpoint's path for that endpoint
// (/.well-known/oauth-protected-resource/mcp for /mcp, …/mcp/search for
// /mcp/search, …/mcp/namespaces/crm for that view).
const ResourceMetadataPath = "/.well-known/oauth-protected-resource"

// ProtectedResource makes the gateway an OAuth 2.0 protected resource, as
// the MCP authorization specification has MCP servers be: it serves its
// metadata (RFC 9728) at [ResourceMetadataPath], and every 401 names it in
// WWW-Authenticate, so that an MCP client that has no token (an IDE, a
// desktop agent) discovers the authorization servers to get one from.
type ProtectedResource struct {
	// URL is the gateway's public base URL, as its clients reach it
	// (https://tools.example.com): an origin, with no path. A resource is
	// URL followed by an endpoint's path, and its metadata URL is URL
	// followed by ResourceMetadataPath and that path. It is configured and
	// never taken from a request's Host header, which a caller writes.
	URL string
	// AuthorizationServers are the issuers whose tokens the gateway
	// accepts: with [OIDCAuth], those of its AuthenticationConfiguration.
	AuthorizationServers []string
	// Scopes are the scopes a client should ask for (scopes_supported, and
	// scope in WWW-Authenticate): those that make the authorization server
	// issue a token the gateway accepts. Empty lists none.
	Scopes []string
}

// CheckURL reports whether u is a base URL for [ProtectedResource.URL]:
// http or https, a host, and no path, query or fragment. The metadata
// of a resource with a path lives under the origin's own well-known path
// (RFC 9728 section 3.1), which a proxy serving the gateway under a
// prefix would not route to it.
func CheckURL(u string) error {
	p, err := url.Parse(u)
	switch {
	case err != nil:
		return err
	case p.Scheme != "http" && p.Scheme != "https":
		return fmt.Errorf("%q is not an http or https URL", u)
	case p.Host == "":
		return fmt.Errorf("%q has no host", u)
	case p.Path != "" && p.Path != "/", p.RawQuery != "", p.Fragment != "", p.User != nil:
		return fmt.Errorf("%q must be an origin (scheme://host[:port]) with no path, query, fragment or user", u)
	}
	return nil
}

func (p *ProtectedResource) base() string { return strings.TrimSuffix(p.URL, "/") }

// metadataURL is the metadata URL of the resource at path, "" without
// ProtectedResource.
func (g *Gateway) metadataURL(path string) string {
	p := g.opts.ProtectedResource
	if p == nil {
		return ""
	}
	return p.base() + ResourceMetadataPath + path
}

// serveResourceMetadata serves the metadata of the gateway (at
// ResourceMetadataPath) and of each endpoint it protects (at
// ResourceMetadataPath + the endpoint's path); any other path is not a
// resource of the gateway, and is not found.
func (g *Gateway) serveResourceMetadata(w http.ResponseWriter, r *http.Request) {
	p := g.opts.ProtectedResource
	path := strings.TrimPrefix(r.URL.Path, ResourceMetadataPath)
	if path != "" && !g.protects(r, path) {
		http.NotFound(w, r)
		return
	}
	md := &oauthex.ProtectedResourceMetadata{
		Resource:               p.base() + path,
		AuthorizationServers:   p.AuthorizationServers,
		BearerMethodsSupported: []string{"header"},
		ScopesSupported:        p.Scopes,
		ResourceName:           g.opts.Name,
	}
	w.Header().Set("Cache-Control", "public, max-age=300")
	auth.ProtectedResourceMetadataHandler(md).ServeHTTP(w, r)
}

// protects reports whether path is an endpoint the gateway serves behind
// its bearer token: the mux's own answer, so that the metadata follows
// the routes, views included, and exists for no path that is not one.
func (g *Gateway) protects(r *http.Request, path string) bool {
	probe := &http.Request{Method: http.MethodGet, Host: r.Host, URL: &url.URL{Path: path}}
	_, pattern := g.mux.Handler(probe)
	return pattern != "" && !strings.Contains(pattern, "/.well-known/")
}

// verifiedKey carries the TokenInfo that requireBearer verified to the
// MCP SDK's middleware.
type verifiedKey struct{}

// requireBearer authenticates every request with Options.Auth and refuses
// those without a valid bearer token with 401 and a challenge that names
// the resource's metadata (RFC 9728 section 5.1), with
// error="invalid_token" when a token was presented (RFC 6750 section 3).
// The request then goes through the MCP SDK's own middleware, given the
// TokenInfo verified here, which puts it where the SDK's handlers read it
// (and binds a session to its user).
func (g *Gateway) requireBearer(next http.Handler) http.Handler {
	sdk := auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		if ti, ok := ctx.Value(verifiedKey{}).(*auth.TokenInfo); ok {
			return ti, nil
		}
		return nil, auth.ErrInvalidToken
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearerToken(r)
		if !ok {
			g.challenge(w, r, false, "no bearer token")
			return
		}
		ti, err := g.verifyToken(r.Context(), token, r)
		switch {
		case errors.Is(err, auth.ErrInvalidToken):
			g.challenge(w, r, true, err.Error())
			return
		case err != nil:
			w.Header().Set("Retry-After", "1")
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		sdk.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), verifiedKey{}, ti)))
	})
}

// bearerToken is the token of r's Authorization header, by the rule of
// the MCP SDK's middleware.
func bearerToken(r *http.Request) (string, bool) {
	f := strings.Fields(r.Header.Get("Authorization"))
	if len(f) != 2 || !strings.EqualFold(f[0], "bearer") {
		return "", false
	}
	return f[1], true
}

// challenge refuses r with 401 and WWW-Authenticate: Bearer, with the
// metadata URL of r's endpoint and the scopes to ask for when the gateway
// is a [ProtectedResource], and error="invalid_token" when r presented a
// token. msg is the body: what the Authenticator said of the token,
// which names no secret.
func (g *Gateway) challenge(w http.ResponseWriter, r *http.Request, invalid bool, msg string) {
	var params []string
	if u := g.metadataURL(r.URL.Path); u != "" {
		params = append(params, fmt.Sprintf("resource_metadata=%q", u))
		if s := g.opts.ProtectedResource.Scopes; len(s) > 0 {
			params = append(params, fmt.Sprintf("scope=%q", strings.Join(s, " ")))
		}
	}
	if invalid {
		params = append(params, `error="invalid_token"`)
	}
	h := "Bearer"
	if len(params) > 0 {
		h += " " + strings.Join(params, ", ")
	}
	w.Header().Set("WWW-Authenticate", h)
	http.Error(w, msg, http.StatusUnauthorized)
}
