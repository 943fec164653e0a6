package controllers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// maxMCPPages bounds the tools/list pages of one scrape, whatever the tools
// they hold: a server that hands out cursors forever (empty pages included)
// fails at this bound, not at the timeout alone. A lower limits.maxTools
// lowers it: a list within the limit needs no more than one page a tool,
// and the last.
const maxMCPPages = 1000

// scrapeErrReply is the metric reason of an MCP reply that is no valid
// JSON-RPC or MCP result.
const scrapeErrReply = "invalid_reply"

// listMCP lists the tools of one MCP server with the official Go SDK client
// over Streamable HTTP, within the timeout: server/discover for a stateless
// 2026-07-28 server, or initialize, tools/list and a closing DELETE for a
// 2025 one (the SDK negotiates which). It follows the pages of tools/list to
// the end, within limits.maxTools and as many pages, and holds every HTTP
// exchange of the scrape together to the scraper's response size.
//
// An MCP server has no revision and no conditional GET: the revision is
// spec.Revision of the normalised list, and an unchanged list returns prev
// itself, so that the round reuses its assembly and writes nothing.
func (s *scraper) listMCP(ctx context.Context, c *http.Client, t scrapeTarget, target string, prev *spec.Document) (*spec.Document, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	// The replies and what they decode to are charged to the budget as they
	// are read, and held until the document is assembled.
	charge := s.budget.charge(ctx)
	defer charge.release()
	rt := &mcpRoundTripper{base: c.Transport, ctx: ctx, limit: s.maxBytes, left: s.maxBytes, decodeLimit: s.decodeLimit(), charge: charge}
	if t.creds != nil {
		rt.token = t.creds.BearerToken
	}
	hc := &http.Client{
		Transport: rt,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			err := c.CheckRedirect(req, via)
			if err != nil {
				rt.fail(err)
			}
			return err
		},
	}
	transport := &mcp.StreamableClientTransport{
		Endpoint:   target,
		HTTPClient: hc,
		// A scrape is one short exchange: no reconnection, and no stream
		// for notifications that nobody would read.
		MaxRetries:           -1,
		DisableStandaloneSSE: true,
		MaxEventSize:         int(min(s.maxBytes, 1<<30)),
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "toolplane-operator", Version: "v1alpha1"}, &mcp.ClientOptions{
		// The operator only lists: it offers the server nothing to call back.
		Capabilities: &mcp.ClientCapabilities{},
	})
	cs, err := cl.Connect(ctx, transport, nil)
	if err != nil {
		return nil, rt.classify(ctx, target, "connecting", err)
	}
	// Close ends a 2025 session with a DELETE, still within the timeout
	// through rt; a stateless session has nothing to end.
	defer func() { _ = cs.Close() }()

	tools, err := listAllTools(ctx, cs, int(t.spec.Limits.MaxTools))
	if err != nil {
		if se, ok := errors.AsType[*scrapeError](err); ok {
			return nil, scrapeFailure(se.reason, fmt.Errorf("MCP %s: %w", target, se.err))
		}
		return nil, rt.classify(ctx, target, "tools/list", err)
	}
	rt.addExecutions(tools)
	toolValues.share(tools)
	doc := &spec.Document{SchemaVersion: spec.SchemaVersion, Tools: tools}
	if res := cs.InitializeResult(); res != nil && res.ServerInfo != nil {
		doc.Server = spec.Server{Name: truncate(res.ServerInfo.Name, maxStatusNameLen), Version: truncate(res.ServerInfo.Version, maxStatusNameLen)}
	}
	if res := cs.InitializeResult(); res != nil && res.Capabilities != nil {
		doc.Extensions = extensionNames(res.Capabilities.Extensions)
	}
	// Stable, as in ParseDocument: a name served twice stays twice, for
	// assemble to reject.
	slices.SortStableFunc(doc.Tools, func(a, b spec.Tool) int { return strings.Compare(a.Name, b.Name) })
	doc.Revision = spec.Revision(doc.Tools)
	if prev != nil && prev.Revision == doc.Revision && prev.Server == doc.Server && slices.Equal(prev.Extensions, doc.Extensions) {
		return prev, nil
	}
	return doc, nil
}

// extensionNames are the names of the extensions a server advertises,
// sorted: its settings are not kept (the gateway advertises its own for
// what it relays), and a hostile server's list is held to
// spec.MaxExtensions valid names; the rest are dropped.
func extensionNames(ext map[string]any) []string {
	var names []string
	for name := range ext {
		if spec.ValidExtensionName(name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	if len(names) > spec.MaxExtensions {
		names = names[:spec.MaxExtensions]
	}
	return names
}

// listAllTools follows tools/list from the first page to the last.
func listAllTools(ctx context.Context, cs *mcp.ClientSession, maxTools int) ([]spec.Tool, error) {
	tools := []spec.Tool{}
	params := &mcp.ListToolsParams{}
	maxPages := maxMCPPages
	if maxTools > 0 {
		maxPages = min(maxPages, maxTools+1)
	}
	for page := 1; ; page++ {
		if page > maxPages {
			return nil, scrapeFailure(scrapeErrTooMany, fmt.Errorf("tools/list gave more than %d pages", maxPages))
		}
		res, err := cs.ListTools(ctx, params)
		if err != nil {
			return nil, err
		}
		for _, mt := range res.Tools {
			tools = append(tools, fromMCPTool(mt))
		}
		if maxTools > 0 && len(tools) > maxTools {
			return nil, scrapeFailure(scrapeErrTooMany, fmt.Errorf("more than limits.maxTools %d tools by page %d of tools/list", maxTools, page))
		}
		if res.NextCursor == "" {
			return tools, nil
		}
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
}

// fromMCPTool is an MCP tool as the spec document gives it. The SDK decodes
// schemas into maps; they are encoded again with sorted keys, so that the
// same list always gives the same bytes and revision. Annotation hints that
// equal MCP's defaults are dropped, so that a server that leaves a hint out
// and one that gives its default agree.
func fromMCPTool(mt *mcp.Tool) spec.Tool {
	t := spec.Tool{
		Name:         mt.Name,
		Title:        mt.Title,
		Description:  mt.Description,
		InputSchema:  rawJSON(mt.InputSchema),
		OutputSchema: rawJSON(mt.OutputSchema),
		Meta:         mt.Meta,
	}
	if a := mt.Annotations; a != nil {
		t.Annotations = &spec.Annotations{
			Title:           a.Title,
			ReadOnlyHint:    trueOrNil(a.ReadOnlyHint),
			IdempotentHint:  trueOrNil(a.IdempotentHint),
			DestructiveHint: falseOrNil(a.DestructiveHint),
			OpenWorldHint:   falseOrNil(a.OpenWorldHint),
		}
		if *t.Annotations == (spec.Annotations{}) {
			t.Annotations = nil
		}
	}
	return t
}

// rawJSON encodes a decoded schema again; nil stays missing, for
// validateSchema to judge.
func rawJSON(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		// The SDK decoded it from JSON, so only a bug gets here; a schema
		// that is not an object is Invalid, with the reason.
		return json.RawMessage(`"unencodable schema"`)
	}
	return b
}

func trueOrNil(b bool) *bool {
	if b {
		return &b
	}
	return nil
}

func falseOrNil(b *bool) *bool {
	if b != nil && !*b {
		return b
	}
	return nil
}

// mcpRoundTripper carries the HTTP exchanges of one MCP scrape. It binds
// each request to the scrape's context, including the SDK's closing DELETE,
// which the SDK detaches from it; sends the bearer token over https; and
// bounds the
// bytes of every response body together, so that a server that pages or
// streams forever is cut at the scraper's response size. It meters what
// those bytes decode to as they pass, because the SDK decodes every schema
// into maps (some 16 times the JSON of an ordinary tool list, 50 times of a
// hostile one): a reply that would decode to more than decodeLimit fails
// before the SDK holds it whole, let alone decodes it. It remembers why
// the scrape failed, for the metric reason, because the SDK's errors do not
// all wrap their cause.
type mcpRoundTripper struct {
	base  http.RoundTripper
	ctx   context.Context
	token string

	limit       int64
	decodeLimit int64
	// charge is the scrape's share of the scrapes' memory budget.
	charge *scrapeCharge

	mu      sync.Mutex
	left    int64
	decoded int64
	failure error
	status  int
	// lists are the bytes of the tools/list replies: the SDK's Tool has no
	// execution (MCP 2025-11-25 tasks), so addExecutions reads it from them.
	lists []*toolsListReply
}

// toolsListReply is the body of one tools/list reply, as read.
type toolsListReply struct {
	sse bool
	buf bytes.Buffer
}

func (rt *mcpRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := rt.ctx.Err(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(req.Context())
	stop := context.AfterFunc(rt.ctx, cancel)
	req = req.Clone(ctx)
	req.Header.Set("User-Agent", "toolplane-operator")
	// Only ever over TLS, as in fetch, redirects on the same host included.
	if rt.token != "" && req.URL.Scheme == "https" {
		req.Header.Set("Authorization", "Bearer "+rt.token)
	}
	resp, err := rt.base.RoundTrip(req)
	if err != nil {
		stop()
		cancel()
		return nil, err
	}
	if resp.StatusCode >= 300 && resp.StatusCode != http.StatusNotModified && !isRedirect(resp.StatusCode) {
		rt.mu.Lock()
		rt.status = resp.StatusCode
		rt.mu.Unlock()
	}
	body := &boundedBody{rc: resp.Body, rt: rt, done: func() { stop(); cancel() }}
	if isToolsList(req) {
		mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		body.list = &toolsListReply{sse: mt == "text/event-stream"}
		rt.mu.Lock()
		rt.lists = append(rt.lists, body.list)
		rt.mu.Unlock()
	}
	resp.Body = body
	return resp, nil
}

// isToolsList reports whether req, one of the SDK's own, sends tools/list.
func isToolsList(req *http.Request) bool {
	if req.Method != http.MethodPost || req.GetBody == nil {
		return false
	}
	rc, err := req.GetBody()
	if err != nil {
		return false
	}
	defer func() { _ = rc.Close() }()
	b, err := io.ReadAll(io.LimitReader(rc, 64<<10))
	if err != nil {
		return false
	}
	msg, err := jsonrpc.DecodeMessage(b)
	r, ok := msg.(*jsonrpc.Request)
	return err == nil && ok && r.Method == "tools/list"
}

// addExecutions sets each tool's execution from the tools/list replies,
// which the SDK has read whole by now. A taskSupport that is not a string
// is kept as its JSON text, for validateTool to reject with the reason;
// MCP's default (forbidden) is left out, so that a server that says so
// and one that does not agree.
func (rt *mcpRoundTripper) addExecutions(tools []spec.Tool) {
	// Under the lock: a body the SDK has not closed may still be read.
	rt.mu.Lock()
	defer rt.mu.Unlock()
	lists := rt.lists
	rt.lists = nil
	execs := map[string]*spec.Execution{}
	for _, l := range lists {
		msgs := [][]byte{l.buf.Bytes()}
		if l.sse {
			msgs = msgs[:0]
			for line := range bytes.Lines(l.buf.Bytes()) {
				if data, ok := bytes.CutPrefix(line, []byte("data:")); ok {
					msgs = append(msgs, bytes.TrimSpace(data))
				}
			}
		}
		for _, m := range msgs {
			msg, err := jsonrpc.DecodeMessage(m)
			resp, ok := msg.(*jsonrpc.Response)
			if err != nil || !ok || resp.Error != nil {
				continue
			}
			var res struct {
				Tools []struct {
					Name      string `json:"name"`
					Execution *struct {
						TaskSupport json.RawMessage `json:"taskSupport"`
					} `json:"execution"`
				} `json:"tools"`
			}
			if json.Unmarshal(resp.Result, &res) != nil {
				continue
			}
			for _, t := range res.Tools {
				if t.Execution == nil || len(t.Execution.TaskSupport) == 0 {
					continue
				}
				var ts string
				if json.Unmarshal(t.Execution.TaskSupport, &ts) != nil {
					ts = truncate(string(t.Execution.TaskSupport), 80)
				}
				if ts != "" && ts != spec.TaskSupportForbidden {
					execs[t.Name] = &spec.Execution{TaskSupport: ts}
				}
			}
		}
	}
	for i := range tools {
		tools[i].Execution = execs[tools[i].Name]
	}
}

func isRedirect(code int) bool { return code >= 300 && code < 400 }

func (rt *mcpRoundTripper) fail(err error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.failure == nil {
		rt.failure = err
	}
}

// classify turns the SDK's error into a scrape failure with a reason. Its
// text is the SDK's, which may quote the server's reply: it is put on one
// line and cut, as any text a tenant controls.
func (rt *mcpRoundTripper) classify(ctx context.Context, target, step string, err error) error {
	rt.mu.Lock()
	failure, status := rt.failure, rt.status
	rt.mu.Unlock()
	switch {
	case errors.Is(failure, errScrapeBudget):
		return scrapeFailure(scrapeErrBudget, fmt.Errorf("MCP %s: %w", target, failure))
	case rt.charge != nil && rt.charge.starved.Load():
		// The SDK saw the timeout before the read waiting for the budget
		// did.
		return scrapeFailure(scrapeErrBudget, fmt.Errorf("MCP %s: %w: waited until the scrape's timeout", target, errScrapeBudget))
	case errors.Is(failure, errTooLarge):
		return scrapeFailure(scrapeErrTooLarge, fmt.Errorf("MCP %s: %w", target, failure))
	case failure != nil:
		return classifyTransportError(target, failure)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return scrapeFailure(scrapeErrTimeout, fmt.Errorf("MCP %s: timed out", target))
	case status != 0:
		return scrapeFailure(scrapeErrHTTPStatus, fmt.Errorf("MCP %s: %s: HTTP %d", target, step, status))
	}
	var netErr interface{ Timeout() bool }
	if errors.As(err, &netErr) || strings.Contains(err.Error(), "connection refused") {
		return scrapeFailure(scrapeErrConnect, fmt.Errorf("MCP %s: %s: %s", target, step, truncate(oneLine(err.Error()), maxReasonLen)))
	}
	return scrapeFailure(scrapeErrReply, fmt.Errorf("MCP %s: %s: %s", target, step, truncate(oneLine(err.Error()), maxReasonLen)))
}

// boundedBody is a response body that counts against the scrape's bytes
// and its decode budget. Each body has a meter of its own, so that bodies
// read at once cannot confuse one another's strings.
type boundedBody struct {
	rc    io.ReadCloser
	rt    *mcpRoundTripper
	meter spec.DecodeMeter
	once  sync.Once
	done  func()
	list  *toolsListReply // nil unless the reply is to tools/list
}

func (b *boundedBody) Read(p []byte) (int, error) {
	b.rt.mu.Lock()
	left := b.rt.left
	b.rt.mu.Unlock()
	// Read at most one byte past the limit, so that bodies of exactly the
	// limit pass and a larger one is told apart from them, as in fetch.
	if int64(len(p)) > left+1 {
		p = p[:max(left+1, 0)]
	}
	// Charged after the read, so one read is held uncharged at most.
	if len(p) > maxChargedRead {
		p = p[:maxChargedRead]
	}
	n, err := b.rc.Read(p)
	before := b.meter.Cost()
	_, _ = b.meter.Write(p[:n])
	b.rt.mu.Lock()
	b.rt.left -= int64(n)
	b.rt.decoded += b.meter.Cost() - before
	left, decoded := b.rt.left, b.rt.decoded
	b.rt.mu.Unlock()
	if left < 0 {
		err := fmt.Errorf("%w: more than %d bytes in one scrape (--max-response-bytes)", errTooLarge, b.rt.limit)
		b.rt.fail(err)
		return 0, err
	}
	if b.rt.decodeLimit > 0 && decoded > b.rt.decodeLimit {
		err := fmt.Errorf("%w: the replies of one scrape would decode to more than %d bytes (%d times --max-response-bytes)", errTooLarge, b.rt.decodeLimit, decodeBudgetFactor)
		b.rt.fail(err)
		return 0, err
	}
	// Within the scrape's own bounds, the bytes and their decode are
	// charged to the scrapes' budget.
	held := int64(0)
	if b.list != nil {
		// Kept until addExecutions: charged once more.
		b.rt.mu.Lock()
		b.list.buf.Write(p[:n])
		b.rt.mu.Unlock()
		held = int64(n)
	}
	if cerr := b.rt.charge.add(scrapeCostFactor*int64(n) + b.meter.Cost() - before + held); cerr != nil {
		b.rt.fail(cerr)
		return 0, cerr
	}
	return n, err
}

func (b *boundedBody) Close() error {
	err := b.rc.Close()
	b.once.Do(b.done)
	return err
}
