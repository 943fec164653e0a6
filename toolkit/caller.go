package toolkit

import (
	"context"
	"net/http"
	"slices"
)

// Caller is what a transport knows about who is calling: the HTTP invoke
// handler and the MCP server put it into the call's context with
// [WithCaller], and [RequireScopes], [Authorize] and tools read it with
// [CallerFrom].
//
// Behind the toolplane gateway, a server that verifies the gateway's
// transaction tokens (server.Options.TxnToken) sets Subject, Groups and
// RequestID from a token it verified, and from nothing else.
type Caller struct {
	// Subject identifies the caller, for example a token's subject: for a
	// call through the gateway, the user the gateway authenticated (a
	// ServiceAccount's "system:serviceaccount:<namespace>:<name>", or an
	// OIDC user as the gateway maps it).
	Subject string
	// Groups are the groups of Subject, as the party that vouched for it
	// names them (for a call through the gateway, as the API server or
	// the gateway's OIDC claim mapping gave them). Nil when nobody did.
	Groups []string
	// RequestID identifies the call at the party that vouched for
	// Subject: for a call through the gateway, the transaction token's
	// txn claim, which the gateway's own logs carry too.
	RequestID string
	// Scopes are the scopes granted to the caller.
	Scopes []string
	// Header holds the request's HTTP headers, when there was one.
	Header http.Header
}

// HasScopes reports whether the caller holds every one of scopes.
func (c Caller) HasScopes(scopes ...string) bool {
	for _, s := range scopes {
		if !slices.Contains(c.Scopes, s) {
			return false
		}
	}
	return true
}

type callerKey struct{}

// WithCaller returns a context that carries c.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the caller that ctx carries, if any.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}
