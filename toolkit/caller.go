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
type Caller struct {
	// Subject identifies the caller, for example a token's subject.
	Subject string
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
