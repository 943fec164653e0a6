package gateway

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/singleflight"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// BackendCredentials are what the calls to one ToolSet's workload carry
// besides the call: the ToolSet's own credentials, never a caller's.
type BackendCredentials struct {
	// BearerToken, if set, is sent as "Authorization: Bearer <token>" with
	// every request of a call to the ToolSet's endpoint, and only over
	// https: a call whose endpoint is http is refused with an isError
	// result instead.
	BearerToken string
	// TLS, if set, verifies the ToolSet's https endpoint: its RootCAs,
	// ServerName and InsecureSkipVerify are used. Nil means the system
	// roots, verified against the Service's name.
	TLS *tls.Config
	// TLSKey identifies TLS (the CA bundle by its digest, never a secret),
	// so that the gateway keeps the ToolSet's client, and its connections,
	// until TLS changes. Empty with TLS set builds a new client on every
	// read.
	TLSKey string
}

// Credentials gives the credentials of a ToolSet's workload. Its errors
// must name what could not be read (a Secret by name, a key), never a
// secret's value: they reach the caller and the logs.
type Credentials interface {
	BackendCredentials(ctx context.Context, toolSet spec.ObjectReference) (*BackendCredentials, error)
}

// CredentialsFunc adapts a function to [Credentials].
type CredentialsFunc func(ctx context.Context, toolSet spec.ObjectReference) (*BackendCredentials, error)

// BackendCredentials calls f.
func (f CredentialsFunc) BackendCredentials(ctx context.Context, toolSet spec.ObjectReference) (*BackendCredentials, error) {
	return f(ctx, toolSet)
}

// Bounds of the credentials cache.
const (
	// maxBackends bounds the ToolSets whose credentials and clients are
	// kept; the table's ToolSets are far fewer in any real cluster, and
	// entries of ToolSets that leave the table are dropped with it.
	maxBackends = 4096
	// credentialsTimeout bounds one read of a ToolSet's credentials,
	// shared by the calls that wait for it.
	credentialsTimeout = 10 * time.Second
	// backendIdleConns bounds the idle connections of a ToolSet's own
	// client (one with TLS settings of its own).
	backendIdleConns = 8
	// maxTLSBackends bounds the ToolSets whose own clients (and CA pools,
	// each at most credentials.MaxCABytes of PEM) are kept at once: past it, the one
	// that expires first is dropped, and read again on its next call.
	maxTLSBackends = 128
)

// backend is how one call reaches its ToolSet's workload: with the
// ToolSet's token and client, resolved for this call and carried in its
// context to backendHeader and the round trip.
type backend struct {
	toolSet spec.ObjectReference
	token   string
	// client is the ToolSet's own, with its TLS trust; nil means the
	// gateway's shared one.
	client *http.Client
	// probe is set on the one call that probes a half-open circuit.
	probe bool
	// transport is the call's own (forCall), nil on the cached backend.
	transport *callTransport
}

// route decides how a call of tool reaches route, its endpoint, under a
// span of its own: not at all while the ToolSet's circuit is open, and
// with the ToolSet's credentials where it has some. Without a backend, the
// outcome and detail say why.
func (g *Gateway) route(ctx context.Context, tool *spec.TableTool, route string) (*backend, string, string) {
	if g.noSpans {
		return g.routeBackend(ctx, tool, route)
	}
	ctx, span := g.startSpan(ctx, "route "+tool.Name, trace.SpanKindInternal,
		attrToolName.String(tool.Name), attrToolSet.String(tool.ToolSet.String()))
	b, outcome, detail := g.routeBackend(ctx, tool, route)
	endSpan(span, outcome, detail)
	return b, outcome, detail
}

func (g *Gateway) routeBackend(ctx context.Context, tool *spec.TableTool, route string) (*backend, string, string) {
	ok, probe, why := g.circuits.admit(tool.ToolSet)
	if !ok {
		return nil, outcomeCircuitOpen, why
	}
	b := backend{toolSet: tool.ToolSet}
	if g.backends != nil {
		got, err := g.backends.get(ctx, tool.ToolSet, route)
		if err != nil {
			if probe {
				g.circuits.record(tool.ToolSet, true, callNeutral)
			}
			return nil, outcomeCredentials, err.Error()
		}
		b = *got
	}
	b.probe = probe
	return b.forCall(route, g.client), "", ""
}

// hostOf is route's host, for spans.
func hostOf(route string) string {
	if u, err := url.Parse(route); err == nil {
		return u.Hostname()
	}
	return ""
}

type backendKey struct{}

func withBackend(ctx context.Context, b *backend) context.Context {
	return context.WithValue(ctx, backendKey{}, b)
}

func backendFrom(ctx context.Context) *backend {
	b, _ := ctx.Value(backendKey{}).(*backend)
	return b
}

// clientFor is the client of the call in ctx: its ToolSet's own, or def.
func clientFor(ctx context.Context, def *http.Client) *http.Client {
	if b := backendFrom(ctx); b != nil && b.client != nil {
		return b.client
	}
	return def
}

// redact removes the call's token from s, which a workload's error reply
// could have echoed into a detail that is logged and shown to the caller.
// A text in which the token still shows once replaced (spelled against
// the mark: "…]x" of a token "]x" next to "[redacted]") is the mark alone:
// nothing of it is safe to show. So redact never returns the token, and
// running it twice changes nothing.
func (b *backend) redact(s string) string {
	if b == nil || b.token == "" || !strings.Contains(s, b.token) {
		return s
	}
	return b.cleared(strings.ReplaceAll(s, b.token, redactedMark))
}

// cleared is s, redacted, or the mark alone if the token still shows.
func (b *backend) cleared(s string) string {
	if strings.Contains(s, b.token) {
		return redactedMark
	}
	return s
}

// clipRedacted is clip(b.redact(s), n) without redacting more of s than
// the n bytes kept need: the token is redacted before s is cut, so a
// token the cut would split is never half shown.
func (b *backend) clipRedacted(s string, n int) string {
	if b == nil || b.token == "" {
		return clip(s, n)
	}
	var out strings.Builder
	for out.Len() <= n {
		i := strings.Index(s, b.token)
		if i < 0 {
			out.WriteString(s[:min(len(s), n+1-out.Len())])
			break
		}
		// What comes before the token holds none: it may be cut.
		out.WriteString(s[:min(i, n+1-out.Len())])
		out.WriteString(redactedMark)
		s = s[i+len(b.token):]
	}
	return b.cleared(clip(out.String(), n))
}

// backends keeps each ToolSet's credentials and client for
// Options.CredentialsTTL, reads them once for all the calls that need them
// at the same time, and forgets the ToolSets that leave the table.
type backends struct {
	src    Credentials
	ttl    time.Duration
	maxTLS int
	base   *http.Client
	now    func() time.Time
	flight singleflight.Group

	mu sync.Mutex
	m  map[spec.ObjectReference]*backendEntry
}

type backendEntry struct {
	b       *backend
	err     error
	tlsKey  string
	expires time.Time
}

func newBackends(src Credentials, ttl time.Duration, base *http.Client) *backends {
	return &backends{src: src, ttl: ttl, maxTLS: maxTLSBackends, base: base, now: time.Now, m: map[spec.ObjectReference]*backendEntry{}}
}

// get returns how to call route, the endpoint of a tool of toolSet, or an
// error that says, for the caller, why it cannot be called.
func (bs *backends) get(ctx context.Context, toolSet spec.ObjectReference, route string) (*backend, error) {
	b, err := bs.lookup(ctx, toolSet)
	if err != nil {
		return nil, err
	}
	if b.token != "" && !strings.HasPrefix(route, "https://") {
		return nil, fmt.Errorf("its ToolSet sends a bearer token (spec.authorization) and its endpoint is %s: "+
			"the gateway sends a token only over https (set spec.service.scheme to https)", schemeOf(route))
	}
	return b, nil
}

func schemeOf(route string) string {
	if u, err := url.Parse(route); err == nil && u.Scheme != "" {
		return u.Scheme
	}
	return "not https"
}

func (bs *backends) lookup(ctx context.Context, toolSet spec.ObjectReference) (*backend, error) {
	if e := bs.fresh(toolSet); e != nil {
		return e.b, e.err
	}
	// The read is shared by every call that waits for it, so it is not
	// bound to the first one's cancellation, only to its own timeout; each
	// call waits for it only within its own.
	ch := bs.flight.DoChan(toolSet.String(), func() (any, error) {
		// A read that ended between this call's look and its flight has
		// stored what it read: reading again would cost the Secret's
		// owner a read per call that came in that moment.
		if e := bs.fresh(toolSet); e != nil {
			return e, nil
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), credentialsTimeout)
		defer cancel()
		creds, err := bs.src.BackendCredentials(rctx, toolSet)
		return bs.store(toolSet, creds, err), nil
	})
	select {
	case r := <-ch:
		e := r.Val.(*backendEntry)
		return e.b, e.err
	case <-ctx.Done():
		return nil, fmt.Errorf("reading its ToolSet's credentials: %w", ctx.Err())
	}
}

// fresh returns the entry kept for toolSet, if its TTL has not passed.
func (bs *backends) fresh(toolSet spec.ObjectReference) *backendEntry {
	bs.mu.Lock()
	e := bs.m[toolSet]
	bs.mu.Unlock()
	if e != nil && bs.now().Before(e.expires) {
		return e
	}
	return nil
}

// store keeps what a read gave, building the ToolSet's client anew only
// when its TLS settings changed, and returns the entry.
func (bs *backends) store(toolSet spec.ObjectReference, creds *BackendCredentials, err error) *backendEntry {
	now := bs.now()
	e := &backendEntry{expires: now.Add(bs.ttl)}
	if err != nil {
		e.err = fmt.Errorf("reading its ToolSet's credentials: %w", err)
		e.expires = now.Add(bs.ttl / 5)
	} else {
		e.b = &backend{toolSet: toolSet}
		if creds != nil {
			e.b.token = creds.BearerToken
			if creds.TLS != nil {
				e.tlsKey = creds.TLSKey
			}
		}
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	old := bs.m[toolSet]
	if e.b != nil && creds != nil && creds.TLS != nil {
		if old != nil && old.b != nil && old.b.client != nil && old.tlsKey == e.tlsKey && e.tlsKey != "" {
			e.b.client = old.b.client
		} else {
			bs.makeTLSRoomLocked(toolSet)
			e.b.client = bs.newClient(creds.TLS)
		}
	}
	if old != nil && old.b != nil && old.b.client != nil && (e.b == nil || e.b.client != old.b.client) {
		old.b.client.CloseIdleConnections()
	}
	if old == nil && len(bs.m) >= maxBackends {
		bs.evictLocked(now)
	}
	bs.m[toolSet] = e
	return e
}

// newClient is the gateway's workload client with cfg's trust: the same
// dialer, bounds and redirect rule, idle connections of its own.
func (bs *backends) newClient(cfg *tls.Config) *http.Client {
	c := *bs.base
	if tr, ok := bs.base.Transport.(*http.Transport); ok {
		tr = tr.Clone()
		tr.TLSClientConfig = cfg.Clone()
		if tr.TLSClientConfig.MinVersion == 0 {
			tr.TLSClientConfig.MinVersion = tls.VersionTLS12
		}
		tr.MaxIdleConnsPerHost = min(tr.MaxIdleConnsPerHost, backendIdleConns)
		c.Transport = tr
	}
	return &c
}

// makeTLSRoomLocked drops the entries with clients of their own that
// expire first, but that of toolSet, until one more fits in maxTLS.
func (bs *backends) makeTLSRoomLocked(toolSet spec.ObjectReference) {
	for {
		var (
			victim spec.ObjectReference
			first  time.Time
			n      int
		)
		for ref, e := range bs.m {
			if ref == toolSet || e.b == nil || e.b.client == nil {
				continue
			}
			if n == 0 || e.expires.Before(first) {
				victim, first = ref, e.expires
			}
			n++
		}
		if n < bs.maxTLS {
			return
		}
		bs.dropLocked(victim)
	}
}

// evictLocked drops the entry that expires first, to make room.
func (bs *backends) evictLocked(now time.Time) {
	var (
		victim spec.ObjectReference
		first  time.Time
		found  bool
	)
	for ref, e := range bs.m {
		if !found || e.expires.Before(first) {
			victim, first, found = ref, e.expires, true
		}
		if e.expires.Before(now) {
			break
		}
	}
	if found {
		bs.dropLocked(victim)
	}
}

func (bs *backends) dropLocked(ref spec.ObjectReference) {
	if e := bs.m[ref]; e != nil && e.b != nil && e.b.client != nil {
		e.b.client.CloseIdleConnections()
	}
	delete(bs.m, ref)
}

// retain forgets every ToolSet not in keep: a ToolSet that left the table
// has no calls, and its token is not held longer than needed.
func (bs *backends) retain(keep map[spec.ObjectReference][]int) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	for ref := range bs.m {
		if _, ok := keep[ref]; !ok {
			bs.dropLocked(ref)
		}
	}
}

func (bs *backends) closeIdle() {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	for _, e := range bs.m {
		if e.b != nil && e.b.client != nil {
			e.b.client.CloseIdleConnections()
		}
	}
}

// errTokenElsewhere is a request that would carry a ToolSet's token to an
// endpoint other than the call's own https one. backendHeader and the
// route checks keep it from happening; callTransport makes sure.
var errTokenElsewhere = errors.New("gateway: refusing to send a ToolSet's token anywhere but its own https endpoint")

// callTransport carries the requests of one call. With a token, every
// request must go over https to the call's own host. It keeps the first
// error status the workload answered with, so that a server that refuses
// the call (401, 503) is told from one that cannot be reached: the MCP
// SDK reports both as a failed request.
type callTransport struct {
	base  http.RoundTripper
	host  string
	token bool

	status atomic.Int32
}

func (t *callTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.token && req.Header.Get("Authorization") != "" && (req.URL.Scheme != "https" || !strings.EqualFold(req.URL.Host, t.host)) {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, errTokenElsewhere
	}
	resp, err := t.base.RoundTrip(req)
	if err == nil && resp.StatusCode >= 400 {
		t.status.CompareAndSwap(0, int32(resp.StatusCode))
	}
	return resp, err
}

// forCall returns b for one call to route: a copy whose client's transport
// is a callTransport of its own.
func (b *backend) forCall(route string, def *http.Client) *backend {
	// The host bounds where the ToolSet's token may go; without a token
	// nothing reads it, and parsing route was a call's third URL parse.
	host := ""
	if b.token != "" {
		if u, err := url.Parse(route); err == nil {
			host = u.Host
		}
	}
	base := b.client
	if base == nil {
		base = def
	}
	cb := &callBackend{backend: *b, client: *base}
	rt := cb.client.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	cb.transport.base, cb.transport.host, cb.transport.token = rt, host, b.token != ""
	cb.client.Transport = &cb.transport
	cb.backend.client, cb.backend.transport = &cb.client, &cb.transport
	return &cb.backend
}

// callBackend is what forCall makes for one call, in one allocation where
// it was three: the backend, its client, and the client's transport.
type callBackend struct {
	backend
	client    http.Client
	transport callTransport
}

// refused turns a call the workload refused with an HTTP error status into
// a bad reply that says so; the SDK's error for it reads as if the server
// were unreachable, and a refusal must not count against its circuit.
func (b *backend) refused(outcome, detail string) (string, string) {
	if b.transport == nil || outcome != outcomeUnreachable {
		return outcome, detail
	}
	if st := int(b.transport.status.Load()); st != 0 {
		return outcomeBadReply, fmt.Sprintf("the workload answered HTTP %d %s", st, http.StatusText(st))
	}
	return outcome, detail
}

// redactResult is res with b's token replaced wherever a workload echoed
// it (a debugging tool that shows the header it got, say): the token lets
// its holder call the workload past the gateway's authorization, so no
// caller may see it. A result whose text cannot be redacted in place, or
// whose redaction would be over limit bytes (a short token's every
// occurrence made ten bytes long), is withheld.
func (b *backend) redactResult(res *mcp.CallToolResult, limit int64) *mcp.CallToolResult {
	if b == nil || b.token == "" || res == nil {
		return res
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return res
	}
	red, ok := b.redactJSON(raw, limit)
	if ok && len(red) == len(raw) && bytes.Equal(red, raw) {
		return res
	}
	var out mcp.CallToolResult
	if !ok || json.Unmarshal(red, &out) != nil {
		return errorResult(withheldResult)
	}
	return &out
}

// redactJSON is raw, a JSON value, with b's token replaced in every string
// (object keys included) as a client decodes it; or raw itself, the same
// slice, when none holds the token. The token is looked for in the decoded
// strings, not only the bytes: JSON may write any character as an escape
// (an encoder writes "+" as "\u002B", "/" as "\/", "&" as "\u0026"), and a
// client decodes it back.
//
// It is one pass over the bytes: structure, numbers and every string that
// holds no escape, no invalid UTF-8 and not the token are copied as they
// are, so each copy of a member written twice is redacted where it stands,
// and nothing is decoded into values. ok is false, and the value is to be
// withheld, when raw is not JSON, when its redaction would be over limit
// bytes, or when the token's bytes are still in it (outside any string,
// say).
func (b *backend) redactJSON(raw []byte, limit int64) (red []byte, ok bool) {
	if b == nil || b.token == "" {
		return raw, true
	}
	tok := []byte(b.token)
	if !bytes.Contains(raw, tok) && bytes.IndexByte(raw, '\\') < 0 {
		return raw, true
	}
	if !json.Valid(raw) {
		return nil, false
	}
	var out []byte // nil until a string changes
	last := 0
	size := int64(len(raw)) // the redacted value's size, as far as known
	for i := 0; i < len(raw); i++ {
		if raw[i] != '"' {
			continue
		}
		// raw is valid JSON: a quote outside a string opens one, and
		// the next quote not escaped closes it.
		j := i + 1
		for raw[j] != '"' {
			if raw[j] == '\\' {
				j++
			}
			j++
		}
		lit := raw[i : j+1]
		i = j
		if bytes.IndexByte(lit, '\\') < 0 && !bytes.Contains(lit, tok) && utf8.Valid(lit) {
			continue
		}
		var str string
		if json.Unmarshal(lit, &str) != nil {
			return nil, false
		}
		n := strings.Count(str, b.token)
		if n == 0 {
			continue
		}
		// Counted before the string is built: a short token's every
		// occurrence made ten bytes long would build many times the
		// limit first.
		if grow := int64(len(redactedMark) - len(b.token)); grow > 0 && size+int64(n)*grow > limit {
			return nil, false
		}
		q, err := json.Marshal(b.redact(str))
		if err != nil {
			return nil, false
		}
		if size += int64(len(q) - len(lit)); size > limit {
			return nil, false
		}
		if out == nil {
			out = make([]byte, 0, size)
		}
		out = append(append(out, raw[last:i+1-len(lit)]...), q...)
		last = i + 1
	}
	red = raw
	if out != nil {
		red = append(out, raw[last:]...)
	}
	if bytes.Contains(red, tok) {
		return nil, false
	}
	return red, true
}

// withheldResult is the text of a result withheld for the ToolSet's token.
const withheldResult = "the workload's result carried its ToolSet's credentials, and the gateway withheld it"

// redactedMark replaces a ToolSet's token.
const redactedMark = "[redacted]"
