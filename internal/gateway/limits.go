package gateway

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"golang.org/x/sync/semaphore"
)

// The bounds on what one client can make the gateway hold, applied in
// [Gateway.ServeHTTP] and [Gateway.Listener] in front of every endpoint,
// so that an endpoint added to the mux inherits them. See
// docs/operations.md for what each costs at the chart's defaults.

// Reasons a request or connection is refused, as the refused metric counts
// them.
const (
	refusedBatch             = "batch"
	refusedBodyMemory        = "body_memory"
	refusedConns             = "connections"
	refusedConnsPerClient    = "connections_per_client"
	refusedStreams           = "streams"
	refusedStreamsPerClient  = "streams_per_client"
	refusedSessions          = "sessions"
	refusedSessionsPerClient = "sessions_per_client"
	refusedResultMemory      = "result_memory"
	refusedLists             = "lists"
	refusedStreamsPerCaller  = "streams_per_caller"
	refusedSessionsPerCaller = "sessions_per_caller"
)

// methodListen opens a 2026-era notification stream.
const methodListen = "subscriptions/listen"

// isMCPPath reports whether path is served by the MCP handlers: /mcp and
// everything under /mcp/, views and endpoints added later alike.
func isMCPPath(path string) bool { return path == MCPPath || strings.HasPrefix(path, MCPPath+"/") }

// clientKey is the address a request or connection comes from, without
// its port: the unit of the per-client bounds.
func clientKey(remoteAddr string) string {
	if host, _, err := net.SplitHostPort(remoteAddr); err == nil {
		return host
	}
	return remoteAddr
}

// serveBounded applies the per-request bounds and serves r with next:
//   - every response gets a write deadline, extended on each write, so that
//     a client that does not read is dropped;
//   - an MCP POST's body is read within the body memory budget, and a
//     JSON-RPC batch is refused before the SDK sees it;
//   - a notification stream (subscriptions/listen, or a session's GET)
//     takes a stream slot and ends at the stream lifetime.
func (g *Gateway) serveBounded(w http.ResponseWriter, r *http.Request, next http.Handler) {
	w = &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), timeout: g.opts.WriteTimeout}
	if !isMCPPath(r.URL.Path) {
		next.ServeHTTP(w, r)
		return
	}
	client := clientKey(r.RemoteAddr)
	stream := r.Method == http.MethodGet
	var method string
	if r.Method == http.MethodPost {
		body, held, err := g.bodies.read(r.Context(), http.MaxBytesReader(w, r.Body, g.opts.MaxBodyBytes), r.ContentLength, g.opts.MaxBodyBytes)
		defer g.bodies.release(held)
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			rpcError(w, http.StatusRequestEntityTooLarge, codeInvalidRequest, fmt.Sprintf("the request body is over the gateway's limit of %d bytes", g.opts.MaxBodyBytes))
			return
		case errors.Is(err, errBudget):
			g.metrics.refused.WithLabelValues(refusedBodyMemory).Inc()
			w.Header().Set("Retry-After", "1")
			rpcError(w, http.StatusServiceUnavailable, codeServerBusy, "the gateway is reading too many request bodies at once; retry")
			return
		case err != nil:
			rpcError(w, http.StatusBadRequest, codeInvalidRequest, "the request body could not be read")
			return
		}
		msg := bytes.TrimLeft(body, " \t\r\n")
		if len(msg) > 0 && msg[0] == '[' {
			// No supported protocol era needs a batch (2025-06-18 dropped
			// them), and one batch of tools/list calls multiplies a 64 KiB
			// request into hundreds of megabytes of answer.
			g.metrics.refused.WithLabelValues(refusedBatch).Inc()
			rpcError(w, http.StatusBadRequest, codeInvalidRequest, "JSON-RPC batches are not supported: send one message per request")
			return
		}
		// The method as the SDK reads it: with its decoder, which matches
		// "method" exactly (encoding/json would take a later "Method" for
		// it, and the bounds below would follow a method the SDK never
		// serves).
		var params json.RawMessage
		note := &requestNote{body: body}
		if req := readRequest(msg); req != nil {
			method, params = req.Method, req.Params
			note.req = req
		}
		stream = method == methodListen
		markTaskRequest(r, method, params) // tasks.go
		r = r.WithContext(context.WithValue(r.Context(), requestNoteKey{}, note))
		r.Body = newBodyReader(body)
		r.ContentLength = int64(len(body))
	}
	r.Header.Del(requestHeader)
	r.Header.Set(clientHeader, client)
	if method == "tools/list" {
		// A page is up to PageSize tools, encoded twice by the SDK, and
		// held until a client that may not read has been written to.
		if err := acquireWithin(r.Context(), g.lists, 1); err != nil {
			g.metrics.refused.WithLabelValues(refusedLists).Inc()
			w.Header().Set("Retry-After", "1")
			rpcError(w, http.StatusServiceUnavailable, codeServerBusy, "the gateway is answering too many tools/list requests at once; retry")
			return
		}
		defer g.lists.Release(1)
	}
	if !stream && r.Method == http.MethodPost {
		// The results this request's calls read stay charged to the
		// results' budget until its answer is written: the SDK encodes a
		// result twice more after the call returns it.
		l := &ledger{}
		id := rand.Text()
		g.ledgers.Store(id, l)
		r.Header.Set(requestHeader, id)
		defer func() {
			g.ledgers.Delete(id)
			g.results.release(l.take())
		}()
	}
	if stream {
		if reason := g.streams.acquire(client); reason != "" {
			g.metrics.refused.WithLabelValues(reason).Inc()
			w.Header().Set("Retry-After", "10")
			rpcError(w, http.StatusTooManyRequests, codeServerBusy, "too many notification streams are open (from your address, or at the gateway); close one or retry later")
			return
		}
		g.metrics.streams.Inc()
		defer func() {
			g.streams.release(client)
			g.metrics.streams.Dec()
		}()
		// A stream ends at its lifetime; the client opens a new one, as
		// after any stream the server closes.
		c, cancel := context.WithTimeout(r.Context(), g.opts.StreamLifetime)
		defer cancel()
		r = r.WithContext(context.WithValue(c, streamKey{}, true))
	}
	next.ServeHTTP(w, r)
}

// bodyReader is a request's body that serveBounded has read, as the
// handlers after it read it: io.NopCloser around a bytes.Reader, in one
// allocation rather than two.
type bodyReader struct{ bytes.Reader }

func newBodyReader(body []byte) *bodyReader {
	b := &bodyReader{}
	b.Reset(body)
	return b
}

func (*bodyReader) Close() error { return nil }

// requestNote is serveBounded's note of an MCP POST, in its request's
// context: the body it read, and the JSON-RPC request in it as the SDK
// decodes it (nil if it is none), for the handlers that answer a request
// before the SDK (serveTaskMethod, serveFastCall) and need not decode it
// again.
type requestNote struct {
	body []byte
	req  *jsonrpc.Request
}

type requestNoteKey struct{}

// noteOf returns r's note; an empty one if serveBounded made none.
func noteOf(r *http.Request) *requestNote {
	if n, ok := r.Context().Value(requestNoteKey{}).(*requestNote); ok {
		return n
	}
	return &requestNote{}
}

// streamKey marks the context of a notification stream's request, for
// the per-caller bound that applies once the caller is authenticated.
type streamKey struct{}

func isStream(ctx context.Context) bool { v, _ := ctx.Value(streamKey{}).(bool); return v }

// boundKeyOf is the unit of the per-caller bounds: an authenticated
// caller's user name, whatever token or address it comes with; "" without
// authentication.
func boundKeyOf(r *http.Request) string {
	if c := callerFrom(authTokenInfo(r)); c != nil {
		return "user:" + c.User
	}
	return ""
}

// acquireCallerStream takes a per-caller stream slot for an authenticated
// stream; it answers 429 and returns false if the caller is at its bound.
func (g *Gateway) acquireCallerStream(w http.ResponseWriter, r *http.Request) (release func(), ok bool) {
	key := boundKeyOf(r)
	if key == "" || !isStream(r.Context()) {
		return func() {}, true
	}
	if reason := g.callerStreams.acquire(key); reason != "" {
		g.metrics.refused.WithLabelValues(reason).Inc()
		w.Header().Set("Retry-After", "10")
		rpcError(w, http.StatusTooManyRequests, codeServerBusy, "too many notification streams are open for you; close one or retry later")
		return nil, false
	}
	return func() { g.callerStreams.release(key) }, true
}

// requestHeader carries the id of a request's ledger from serveBounded to
// the MCP method handlers, which see the request's header; it replaces
// whatever a client sent.
const requestHeader = "Toolplane-Gateway-Request"

// clientHeader carries a request's client address (clientKey) from
// serveBounded to the MCP method handlers, for the per-caller call limit
// without auth and the audit log; it replaces whatever a client sent.
const clientHeader = "Toolplane-Gateway-Client"

// ledger holds what a request's calls have charged to the results' budget.
type ledger struct {
	mu   sync.Mutex
	held int64
}

func (l *ledger) add(n int64) {
	l.mu.Lock()
	l.held += n
	l.mu.Unlock()
}

func (l *ledger) take() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.held
	l.held = 0
	return n
}

// ledgerOf returns the ledger of the request whose header h is, or nil.
func (g *Gateway) ledgerOf(h http.Header) *ledger {
	if id := h.Get(requestHeader); id != "" {
		if l, ok := g.ledgers.Load(id); ok {
			return l.(*ledger)
		}
	}
	return nil
}

// JSON-RPC error codes the bounds answer with.
const (
	codeInvalidRequest = -32600
	// codeServerBusy is in the range JSON-RPC reserves for servers.
	codeServerBusy = -32000
)

// rpcError answers with a JSON-RPC error that has no id, as for a request
// that could not be read.
func rpcError(w http.ResponseWriter, status, code int, message string) {
	b := rpcErrorBody(code, message)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// rpcErrorBody is a JSON-RPC error response without an id.
func rpcErrorBody(code int, message string) []byte {
	b, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"id":      nil,
		"error":   map[string]any{"code": code, "message": message},
	})
	return b
}

// deadlineWriter sets the connection's write deadline to timeout from now
// before each write and flush: a response, or a stream, that the client
// keeps reading never hits it, and one whose client stopped reading fails
// its write and the connection is closed.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (w *deadlineWriter) extend() { _ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout)) }

func (w *deadlineWriter) WriteHeader(code int) {
	w.extend()
	w.ResponseWriter.WriteHeader(code)
}

func (w *deadlineWriter) Write(b []byte) (int, error) {
	w.extend()
	return w.ResponseWriter.Write(b)
}

// FlushError is what [http.ResponseController.Flush] calls.
func (w *deadlineWriter) FlushError() error {
	w.extend()
	return w.rc.Flush()
}

func (w *deadlineWriter) Flush() { _ = w.FlushError() }

// Unwrap gives [http.ResponseController] the writer underneath.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// counter counts what each client holds, against a per-client and a total
// bound.
type counter struct {
	mu                    sync.Mutex
	total, max, perClient int
	byClient              map[string]int
	// reasons name the bounds, for the refused metric.
	reasonTotal, reasonPerClient string
}

func newCounter(maxTotal, perClient int, reasonTotal, reasonPerClient string) *counter {
	return &counter{max: maxTotal, perClient: perClient, byClient: map[string]int{},
		reasonTotal: reasonTotal, reasonPerClient: reasonPerClient}
}

// acquire takes one for client, or says which bound it is at.
func (c *counter) acquire(client string) (refused string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.total >= c.max:
		return c.reasonTotal
	case c.byClient[client] >= c.perClient:
		return c.reasonPerClient
	}
	c.total++
	c.byClient[client]++
	return ""
}

func (c *counter) release(client string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total--
	if c.byClient[client]--; c.byClient[client] <= 0 {
		delete(c.byClient, client)
	}
}

// errBudget is a read refused because the budget it draws on is spent.
var errBudget = errors.New("memory budget spent")

// budget bounds the bytes that reads in flight hold together: request
// bodies, or workloads' results. A read waits for its first chunk (within
// budgetWait) and takes the rest without waiting or fails, so that reads
// that each hold part of the budget never wait on each other. A read
// holds at most twice what it has read: a declared length is not
// reserved ahead of the bytes, so a client or workload that declares a
// megabyte and sends a byte a second holds one chunk.
type budget struct {
	sem         *semaphore.Weighted
	size, first int64
}

// budgetWait bounds how long a read waits for its first chunk.
const budgetWait = 5 * time.Second

// acquireWithin takes n of sem, waiting within budgetWait (and ctx) for
// them. What is free without waiting is taken without the wait's timer
// and context, which every call would otherwise pay for twice (its
// request body and its result) on the hot path; a context already done
// takes nothing, as Acquire would not.
func acquireWithin(ctx context.Context, sem *semaphore.Weighted, n int64) error {
	if ctx.Err() == nil && sem.TryAcquire(n) {
		return nil
	}
	c, cancel := context.WithTimeout(ctx, budgetWait)
	defer cancel()
	return sem.Acquire(c, n)
}

// The first chunk of a request body, and of a workload's reply: a
// request body's is small, since every connection may hold one while its
// client sends slowly (--max-conns of them are 4 MiB).
const (
	firstBodyChunk   = 4 << 10
	firstResultChunk = 16 << 10
)

func newBudget(size, first int64) *budget {
	return &budget{sem: semaphore.NewWeighted(size), size: size, first: first}
}

// read reads r whole, at most limit bytes (a longer r fails: the caller
// bounds r, as with [http.MaxBytesReader], or checks len > limit), with
// the bytes it holds reserved from the budget; release held when the bytes
// are no longer needed, also after an error. hint is the expected length,
// or -1: a shorter one is reserved at once.
func (b *budget) read(ctx context.Context, r io.Reader, hint, limit int64) (data []byte, held int64, err error) {
	want := b.first
	if hint >= 0 {
		want = min(want, hint+1) // the +1 sees the end without another reservation
	}
	want = min(want, limit+1, b.size)
	if err := acquireWithin(ctx, b.sem, want); err != nil {
		if ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
		return nil, 0, errBudget
	}
	held = want
	buf := make([]byte, 0, want)
	for {
		if int64(len(buf)) == held {
			more := min(held, limit+1-held, b.size-held)
			if more <= 0 || !b.sem.TryAcquire(more) {
				if more <= 0 && held > limit {
					// Read one byte past the limit: the caller sees it.
					return buf, held, nil
				}
				return nil, held, errBudget
			}
			held += more
			grown := make([]byte, len(buf), held)
			copy(grown, buf)
			buf = grown
		}
		n, rerr := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if rerr == io.EOF {
			return buf, held, nil
		}
		if rerr != nil {
			return nil, held, rerr
		}
	}
}

func (b *budget) release(n int64) {
	if n > 0 {
		b.sem.Release(n)
	}
}

// Listener returns l with the connection bounds of [Options.MaxConns] and
// [Options.MaxConnsPerClient]: a connection over either is answered, with
// nothing of it served, 503 (over MaxConns) or 429 (over
// MaxConnsPerClient) with Retry-After and Connection: close, so that a
// client sees a status it can retry on, never a reset. Serve the gateway's
// [http.Server] on it. [Gateway.TLSListener] is the same over TLS.
func (g *Gateway) Listener(l net.Listener) net.Listener { return g.TLSListener(l, nil) }

// TLSListener is [Gateway.Listener] serving TLS with cfg (plain TCP when cfg
// is nil), as [tls.NewListener] does: connections are counted as accepted,
// before any handshake, and one over a bound is answered over TLS too.
func (g *Gateway) TLSListener(l net.Listener, cfg *tls.Config) net.Listener {
	return &limitListener{Listener: l, g: g, tls: cfg,
		conns:    newCounter(g.opts.MaxConns, g.opts.MaxConnsPerClient, refusedConns, refusedConnsPerClient),
		refusing: make(chan struct{}, maxRefusing)}
}

// The refusal of a connection over a bound costs a goroutine, a buffer and,
// over TLS, a handshake, for refuseTimeout at most: at most maxRefusing are
// answered at once, and a connection beyond those (a flood, not a client)
// is closed as it is accepted. A refusal reads the request's header (at
// most maxRefusedHeader bytes) and what body arrives within the time,
// answers (within the time again), and closes only when the client has
// closed too, or at the timeout: a connection closed with a request unread would be reset, and
// the client would lose the answer with it.
const (
	maxRefusing      = 64
	refuseTimeout    = 2 * time.Second
	maxRefusedHeader = 64 << 10
)

type limitListener struct {
	net.Listener
	g        *Gateway
	tls      *tls.Config
	conns    *counter
	refusing chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		client := clientKey(c.RemoteAddr().String())
		if reason := l.conns.acquire(client); reason != "" {
			l.g.metrics.refused.WithLabelValues(reason).Inc()
			select {
			case l.refusing <- struct{}{}:
				go func() {
					defer func() { <-l.refusing }()
					l.refuse(c, reason)
				}()
			default:
				_ = c.Close()
			}
			continue
		}
		l.g.metrics.conns.Inc()
		var conn net.Conn = &limitConn{Conn: c, release: func() {
			l.conns.release(client)
			l.g.metrics.conns.Dec()
		}}
		if l.tls != nil {
			conn = tls.Server(conn, l.tls)
		}
		return conn, nil
	}
}

// refuse answers the request on c, a connection over the bound reason,
// with a status and a JSON-RPC error (as the other bounds do), and closes
// c.
func (l *limitListener) refuse(c net.Conn, reason string) {
	raw := c
	defer func() { _ = raw.Close() }()
	_ = c.SetDeadline(time.Now().Add(refuseTimeout))
	if l.tls != nil {
		tc := tls.Server(c, l.tls)
		if err := tc.Handshake(); err != nil {
			return
		}
		c = tc
	}
	br := bufio.NewReaderSize(io.LimitReader(c, maxRefusedHeader), 4<<10)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	// The body, as far as it comes in time and within MaxBodyBytes, so
	// that the close does not reset the connection under the answer; a
	// client that expects 100-continue sends none until told to.
	if !strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
		_, _ = io.Copy(io.Discard, io.LimitReader(req.Body, l.g.opts.MaxBodyBytes))
	}
	// The answer gets its own time, however long the body took.
	_ = c.SetDeadline(time.Now().Add(refuseTimeout))
	status, why := http.StatusTooManyRequests, "too many connections are open from your address; reuse one, or retry later"
	if reason == refusedConns {
		status, why = http.StatusServiceUnavailable, "the gateway holds as many connections as it may; retry later"
	}
	body := rpcErrorBody(codeServerBusy, why)
	resp := &http.Response{StatusCode: status, ProtoMajor: 1, ProtoMinor: 1, Close: true,
		Header:        http.Header{"Content-Type": {"application/json"}, "X-Content-Type-Options": {"nosniff"}, "Retry-After": {"1"}},
		ContentLength: int64(len(body)), Body: io.NopCloser(bytes.NewReader(body))}
	if err := resp.Write(c); err != nil {
		return
	}
	// Half-close, then wait for the client's close (or the deadline):
	// whatever it still sends is read and dropped.
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(c, l.g.opts.MaxBodyBytes))
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// meteredTransport charges the response bodies of one MCP call to the
// results' budget as they are read, as [budget.read] does for a toolkit
// workload's reply, so that MCP sources share the budget: the Go SDK's
// client reads and decodes them, where the gateway cannot hold the bytes.
// What it reserved is held until the caller releases it.
type meteredTransport struct {
	base http.RoundTripper
	b    *budget

	mu    sync.Mutex
	held  int64
	spent bool
	read  int64 // bytes of replies read, for the audit log
}

// bytesRead is how many bytes of replies the call has read.
func (t *meteredTransport) bytesRead() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.read
}

func (t *meteredTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err == nil {
		resp.Body = &meteredBody{ReadCloser: resp.Body, t: t, ctx: req.Context()}
	}
	return resp, err
}

// reserve takes n more bytes: the call's first reservation waits within
// budgetWait, later ones fail at once when the budget is spent.
func (t *meteredTransport) reserve(ctx context.Context, n int64) error {
	t.mu.Lock()
	first := t.held == 0
	t.mu.Unlock()
	var err error
	if first {
		err = acquireWithin(ctx, t.b.sem, n)
	} else if !t.b.sem.TryAcquire(n) {
		err = errBudget
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		t.spent = true
		return errBudget
	}
	t.held += n
	return nil
}

// take returns what the call holds, and whether the budget refused it more.
func (t *meteredTransport) take() (held int64, spent bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	held, t.held = t.held, 0
	return held, t.spent
}

// wasSpent reports whether the budget refused the call more.
func (t *meteredTransport) wasSpent() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.spent
}

type meteredBody struct {
	io.ReadCloser
	t     *meteredTransport
	ctx   context.Context
	avail int64 // reserved and not read yet
}

func (m *meteredBody) Read(p []byte) (int, error) {
	if need := int64(len(p)) - m.avail; need > 0 {
		need = min(max(need, m.t.b.first), m.t.b.size)
		if err := m.t.reserve(m.ctx, need); err != nil {
			return 0, err
		}
		m.avail += need
	}
	n, err := m.ReadCloser.Read(p[:min(int64(len(p)), m.avail)])
	m.avail -= int64(n)
	m.t.mu.Lock()
	m.t.read += int64(n)
	m.t.mu.Unlock()
	return n, err
}
