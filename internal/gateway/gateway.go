package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"golang.org/x/sync/semaphore"
	"golang.org/x/sync/singleflight"

	"github.com/toolplane/toolplane/toolkit/discovery"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// Paths the gateway serves.
const (
	// MCPPath serves every tool of the table.
	MCPPath = "/mcp"
	// NamespaceViewPrefix is followed by a namespace: the tools of the
	// ToolSets in it.
	NamespaceViewPrefix = "/mcp/namespaces/"
	// ToolSetViewPrefix is followed by namespace/name: one ToolSet's tools.
	ToolSetViewPrefix = "/mcp/toolsets/"
	// TablePath serves the table as one JSON document.
	TablePath = "/v1/tools"
)

// modernProtocol is the first MCP protocol version of the stateless era
// (SEP-2575).
const modernProtocol = "2026-07-28"

// viewHeader carries the view of an MCP request from the HTTP handler to
// the MCP method handlers, which see the request's header but not its URL.
// The handler sets it on every request, replacing whatever a client sent.
const viewHeader = "Toolplane-Gateway-View"

// Gateway serves the tool table to MCP clients and routes their calls to the
// workloads that own the tools. Give it tables with [Gateway.SetTable] (or
// [WatchTable]); it serves nothing but empty lists until the first. It is
// safe for concurrent use; call [Gateway.Close] when done.
type Gateway struct {
	opts    Options
	logger  *slog.Logger
	metrics *metrics
	// relayExt are the extensions the gateway may advertise
	// (extensions.go).
	relayExt map[string]bool

	snap atomic.Pointer[snapshot]
	// setMu serializes SetTable: the calls counts it makes for a table
	// (callCounter.setTable) must be those of the table it swaps in last.
	setMu  sync.Mutex
	server *mcp.Server
	impl   *mcp.Implementation // the server's, as results of 2026-07-28 name it
	// answerMeta is the _meta that annotateServerInfo gives a result, as
	// appendAnswer writes it (fastanswer.go).
	answerMeta []byte
	// noFastCall turns serveFastCall off, for the tests that compare it
	// with the SDK (fastcall.go).
	noFastCall atomic.Bool
	fastCalls  atomic.Int64 // the calls serveFastCall answered

	stateless http.Handler
	sessions  http.Handler // nil unless Options.Sessions
	mux       *http.ServeMux

	client *http.Client
	slots  chan struct{}
	shares callShares // each namespace's share of slots (call_share.go)

	// backends keeps the ToolSets' credentials and clients (nil without
	// Options.Credentials), circuits their health (backend.go, circuit.go).
	backends *backends
	circuits *circuits
	tracer   trace.Tracer
	noSpans  bool // tracer is the no-op one

	// The bounds of limits.go and sessions.go.
	bodies, results *budget
	streams         *counter
	callerStreams   *counter
	sessionLimits   *sessionLimits // nil unless Options.Sessions
	ledgers         sync.Map       // requestHeader → *ledger
	lists           *semaphore.Weighted

	// access keeps what each caller may see of the table (table.go), and
	// questionSlots bound the authorization questions in flight (auth.go).
	access        *accessCache
	accessFlight  singleflight.Group
	questionSlots chan struct{}

	// audit is nil without Options.AuditLog (audit.go); the limits of
	// ratelimit.go.
	audit                       *auditLog
	redactors                   redactors
	callerLimits, toolSetLimits *callLimits

	// listeners, and the notifier's kick and stop (listchanged.go).
	listeners    listeners
	tableChanged chan struct{}
	done         chan struct{}

	// logLevels are the 2025 sessions' logging levels (relay.go), and
	// parked the calls that wait for their clients' input (relay_park.go).
	logLevels logLevels
	parked    parked

	// tasks counts the tasks each caller has running through this replica,
	// taskSealer seals their ids, taskOps counts tasks/* (tasks*.go).
	tasks      *taskLedger
	taskSealer *taskSealer
	taskOps    *prometheus.CounterVec
	taskLimits *callLimits

	closeOnce sync.Once
}

// New returns a Gateway. opts may be nil.
func New(opts *Options) *Gateway {
	var o Options
	if opts != nil {
		o = *opts
	}
	o = o.withDefaults()
	g := &Gateway{
		opts:     o,
		relayExt: relayedExtensions(o.RelayExtensions),
		logger:   o.Logger,
		metrics:  newMetrics(o.Registerer),
		slots:    make(chan struct{}, o.MaxConcurrentCalls),
		bodies:   newBudget(o.MaxBodyMemory, firstBodyChunk),
		results:  newBudget(o.MaxResultMemory, firstResultChunk),
		lists:    semaphore.NewWeighted(int64(o.MaxConcurrentLists)),
		streams:  newCounter(o.MaxStreams, o.MaxStreamsPerClient, refusedStreams, refusedStreamsPerClient),
		// Per authenticated caller, the same bound as per address.
		callerStreams: newCounter(o.MaxStreams, o.MaxStreamsPerClient, refusedStreams, refusedStreamsPerCaller),
		access:        newAccessCache(maxAccessCacheTools),

		questionSlots: make(chan struct{}, maxQuestionsInFlight),
		callerLimits:  newCallLimits(maxCallBuckets),
		tableChanged:  make(chan struct{}, 1),
		done:          make(chan struct{}),
		toolSetLimits: newCallLimits(maxCallBuckets),
	}
	if o.AuditLog != nil {
		g.audit = newAuditLog(o.AuditLog, o.AuditBuffer, g.metrics, func(err error) {
			g.logger.Error("Writing the audit log failed; lines are dropped until it recovers", "error", err)
		})
	}
	if err := g.initTasks(&o); err != nil {
		// A key too short to seal with: a replica's own key instead, so
		// that tasks work on this replica only, and say so.
		o.Logger.Error("The task key cannot be used; task ids are sealed with a key of this replica's own", "error", err)
		g.taskSealer, _ = newTaskSealer(nil)
	}
	g.client = newWorkloadClient(&o)
	if o.Credentials != nil {
		g.backends = newBackends(o.Credentials, o.CredentialsTTL, g.client)
	}
	g.circuits = newCircuits(&o, o.Registerer)
	tp := o.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	g.tracer = tp.Tracer(tracerName)
	// A no-op provider records nothing: the gateway then builds no span
	// (names, attributes, contexts), and trace context passes on as it
	// came.
	_, g.noSpans = tp.(noop.TracerProvider)
	ka, _ := o.Auth.(*KubernetesAuth)
	if oa, ok := o.Auth.(*OIDCAuth); ok {
		ka = oa.Kubernetes
	}
	if ka != nil && ka.metrics == nil {
		ka.metrics = g.metrics
	}

	// The SDK logs every stateless request at Info: one line per call.
	sdkLogger := slog.New(minLevel{Handler: o.Logger.Handler(), min: slog.LevelWarn})
	g.impl = &mcp.Implementation{Name: o.Name, Version: o.Version}
	g.answerMeta = answerMeta(g.impl)
	g.server = mcp.NewServer(
		g.impl,
		&mcp.ServerOptions{
			Logger: sdkLogger,
			// Logging, since the relay passes backends' log messages on.
			Capabilities: &mcp.ServerCapabilities{
				Tools:   &mcp.ToolCapabilities{ListChanged: true},
				Logging: &mcp.LoggingCapabilities{}, //nolint:staticcheck // deprecated in 2026-07-28, still served to 2025-era clients
			},
		},
	)
	// tools/list and tools/call are answered from the table here; the
	// SDK's own tool set holds one placeholder only, whose replacement on
	// each new revision makes the SDK send list_changed to every session
	// and every subscriptions/listen stream, and filterListChanged drops
	// it for those it does not concern (listchanged.go).
	g.server.AddReceivingMiddleware(g.middleware)
	g.server.AddReceivingMiddleware(g.searchMiddleware) // outside g.middleware: search endpoints first
	g.server.AddReceivingMiddleware(g.listenMiddleware)
	g.server.AddSendingMiddleware(g.filterListChanged)
	g.server.AddTool(placeholderTool(""), placeholderHandler)
	go g.notifyTables()

	getServer := func(*http.Request) *mcp.Server { return g.server }
	g.stateless = mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		Stateless:                    true,
		Logger:                       sdkLogger,
		MaxRequestBodyBytes:          o.MaxBodyBytes,
		DisableLocalhostProtection:   o.AllowAnyHostOnLoopback,
		PropagateRequestCancellation: true,
	})
	if o.Sessions {
		g.sessionLimits = newSessionLimits(g)
		g.sessions = mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
			Logger:                     sdkLogger,
			MaxRequestBodyBytes:        o.MaxBodyBytes,
			SessionTimeout:             o.SessionTimeout,
			DisableLocalhostProtection: o.AllowAnyHostOnLoopback,
		})
	}

	var mcpHandler http.Handler = http.HandlerFunc(g.serveMCP)
	var tableHandler http.Handler = http.HandlerFunc(g.serveTable)
	var searchMCPHandler http.Handler = http.HandlerFunc(g.serveSearchMCP)
	var searchHandler http.Handler = http.HandlerFunc(g.serveSearch)
	catalogHandler := g.catalogHandler()
	if o.Auth != nil {
		authn := g.requireBearer
		mcpHandler = authn(mcpHandler)
		tableHandler = authn(tableHandler)
		searchMCPHandler = authn(searchMCPHandler)
		searchHandler = authn(searchHandler)
		catalogHandler = authn(catalogHandler)
	}
	g.mux = http.NewServeMux()
	g.mux.Handle(MCPPath, mcpHandler)
	g.mux.Handle(NamespaceViewPrefix+"{namespace}", mcpHandler)
	g.mux.Handle(ToolSetViewPrefix+"{namespace}/{name}", mcpHandler)
	g.mux.Handle(TablePath, tableHandler)
	g.mux.Handle(SearchMCPPath, searchMCPHandler)
	g.mux.Handle(NamespaceViewPrefix+"{namespace}"+searchViewSuffix, searchMCPHandler)
	g.mux.Handle(ToolSetViewPrefix+"{namespace}/{name}"+searchViewSuffix, searchMCPHandler)
	g.mux.Handle(SearchPath, searchHandler)
	g.mux.Handle(CatalogPath, catalogHandler)
	g.mux.Handle(CatalogPath+"/", catalogHandler)
	if o.Auth != nil && o.ProtectedResource != nil {
		g.mux.HandleFunc("GET "+ResourceMetadataPath, g.serveResourceMetadata)
		g.mux.HandleFunc("GET "+ResourceMetadataPath+"/{path...}", g.serveResourceMetadata)
	}
	if o.TxnTokens != nil {
		g.mux.HandleFunc(JWKSPath, o.TxnTokens.serveJWKS)
	}
	return g
}

// ServeHTTP implements [http.Handler]: MCP at [MCPPath] and its views, and
// the table at [TablePath], each within the bounds of [Options] (see
// limits.go): they apply in front of the mux, to every endpoint.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) { g.serveBounded(w, r, g.mux) }

// Close ends every MCP session and stream, which [http.Server.Shutdown]
// would otherwise wait for, closes idle connections to workloads, and
// writes out the audit lines queued (waiting 5s at most). A call that
// ends after Close is still audited; Close again to write it out.
func (g *Gateway) Close() error {
	g.closeOnce.Do(func() {
		close(g.done)
		for ss := range g.server.Sessions() {
			_ = ss.Close()
		}
		g.cancelParked()
		g.client.CloseIdleConnections()
		if g.backends != nil {
			g.backends.closeIdle()
		}
	})
	if g.audit != nil {
		// Every time, not once: cmd/gateway closes at the start of its
		// server's shutdown and again once the calls in flight are done.
		g.audit.flush(5 * time.Second)
	}
	return nil
}

// Ready reports whether the gateway holds a table.
func (g *Gateway) Ready() bool { return g.snap.Load() != nil }

// Revision returns the revision of the table served, or "".
func (g *Gateway) Revision() string {
	if s := g.snap.Load(); s != nil {
		return s.table.Revision
	}
	return ""
}

// SetTable makes t the table served. The gateway keeps t: do not modify it
// afterwards. A table that cannot be served (two tools of one name, a tool
// without an input schema) is refused with an error and the last good one
// kept. A new revision sends notifications/tools/list_changed, soon after,
// to every client that listens and whose view (and, under auth, grants)
// the change concerns.
func (g *Gateway) SetTable(t *spec.Table) error {
	if t == nil {
		return fmt.Errorf("%w: no table", spec.ErrTableMalformed)
	}
	s, err := newSnapshot(t, time.Now(), g.opts.ClusterDomain)
	if err != nil {
		g.metrics.rejected.WithLabelValues("invalid").Inc()
		return err
	}
	g.setMu.Lock()
	defer g.setMu.Unlock()
	if prev := g.snap.Load(); prev != nil {
		s.prevIndex = prev.index.Load()
	}
	names := make([]string, len(s.table.Tools))
	for i := range s.table.Tools {
		names[i] = s.table.Tools[i].Name
	}
	s.calls = g.metrics.calls.setTable(names)
	old := g.snap.Swap(s)
	g.metrics.setTable(s)
	// What the gateway keeps per ToolSet is bounded by the table's.
	g.circuits.retain(s.byToolSet)
	if g.backends != nil {
		g.backends.retain(s.byToolSet)
	}
	if old != nil && old.table.Revision == s.table.Revision {
		return nil
	}
	for _, why := range s.unroutable {
		g.logger.Warn("Left a tool out of the gateway's lists: it cannot be routed", "reason", why)
	}
	g.logger.Info("Serving the tool table", "revision", s.table.Revision, "tools", len(s.table.Tools), "routable", len(s.listed))
	select {
	case g.tableChanged <- struct{}{}:
	default: // the notifier has a kick pending, and will see this table
	}
	return nil
}

// snapshot returns the table served now; an empty one before the first.
func (g *Gateway) snapshot() *snapshot {
	if s := g.snap.Load(); s != nil {
		return s
	}
	return emptySnapshot
}

var emptySnapshot = func() *snapshot {
	s, err := newSnapshot(&spec.Table{SchemaVersion: spec.SchemaVersion, Revision: spec.TableRevision(nil), Tools: []spec.TableTool{}}, time.Time{}, "")
	if err != nil {
		panic(err)
	}
	return s
}()

// serveMCP routes a request of the 2026 era to the stateless handler, and
// one of the 2025 era to the session handler when there is one, with the
// view of its path in viewHeader.
func (g *Gateway) serveMCP(w http.ResponseWriter, r *http.Request) {
	v := view{namespace: r.PathValue("namespace"), name: r.PathValue("name")}
	r.Header.Set(viewHeader, v.String())
	r.Header.Del(searchHeader)
	g.metrics.inFlight.Inc()
	defer g.metrics.inFlight.Dec()
	release, ok := g.acquireCallerStream(w, r)
	if !ok {
		return
	}
	defer release()
	if g.serveTaskMethod(w, r) { // tasks/* (tasks.go)
		return
	}
	r.Header.Del(statefulHeader)
	if g.sessions != nil && r.Header.Get("Mcp-Protocol-Version") < modernProtocol {
		r.Header.Set(statefulHeader, "1")
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" {
			g.sessionLimits.serveNew(w, r, g.sessions)
			return
		}
		g.sessions.ServeHTTP(w, r)
		return
	}
	if g.serveFastCall(w, r) { // one tools/call (fastcall.go)
		return
	}
	g.stateless.ServeHTTP(w, r)
}

func viewFrom(h http.Header) view {
	var v view
	s := h.Get(viewHeader)
	switch {
	case len(s) > len("namespaces/") && s[:len("namespaces/")] == "namespaces/":
		v.namespace = s[len("namespaces/"):]
	case len(s) > len("toolsets/") && s[:len("toolsets/")] == "toolsets/":
		rest := s[len("toolsets/"):]
		for i := 0; i < len(rest); i++ {
			if rest[i] == '/' {
				v.namespace, v.name = rest[:i], rest[i+1:]
				break
			}
		}
	}
	return v
}

// placeholderTool is the one tool the SDK's own tool set holds. Its
// description changes with the revision so that each replacement is a
// change; it is never listed or called, since the middleware answers
// tools/list and tools/call.
func placeholderTool(revision string) *mcp.Tool {
	return &mcp.Tool{
		Name:        "toolplane-gateway-revision",
		Description: revision,
		InputSchema: map[string]any{"type": "object"},
	}
}

func placeholderHandler(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return nil, errors.New("not a tool")
}

// newWorkloadClient returns the client that calls workloads: keep-alive
// connections, enough idle ones per workload for the concurrency bound, no
// proxy from the environment (workloads are in the cluster), and no
// redirects, so that a workload cannot send a caller's arguments elsewhere.
func newWorkloadClient(o *Options) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.MaxIdleConns = 0
	tr.MaxIdleConnsPerHost = o.MaxConcurrentCalls
	tr.IdleConnTimeout = 90 * time.Second
	// Go's transport reads up to 10 MiB of a reply's header; a workload
	// that sends that much and stalls would hold it for the call timeout.
	tr.MaxResponseHeaderBytes = o.MaxResponseHeaderBytes
	tr.ForceAttemptHTTP2 = false
	if o.DialContext != nil {
		tr.DialContext = o.DialContext
	} else {
		tr.DialContext = discovery.ServiceDialer(&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second, Resolver: o.Resolver}, o.ClusterDomain)
	}
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
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
