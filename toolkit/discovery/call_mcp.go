package discovery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// callMCP calls a tool of an MCP server other than toolkit (an entry of
// protocol MCP) with tools/call under its source name, through the official
// Go SDK client: server/discover for a stateless 2026-07-28 server, or
// initialize, the call and a closing DELETE for a 2025 one. Every HTTP
// exchange of the call is bound to ctx, refuses redirects, and counts
// against MaxResponseBytes together. The result is the server's, content
// blocks of every type included.
func (c *Client) callMCP(ctx context.Context, tool *spec.TableTool, body []byte) (*spec.CallResult, error) {
	// An MCP server binds the arguments itself, strictly: what is not a
	// JSON object cannot be sent as one.
	if t := bytes.TrimSpace(body); !json.Valid(t) || len(t) == 0 || t[0] != '{' {
		return nil, fmt.Errorf("%w: tool %s: the arguments are not a JSON object", ErrBadRequest, tool.Name)
	}
	limit := c.MaxResponseBytes
	if limit <= 0 {
		limit = DefaultMaxResponseBytes
	}
	hc := http.Client{}
	if c.HTTPClient != nil {
		hc = *c.HTTPClient
	}
	rt := &boundTransport{base: hc.Transport, ctx: ctx, left: limit}
	if rt.base == nil {
		rt.base = http.DefaultTransport
	}
	hc.Transport = rt
	hc.CheckRedirect = refuseRedirect
	transport := &mcp.StreamableClientTransport{
		Endpoint:   tool.Endpoints.MCP,
		HTTPClient: &hc,
		// One call: no reconnection, and no stream for notifications.
		MaxRetries:           -1,
		DisableStandaloneSSE: true,
		MaxEventSize:         int(min(limit, 1<<30)),
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "toolplane-discovery", Version: "v1alpha1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{},
	})
	fail := func(err error) error {
		if rt.tooLarge() {
			return fmt.Errorf("%w: tool %s replied with more than %d bytes", ErrResponseTooLarge, tool.Name, limit)
		}
		if redirect := rt.redirect(); redirect != nil {
			return fmt.Errorf("discovery: calling tool %s: %w", tool.Name, redirect)
		}
		return fmt.Errorf("discovery: calling tool %s over MCP: %w", tool.Name, err)
	}
	cs, err := cl.Connect(ctx, transport, nil)
	if err != nil {
		return nil, fail(err)
	}
	defer func() { _ = cs.Close() }()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool.SourceName, Arguments: json.RawMessage(body)})
	if err != nil {
		return nil, fail(err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("discovery: encoding reply of tool %s: %w", tool.Name, err)
	}
	var out spec.CallResult
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("discovery: decoding reply of tool %s: %w", tool.Name, err)
	}
	if out.Content == nil {
		out.Content = []spec.Content{}
	}
	return &out, nil
}

// boundTransport carries the HTTP exchanges of one MCP call. It binds each
// to the call's context (the SDK detaches its closing DELETE from it), and
// bounds their response bodies together.
type boundTransport struct {
	base http.RoundTripper
	ctx  context.Context

	mu       sync.Mutex
	left     int64
	exceeded bool
	redirErr error
}

func (t *boundTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.ctx.Err(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(req.Context())
	stop := context.AfterFunc(t.ctx, cancel)
	resp, err := t.base.RoundTrip(req.Clone(ctx))
	if err != nil {
		stop()
		cancel()
		return nil, err
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 && resp.Header.Get("Location") != "" {
		t.mu.Lock()
		t.redirErr = fmt.Errorf("%w: HTTP %d to %s", ErrRedirect, resp.StatusCode, resp.Header.Get("Location"))
		t.mu.Unlock()
	}
	resp.Body = &boundBody{rc: resp.Body, t: t, done: func() { stop(); cancel() }}
	return resp, nil
}

func (t *boundTransport) tooLarge() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.exceeded
}

func (t *boundTransport) redirect() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.redirErr
}

// boundBody is a response body that counts against the call's bytes.
type boundBody struct {
	rc   io.ReadCloser
	t    *boundTransport
	once sync.Once
	done func()
}

var errBodyTooLarge = errors.New("discovery: response body too large")

func (b *boundBody) Read(p []byte) (int, error) {
	b.t.mu.Lock()
	left := b.t.left
	b.t.mu.Unlock()
	// At most one byte past the limit, to tell a larger body apart.
	if int64(len(p)) > left+1 {
		p = p[:max(left+1, 0)]
	}
	n, err := b.rc.Read(p)
	b.t.mu.Lock()
	defer b.t.mu.Unlock()
	b.t.left -= int64(n)
	if b.t.left < 0 {
		b.t.exceeded = true
		return 0, errBodyTooLarge
	}
	return n, err
}

func (b *boundBody) Close() error {
	err := b.rc.Close()
	b.once.Do(b.done)
	return err
}
