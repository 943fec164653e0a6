package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The gateway reaches a task at its backend over MCP, with the methods of
// the 2025-11-25 tasks utility, which the Go SDK's client does not have:
// the SDK's Streamable HTTP transport carries the JSON-RPC messages (and
// reads a JSON or an event-stream answer), and the gateway writes and
// reads the messages themselves with the SDK's jsonrpc package.
//
// A task of a 2025 server with sessions belongs to the session it was
// created in (the TypeScript SDK's task store, for one, looks a task up
// in its session only): the gateway keeps that session open, seals its id
// into the task's id, and sends later requests for the task in it. The
// session ends at the backend's own session timeout; the gateway never
// deletes it, since any replica may still be polled for the task.

// taskProtocol is the protocol version the gateway asks a backend for:
// the first with tasks.
const taskProtocol = "2025-11-25"

// taskConn is one conversation with a backend about a task.
type taskConn struct {
	conn mcp.Connection
	rt   *taskTransport
	next atomic.Int64
}

// taskTransport adds what every request to the backend carries: the
// call's header (trace context, the ToolSet's token, the Txn-Token), the
// backend session, and the protocol version. It keeps the session to
// itself, so that the SDK's connection never ends it, and bounds each
// reply to limit bytes.
type taskTransport struct {
	base   http.RoundTripper
	header http.Header
	limit  int64

	mu      sync.Mutex
	session string
	version string
	over    bool
}

func (t *taskTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range t.header {
		if req.Header.Get(k) == "" {
			req.Header[k] = v
		}
	}
	t.mu.Lock()
	session, version := t.session, t.version
	t.mu.Unlock()
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	if version != "" {
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		t.mu.Lock()
		if t.session == "" {
			t.session = sid
		}
		t.mu.Unlock()
		resp.Header.Del("Mcp-Session-Id")
	}
	resp.Body = &limitedBody{ReadCloser: resp.Body, left: t.limit, t: t}
	return resp, nil
}

func (t *taskTransport) sessionID() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.session
}

func (t *taskTransport) tooLarge() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.over
}

var errReplyTooLarge = errors.New("the reply is over the gateway's limit")

// limitedBody fails a reply past its bytes.
type limitedBody struct {
	io.ReadCloser
	left int64
	t    *taskTransport
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		b.t.mu.Lock()
		b.t.over = true
		b.t.mu.Unlock()
		return 0, errReplyTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// dialTask opens a conversation about a task with the MCP server at url,
// through client, with the header out. A new task's (fresh) begins with
// an initialize, whose answer says whether the server keeps sessions;
// a later one goes on in session, the one the task belongs to, or, for a
// server that gave none (stateless, which cannot require an initialize
// it would not remember), without one.
func (g *Gateway) dialTask(ctx context.Context, client *http.Client, url string, out http.Header, session string, fresh bool) (*taskConn, error) {
	hc := *client
	rt := &taskTransport{base: hc.Transport, header: out, limit: g.opts.MaxResultBytes, session: session}
	if rt.base == nil {
		rt.base = http.DefaultTransport
	}
	hc.Transport = rt
	transport := &mcp.StreamableClientTransport{
		Endpoint: url, HTTPClient: &hc,
		MaxRetries: -1, DisableStandaloneSSE: true,
		MaxEventSize: int(min(g.opts.MaxResultBytes, 1<<30)),
	}
	conn, err := transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	tc := &taskConn{conn: conn, rt: rt}
	if !fresh {
		rt.version = taskProtocol
		return tc, nil
	}
	raw, err := tc.call(ctx, "initialize", &mcp.InitializeParams{
		ProtocolVersion: taskProtocol,
		ClientInfo:      &mcp.Implementation{Name: g.opts.Name, Version: g.opts.Version},
		Capabilities:    &mcp.ClientCapabilities{},
	})
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	var ir struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(raw, &ir)
	if ir.ProtocolVersion == "" {
		_ = conn.Close()
		return nil, errors.New("the MCP server's initialize result has no protocolVersion")
	}
	rt.mu.Lock()
	rt.version = ir.ProtocolVersion
	rt.mu.Unlock()
	note, err := jsonrpc2Notification("notifications/initialized", map[string]any{})
	if err == nil {
		err = conn.Write(ctx, note)
	}
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	return tc, nil
}

func jsonrpc2Notification(method string, params any) (*jsonrpc.Request, error) {
	b, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	return &jsonrpc.Request{Method: method, Params: b}, nil
}

// call sends the request method with params and returns its result as the
// backend sent it, or its error: a *jsonrpc.Error for a JSON-RPC error.
// Notifications the backend sends meanwhile are dropped; a request of the
// backend's (elicitation, sampling) is answered with an error, since no
// client is there to answer it.
func (c *taskConn) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	b, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	id, err := jsonrpc.MakeID(float64(c.next.Add(1)))
	if err != nil {
		return nil, err
	}
	if err := c.conn.Write(ctx, &jsonrpc.Request{ID: id, Method: method, Params: b}); err != nil {
		return nil, c.failed(err)
	}
	for range maxTaskMessages {
		msg, err := c.conn.Read(ctx)
		if err != nil {
			return nil, c.failed(err)
		}
		switch m := msg.(type) {
		case *jsonrpc.Response:
			if m.ID != id {
				continue
			}
			if m.Error != nil {
				var we *jsonrpc.Error
				if errors.As(m.Error, &we) {
					return nil, we
				}
				return nil, m.Error
			}
			return m.Result, nil
		case *jsonrpc.Request:
			if m.IsCall() {
				_ = c.conn.Write(ctx, &jsonrpc.Response{ID: m.ID, Error: &jsonrpc.Error{
					Code: jsonrpc.CodeMethodNotFound, Message: "the gateway does not pass requests of a task's backend on",
				}})
			}
		}
	}
	return nil, fmt.Errorf("the MCP server sent more than %d messages without answering %s", maxTaskMessages, method)
}

// maxTaskMessages bounds the messages read for one request to a backend.
const maxTaskMessages = 1000

func (c *taskConn) failed(err error) error {
	if c.rt.tooLarge() {
		return errReplyTooLarge
	}
	return err
}

// close ends the conversation; the session, if any, stays (see above).
func (c *taskConn) close() { _ = c.conn.Close() }
