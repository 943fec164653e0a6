package server

import (
	"context"
	"log/slog"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// modernProtocol is the first MCP protocol version of the stateless era
// (SEP-2575): its clients send server/discover and an Mcp-Protocol-Version
// header on every request, and receive notifications on
// subscriptions/listen rather than on a session's SSE stream.
const modernProtocol = "2026-07-28"

// mcpBridge serves a registry's tools over Streamable HTTP, from an MCP
// server of its own that [AddTools] keeps equal to the registry. The SDK's
// tools are raw tools: their arguments reach [toolkit.Registry.Call]
// untouched, so that toolkit's lenient binding and middleware run instead
// of the SDK's strict decoding.
type mcpBridge struct {
	server *mcp.Server
	tools  *Tools

	stateless http.Handler
	sessions  http.Handler // nil unless Options.MCPSessions
	tasks     *mcpTasks
	routeH    http.Handler // route, made once
}

func newMCPBridge(reg *toolkit.Registry, o *Options, callCtx func(context.Context, http.Header) context.Context, txn *TxnTokenVerifier) (*mcpBridge, error) {
	b := &mcpBridge{}
	// The SDK logs every stateless request at Info: one line per call.
	sdkLogger := slog.New(minLevel{Handler: o.Logger.Handler(), min: slog.LevelWarn})
	b.server = mcp.NewServer(
		&mcp.Implementation{Name: o.Name, Version: o.Version},
		&mcp.ServerOptions{
			Instructions: o.Instructions,
			Logger:       sdkLogger,
			// Advertise tools with list_changed even while the registry is
			// empty, and logging, which tools use through toolkit.Log; no
			// prompts or resources.
			Capabilities: &mcp.ServerCapabilities{
				Tools:   &mcp.ToolCapabilities{ListChanged: true},
				Logging: &mcp.LoggingCapabilities{}, //nolint:staticcheck // deprecated in 2026-07-28, still served to 2025-era clients
			},
		},
	)
	topts := &ToolsOptions{Logger: o.Logger, txn: txn}
	if callCtx != nil {
		topts.CallContext = func(ctx context.Context, req *mcp.CallToolRequest) context.Context {
			var header http.Header
			if req.Extra != nil {
				header = req.Extra.Header
			}
			return callCtx(ctx, header)
		}
	}
	tools, err := AddTools(b.server, reg, topts)
	if err != nil {
		return nil, err
	}
	b.tools = tools
	getServer := func(*http.Request) *mcp.Server { return b.server }
	b.stateless = mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		Stateless:                  true,
		Logger:                     sdkLogger,
		MaxRequestBodyBytes:        o.MaxBodyBytes,
		DisableLocalhostProtection: o.AllowAnyHostOnLoopback,
		// A tool call ends when its client goes away, as an invoke does.
		PropagateRequestCancellation: true,
	})
	if o.MCPSessions {
		b.sessions = mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
			Logger:                     sdkLogger,
			MaxRequestBodyBytes:        o.MaxBodyBytes,
			SessionTimeout:             o.SessionTimeout,
			DisableLocalhostProtection: o.AllowAnyHostOnLoopback,
		})
	}
	var sessions func(string) bool
	if o.MCPSessions {
		sessions = sessionExists(b.server)
	}
	b.tasks = newMCPTasks(reg, o, txn, sessions)
	b.routeH = http.HandlerFunc(b.route)
	return b, nil
}

// ServeHTTP routes a request of the 2026 era to the stateless handler, and
// one of the 2025 era to the session handler when there is one. Both share
// one MCP server, so both see the same tools.
func (b *mcpBridge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.tasks.serve(w, r, b.routeH)
}

// route is ServeHTTP without tasks.
func (b *mcpBridge) route(w http.ResponseWriter, r *http.Request) {
	if b.sessions != nil && r.Header.Get("Mcp-Protocol-Version") < modernProtocol {
		b.sessions.ServeHTTP(w, r)
		return
	}
	b.stateless.ServeHTTP(w, r)
}

// close stops following the registry and ends every session, and with it
// every open stream.
func (b *mcpBridge) close() {
	b.tools.stopFollowing()
	b.tasks.close()
	b.endSessions()
}

// endSessions ends every session, and with it every open stream; a client
// that is still there opens a new one.
func (b *mcpBridge) endSessions() {
	for ss := range b.server.Sessions() {
		_ = ss.Close()
	}
}

// MCPTool is t as MCP's tools/list serves it, through the official Go SDK.
// The schemas stay raw JSON, so that tools/list carries them byte for byte
// as the spec document does. A gateway that serves tools it did not
// declare uses it to list them exactly as toolkit would. The SDK's Tool
// has no execution (MCP 2025-11-25 tasks): [Handler] adds t.Execution to
// its tools/list replies itself, and a server of another kind must too.
func MCPTool(t spec.Tool) *mcp.Tool {
	mt := &mcp.Tool{
		Name:        t.Name,
		Title:       t.Title,
		Description: t.Description,
		InputSchema: t.InputSchema,
		Meta:        mcp.Meta(t.Meta),
	}
	if len(t.OutputSchema) > 0 {
		mt.OutputSchema = t.OutputSchema
	}
	if a := t.Annotations; a != nil {
		// The SDK writes readOnlyHint and idempotentHint always, false
		// included; false is also MCP's default for both, so the meaning
		// is the spec document's.
		mt.Annotations = &mcp.ToolAnnotations{
			Title:           a.Title,
			ReadOnlyHint:    a.ReadOnlyHint != nil && *a.ReadOnlyHint,
			IdempotentHint:  a.IdempotentHint != nil && *a.IdempotentHint,
			DestructiveHint: a.DestructiveHint,
			OpenWorldHint:   a.OpenWorldHint,
		}
	}
	return mt
}

// mcpResult is r as the SDK sends it: the same JSON as the invoke reply.
func mcpResult(r *spec.CallResult) *mcp.CallToolResult {
	out := &mcp.CallToolResult{IsError: r.IsError, Content: make([]mcp.Content, 0, len(r.Content))}
	for _, c := range r.Content {
		out.Content = append(out.Content, mcpContent(c))
	}
	if len(r.StructuredContent) > 0 {
		out.StructuredContent = r.StructuredContent
	}
	return out
}

// mcpContent is one block as the SDK sends it. A block of a type MCP does
// not know is sent as its text.
func mcpContent(c spec.Content) mcp.Content {
	switch c.Type {
	case spec.ContentImage:
		return &mcp.ImageContent{Data: c.Data, MIMEType: c.MIMEType}
	case spec.ContentAudio:
		return &mcp.AudioContent{Data: c.Data, MIMEType: c.MIMEType}
	case spec.ContentResource:
		rc := &mcp.ResourceContents{}
		if c.Resource != nil {
			rc = &mcp.ResourceContents{URI: c.Resource.URI, MIMEType: c.Resource.MIMEType, Text: c.Resource.Text, Blob: c.Resource.Blob}
		}
		return &mcp.EmbeddedResource{Resource: rc}
	}
	return &mcp.TextContent{Text: c.Text}
}

// reporter sends a tool's progress and log messages to the MCP client that
// called it, on that call's response stream.
type reporter struct {
	session *mcp.ServerSession
	tool    string
	token   any // nil: the client asked for no progress

	mu   sync.Mutex
	last float64
	sent bool
}

func (r *reporter) Progress(ctx context.Context, done, total float64, message string) {
	if r.token == nil {
		return
	}
	r.mu.Lock()
	if r.sent && done <= r.last {
		r.mu.Unlock()
		return // MCP wants progress to grow
	}
	r.last, r.sent = done, true
	r.mu.Unlock()
	if total < 0 {
		total = 0
	}
	_ = r.session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: r.token, Progress: done, Total: total, Message: message})
}

func (r *reporter) Log(ctx context.Context, level slog.Level, message string) {
	//nolint:staticcheck // logging is deprecated in 2026-07-28, and still served
	_ = r.session.Log(ctx, &mcp.LoggingMessageParams{Level: mcpLevel(level), Logger: r.tool, Data: message})
}

// mcpLevel is the MCP logging level of a slog level.
func mcpLevel(l slog.Level) mcp.LoggingLevel { //nolint:staticcheck // logging is deprecated in 2026-07-28, and still served
	switch {
	case l >= slog.LevelError+4:
		return "critical"
	case l >= slog.LevelError:
		return "error"
	case l >= slog.LevelWarn:
		return "warning"
	case l >= slog.LevelInfo+2:
		return "notice"
	case l >= slog.LevelInfo:
		return "info"
	}
	return "debug"
}

// minLevel passes on only the records at or above min.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{Handler: h.Handler.WithAttrs(attrs), min: h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{Handler: h.Handler.WithGroup(name), min: h.min}
}
