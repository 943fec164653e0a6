package discovery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	segmentjson "github.com/segmentio/encoding/json"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// callMCP calls a tool of an MCP server other than toolkit (an entry of
// protocol MCP) with tools/call under its source name, and returns the
// server's result, content blocks of every type included.
func (c *Client) callMCP(ctx context.Context, tool *spec.TableTool, endpoint string, body []byte) (*spec.CallResult, error) {
	// An MCP server binds the arguments itself, strictly: what is not a
	// JSON object cannot be sent as one.
	if t := bytes.TrimSpace(body); !json.Valid(t) || len(t) == 0 || t[0] != '{' {
		return nil, fmt.Errorf("%w: tool %s: the arguments are not a JSON object", ErrBadRequest, tool.Name)
	}
	caller := MCPCaller{HTTPClient: c.httpClient(), MaxResponseBytes: c.MaxResponseBytes}
	res, err := caller.Call(ctx, endpoint, tool.SourceName, body)
	if err != nil {
		return nil, fmt.Errorf("discovery: calling tool %s over MCP: %w", tool.Name, err)
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

// MCPCaller calls tools of MCP servers with tools/call over Streamable HTTP,
// through the official Go SDK client: server/discover and the call for a
// stateless 2026-07-28 server, or initialize, the call and a closing DELETE
// for a 2025 one, which keeps a session only for the call. It is what
// [Client.Call] uses for entries of protocol MCP, and what the toolplane
// gateway routes such calls with. Its zero value is ready to use.
type MCPCaller struct {
	// HTTPClient makes the requests, whose CheckRedirect is replaced: a
	// redirect fails with ErrRedirect instead of being followed. Nil means
	// http.DefaultClient.
	HTTPClient *http.Client
	// Header is sent with every request, as trace context is.
	Header http.Header
	// MaxResponseBytes bounds the response bodies of one call together;
	// zero means DefaultMaxResponseBytes.
	MaxResponseBytes int64

	// What the server says while the call runs, for a caller that passes
	// it on (a gateway to its own client): nil fields ask for nothing, and
	// the server is not asked for it. See relay.go.

	// Progress, if set, asks for progress with a progress token of the
	// caller's own, and receives each notifications/progress of the call,
	// in the order sent, before Call returns.
	Progress func(context.Context, *mcp.ProgressNotificationParams)
	// Log, with LogLevel, asks for log messages at LogLevel and above
	// (logging/setLevel for a 2025 server, the request's _meta for a
	// 2026-07-28 one) and receives each notifications/message of the call,
	// in the order sent, before Call returns.
	Log      func(context.Context, *mcp.LoggingMessageParams) //nolint:staticcheck // logging is deprecated in 2026-07-28, and still served
	LogLevel mcp.LoggingLevel                                 //nolint:staticcheck // as above
	// Elicit and Sample, if set, declare the elicitation and sampling
	// capabilities and answer the server's requests for them: a 2025
	// server's, sent during the call, and the input requests of a
	// 2026-07-28 server's input_required result, after which the call is
	// retried with the answers (up to the SDK's bound of rounds), unless
	// KeepInputRequests.
	Elicit func(context.Context, *mcp.ElicitParams) (*mcp.ElicitResult, error)
	Sample func(context.Context, *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) //nolint:staticcheck // sampling is deprecated in 2026-07-28, and still served
	// KeepInputRequests returns a 2026-07-28 server's input_required result
	// as it is, for a caller that passes it on to a client of that era.
	KeepInputRequests bool
}

// Call calls the tool name of the MCP server at endpoint with args, a JSON
// object sent as it is. Every HTTP exchange of the call, the SDK's closing
// DELETE included, is bound to ctx. A result, isError or not, is returned as
// the server sent it. A JSON-RPC error (an unknown tool, say) is an error
// wrapping *jsonrpc.Error where the SDK keeps it; a reply past
// MaxResponseBytes wraps ErrResponseTooLarge, and a redirect ErrRedirect.
func (m *MCPCaller) Call(ctx context.Context, endpoint, name string, args json.RawMessage) (*mcp.CallToolResult, error) {
	return m.CallTool(ctx, endpoint, &mcp.CallToolParams{Name: name, Arguments: args})
}

// CallTool is [MCPCaller.Call] with every parameter of tools/call: _meta
// (a progress token in it is replaced when Progress is set), and a retry's
// inputResponses and requestState. params.Arguments, when a
// json.RawMessage, is sent as it is.
func (m *MCPCaller) CallTool(ctx context.Context, endpoint string, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	ctx, cancel := valueless(ctx)
	defer cancel()
	limit := m.MaxResponseBytes
	if limit <= 0 {
		limit = DefaultMaxResponseBytes
	}
	hc := http.Client{}
	if m.HTTPClient != nil {
		hc = *m.HTTPClient
	}
	rt := &boundTransport{base: hc.Transport, ctx: ctx, header: m.Header, left: limit}
	if rt.base == nil {
		rt.base = http.DefaultTransport
	}
	hc.Transport = rt
	hc.CheckRedirect = refuseRedirect
	transport := &mcp.StreamableClientTransport{
		Endpoint:   endpoint,
		HTTPClient: &hc,
		// One call: no reconnection, and no stream for notifications.
		MaxRetries:           -1,
		DisableStandaloneSSE: true,
		MaxEventSize:         int(min(limit, 1<<30)),
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "toolplane-discovery", Version: "v1alpha1"}, m.clientOptions())
	fail := func(err error) error {
		if rt.tooLarge() {
			return fmt.Errorf("%w: more than %d bytes", ErrResponseTooLarge, limit)
		}
		if redirect := rt.redirect(); redirect != nil {
			return redirect
		}
		return err
	}
	cs, err := cl.Connect(ctx, transport, nil)
	if err != nil {
		return nil, fail(err)
	}
	defer func() { _ = cs.Close() }()
	p := *params
	if args, ok := p.Arguments.(json.RawMessage); p.Arguments == nil || ok && (len(bytes.TrimSpace(args)) == 0 || string(args) == "null") {
		p.Arguments = json.RawMessage("{}")
	}
	m.prepare(ctx, cs, &p)
	res, err := cs.CallTool(ctx, &p)
	// Close waits until the notifications read before the result have been
	// handled, which the SDK does on a goroutine of its own.
	_ = cs.Close()
	if err != nil {
		return nil, fail(err)
	}
	if raw := rt.structuredContent(); res.StructuredContent != nil && raw != nil {
		res.StructuredContent = raw
	}
	return res, nil
}

// boundTransport carries the HTTP exchanges of one MCP call. It binds each
// to the call's context (the SDK detaches its closing DELETE from it), and
// bounds their response bodies together.
type boundTransport struct {
	base   http.RoundTripper
	ctx    context.Context
	header http.Header

	mu       sync.Mutex
	left     int64
	exceeded bool
	redirErr error
	// callID and reply are the JSON-RPC id of the tools/call request and
	// the body answering it, and replyType that body's media type, kept to
	// read structuredContent as sent: the SDK decodes it into any, which
	// rounds an integer past 2^53.
	callID    jsonrpc.ID
	reply     *bytes.Buffer
	replyType string
}

func (t *boundTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.ctx.Err(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(req.Context())
	stop := context.AfterFunc(t.ctx, cancel)
	req = req.Clone(ctx)
	reply := t.keepReply(req)
	for k, v := range t.header {
		if req.Header.Get(k) == "" {
			req.Header[k] = v
		}
	}
	resp, err := t.base.RoundTrip(req)
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
	if reply != nil {
		t.mu.Lock()
		t.replyType = baseMediaType(resp.Header.Get("Content-Type"))
		t.mu.Unlock()
	}
	resp.Body = &boundBody{rc: resp.Body, t: t, reply: reply, done: func() { stop(); cancel() }}
	return resp, nil
}

// keepReply returns the buffer the body answering req is kept in if req is
// the tools/call request, or nil. The SDK posts a body it can replay.
func (t *boundTransport) keepReply(req *http.Request) *bytes.Buffer {
	if req.Method != http.MethodPost || req.GetBody == nil {
		return nil
	}
	body, err := req.GetBody()
	if err != nil {
		return nil
	}
	defer func() { _ = body.Close() }()
	b, err := io.ReadAll(body)
	if err != nil {
		return nil
	}
	msg, err := jsonrpc.DecodeMessage(b)
	call, ok := msg.(*jsonrpc.Request)
	if err != nil || !ok || call.Method != "tools/call" || !call.IsCall() {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.callID, t.reply = call.ID, new(bytes.Buffer)
	return t.reply
}

// structuredContent is the structuredContent of the tools/call reply as the
// server sent it, or nil. It reads the reply as the SDK's client does:
// by its media type one JSON-RPC message, or a stream of server-sent
// events; of those, the first response whose id is the call's, each
// message decoded by the SDK's own decoder (so a request that reuses the
// id, an event of another name or an id of another spelling is passed over
// as the SDK passes it over).
func (t *boundTransport) structuredContent() json.RawMessage {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.reply == nil {
		return nil
	}
	var msgs [][]byte
	switch t.replyType {
	case "application/json":
		msgs = [][]byte{t.reply.Bytes()}
	case "text/event-stream":
		msgs = sseMessages(t.reply.Bytes())
	}
	for _, m := range msgs {
		msg, err := jsonrpc.DecodeMessage(m)
		if err != nil {
			// The SDK fails the call here.
			return nil
		}
		if resp, ok := msg.(*jsonrpc.Response); ok && resp.ID == t.callID {
			return RawStructuredContent(resp.Result)
		}
	}
	return nil
}

// RawStructuredContent is the structuredContent member of a tools/call
// result (the JSON-RPC response's result), as sent, or nil when it is
// absent, null or not valid UTF-8. The SDK decodes structuredContent into
// any, which rounds an integer past 2^53; this keeps its bytes. It finds
// the member as the SDK does, with the SDK's decoder: by its exact name,
// the last if it is given twice. (encoding/json would take
// "StructuredContent" too.) It allocates for the value alone, however many
// members the result has. Where it returns nil for invalid UTF-8, the
// SDK's value (with U+FFFD in its place) is the one to hand on.
func RawStructuredContent(result []byte) json.RawMessage {
	var r struct {
		StructuredContent json.RawMessage `json:"structuredContent"`
	}
	if _, err := segmentjson.Parse(result, &r, segmentjson.DontMatchCaseInsensitiveStructFields); err != nil ||
		len(r.StructuredContent) == 0 || string(r.StructuredContent) == "null" || !utf8.Valid(r.StructuredContent) {
		return nil
	}
	return r.StructuredContent
}

// sseMessages returns the data of the events of a text/event-stream body
// that the SDK's client reads as messages: those named "message" or not
// named, with data. As the SDK, it trims a data line's spaces, joins an
// event's data lines with newlines, and stops at a line with no colon
// (where the SDK fails the stream).
func sseMessages(body []byte) [][]byte {
	var (
		msgs    [][]byte
		name    string
		data    []byte
		hasData bool
	)
	end := func() {
		if len(data) > 0 && (name == "" || name == "message") {
			msgs = append(msgs, data)
		}
		name, data, hasData = "", nil, false
	}
	for line := range bytes.Lines(body) {
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			end()
			continue
		}
		field, value, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			return msgs
		}
		switch string(field) {
		case "event":
			name = string(bytes.TrimSpace(value))
		case "data":
			if hasData {
				data = append(data, '\n')
			}
			data, hasData = append(data, bytes.TrimSpace(value)...), true
		}
	}
	end()
	return msgs
}

// baseMediaType is the media type of a Content-Type, without parameters,
// or "" if it does not parse: as the SDK's client reads it.
func baseMediaType(value string) string {
	mediaType, _, err := mime.ParseMediaType(value)
	if err != nil {
		return ""
	}
	return mediaType
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
	rc    io.ReadCloser
	t     *boundTransport
	reply *bytes.Buffer // nil but for the tools/call reply
	once  sync.Once
	done  func()
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
	if b.reply != nil {
		b.reply.Write(p[:n])
	}
	return n, err
}

func (b *boundBody) Close() error {
	err := b.rc.Close()
	b.once.Do(b.done)
	return err
}

// valueless returns a context with ctx's deadline and cancellation and
// none of its values. A gateway calls from inside an MCP server's handler,
// whose context carries the SDK's values for the request it serves (its
// protocol version among them), which the SDK's client would otherwise
// read as its own: a 2026-07-28 client's call would send a 2025 server an
// initialize that claims 2026-07-28.
func valueless(ctx context.Context) (context.Context, context.CancelFunc) {
	out, cancelDeadline := context.Background(), context.CancelFunc(func() {})
	if d, ok := ctx.Deadline(); ok {
		// A deadline of its own, so that the call ends with
		// context.DeadlineExceeded as it would have.
		out, cancelDeadline = context.WithDeadline(out, d)
	}
	out, cancel := context.WithCancelCause(out)
	stop := context.AfterFunc(ctx, func() {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			cancel(context.Cause(ctx))
		}
	})
	return out, func() { stop(); cancel(context.Canceled); cancelDeadline() }
}
