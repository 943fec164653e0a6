package gateway

import (
	"context"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolplane/toolplane/toolkit/search"
)

// Defaults of the zero fields of [Options].
const (
	// DefaultCallTimeout bounds one tools/call, from the gateway's receipt of
	// it to the workload's last byte.
	DefaultCallTimeout = 30 * time.Second
	// DefaultMaxConcurrentCalls bounds the calls in flight to workloads.
	DefaultMaxConcurrentCalls = 256
	// DefaultPageSize is the number of tools in one tools/list page.
	DefaultPageSize = 500
	// DefaultMaxBodyBytes bounds an MCP request's body: 1 MiB, as a toolkit
	// workload's own limit.
	DefaultMaxBodyBytes = 1 << 20
	// DefaultMaxResultBytes bounds a workload's reply to one call: 4 MiB.
	DefaultMaxResultBytes = 4 << 20
	// DefaultListTTL is the ttlMs of a tools/list page.
	DefaultListTTL = 10 * time.Second
	// DefaultSessionTimeout closes an idle 2025-era session (Sessions only).
	DefaultSessionTimeout = 10 * time.Minute

	// DefaultWriteTimeout is how long one write to a client may block.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultMaxConns bounds the client connections open at once.
	DefaultMaxConns = 1024
	// DefaultMaxConnsPerClient bounds the connections of one client address.
	DefaultMaxConnsPerClient = 64
	// DefaultMaxBodyMemory bounds the bytes of MCP request bodies held at
	// once: 8 MiB.
	DefaultMaxBodyMemory = 8 << 20
	// DefaultMaxResultMemory bounds the bytes of workloads' results held at
	// once: 8 MiB, two results at the 4 MiB limit. Each byte costs about
	// eight in the heap until the answer is written (the reply, its
	// decoding, the SDK's two encodings, and the garbage collector's
	// headroom), so 8 MiB is about 64 MiB of the chart's 256 Mi.
	DefaultMaxResultMemory = 8 << 20
	// DefaultMaxResponseHeaderBytes bounds a workload's response header: 64
	// KiB, as the operator's scraper.
	DefaultMaxResponseHeaderBytes = 64 << 10
	// DefaultMaxConcurrentLists bounds the tools/list answers in flight.
	DefaultMaxConcurrentLists = 32
	// DefaultMaxStreams bounds the notification streams open at once.
	DefaultMaxStreams = 256
	// DefaultMaxStreamsPerClient bounds one client address's streams.
	DefaultMaxStreamsPerClient = 16
	// DefaultStreamLifetime ends a notification stream; the client opens
	// another.
	DefaultStreamLifetime = time.Hour
	// DefaultMaxSessions bounds the 2025-era sessions held (Sessions only).
	DefaultMaxSessions = 1000
	// DefaultMaxSessionsPerClient bounds one client address's sessions.
	DefaultMaxSessionsPerClient = 32
	// DefaultSessionLifetime ends a session however busy it is.
	DefaultSessionLifetime = 4 * time.Hour
	// DefaultCredentialsTTL is how long a ToolSet's backend credentials
	// are reused before they are read again.
	DefaultCredentialsTTL = 30 * time.Second
	// DefaultBackendFailures is the number of consecutive transport
	// failures that open a ToolSet's circuit.
	DefaultBackendFailures = 5
	// DefaultBackendCooldown is how long an open circuit fails calls fast
	// before one call probes the ToolSet again.
	DefaultBackendCooldown = 10 * time.Second
	// DefaultMaxNotificationsPerCall bounds the notifications relayed to a
	// client during one call.
	DefaultMaxNotificationsPerCall = 1000
	// DefaultMaxNotificationBytes bounds one relayed notification's text: a
	// progress message, or a log message's data and logger.
	DefaultMaxNotificationBytes = 16 << 10
)

// Options configure a [Gateway]. The zero value serves: no authentication,
// stateless MCP, and the defaults above.
type Options struct {
	// Name and Version are the gateway's MCP serverInfo. The default name
	// is "toolplane-gateway".
	Name, Version string

	// CallTimeout bounds each tools/call, waiting for a free call slot
	// included. A workload that does not answer within it gives the caller
	// an isError result naming the tool and its owner, so that a hung
	// workload never hangs an agent. Zero means [DefaultCallTimeout].
	CallTimeout time.Duration
	// MaxConcurrentCalls bounds the calls in flight to workloads, across
	// every client, so that a burst of slow calls cannot exhaust the
	// gateway's connections and memory. A call waits for a slot within its
	// timeout. Zero means [DefaultMaxConcurrentCalls].
	MaxConcurrentCalls int
	// MaxConcurrentCallsPerNamespace bounds the calls in flight to the
	// ToolSets of one namespace, so that one tenant's slow workload cannot
	// hold every slot of MaxConcurrentCalls; a call over its namespace's
	// share waits for one of that namespace's own calls to end, holding
	// no slot meanwhile. Zero means a quarter of MaxConcurrentCalls (at
	// least one); a gateway that serves one tenant may set it to
	// MaxConcurrentCalls.
	MaxConcurrentCallsPerNamespace int
	// PageSize is the number of tools in one tools/list page; a client
	// follows nextCursor for the rest. A page that holds the whole table
	// of a large cluster would be megabytes of JSON that many clients read
	// whole. Zero means [DefaultPageSize].
	PageSize int
	// MaxConcurrentLists bounds the tools/list requests answered at once,
	// from their arrival until their page is written: each holds a page of
	// PageSize tools, encoded twice, for as long as a client takes to read
	// it (up to WriteTimeout), and every connection could ask for one. A
	// request waits a few seconds for a slot, then gets 503. Zero means
	// [DefaultMaxConcurrentLists].
	MaxConcurrentLists int
	// ListTTL is the ttlMs that 2026-07-28 clients may cache a tools/list
	// page for. The table changes rarely and list_changed tells listening
	// clients at once, so a short TTL costs little. Zero means
	// [DefaultListTTL]; a negative value sends ttlMs 0 (do not cache).
	ListTTL time.Duration
	// RelayExtensions are the MCP extensions (2026-07-28, SEP-2133) that
	// the gateway may advertise when a backend of the view advertises them
	// (extensions.go): those that only annotate tools and tool results
	// (_meta, content), which the gateway passes on as they are. An
	// extension with methods of its own (resources/read of ui:// pages,
	// tasks/*) is not relayed by the gateway, and advertising it would
	// send clients to methods it does not answer. Names that are not
	// "{vendor-prefix}/{extension-name}" are ignored. Empty: none.
	RelayExtensions []string
	// MaxBodyBytes bounds the body of an MCP request; a larger one is
	// refused with 413. Zero means [DefaultMaxBodyBytes].
	MaxBodyBytes int64
	// MaxResultBytes bounds a workload's reply to one call; a larger reply
	// gives an isError result. Zero means [DefaultMaxResultBytes].
	MaxResultBytes int64
	// MaxBodyMemory bounds the bytes of MCP request bodies that requests in
	// flight hold together, so that many slow or large bodies at once
	// (MaxConns of them could each be MaxBodyBytes) cannot exhaust memory.
	// A request waits a few seconds for its first 4 KiB, then gets 503,
	// and holds at most twice what it has sent (never its declared
	// Content-Length ahead of the bytes); one whose body outgrows what is
	// left gets 503 at once.
	// Zero means [DefaultMaxBodyMemory].
	MaxBodyMemory int64
	// MaxResultMemory bounds the bytes of workloads' replies that calls in
	// flight hold together, from the first byte read until the caller's
	// answer is written: MaxConcurrentCalls calls of MaxResultBytes each
	// would be a gigabyte. A call waits a few seconds for its first 16 KiB
	// and holds at most twice what it has read; a call whose reply grows
	// past what is left
	// gives an isError result that says so. It must be at least
	// MaxResultBytes, and is raised to it. Zero means
	// [DefaultMaxResultMemory].
	MaxResultMemory int64
	// MaxResponseHeaderBytes bounds a workload's response header, which Go's
	// transport would otherwise read up to 10 MiB of. Zero means
	// [DefaultMaxResponseHeaderBytes].
	MaxResponseHeaderBytes int64

	// WriteTimeout bounds each write of a response or stream to a client:
	// the connection's write deadline is set this far ahead before every
	// write, so a stream a client keeps reading lives on, and a client that
	// stops reading is dropped. Zero means [DefaultWriteTimeout].
	WriteTimeout time.Duration
	// MaxConns and MaxConnsPerClient bound the client connections of a
	// listener from [Gateway.Listener], in all and from one address (idle
	// keep-alive ones included); the request of a connection over either
	// is answered 503 or 429 with Retry-After, and the connection closed. Behind a proxy every client has the proxy's address: raise
	// MaxConnsPerClient there. Zero means [DefaultMaxConns] and
	// [DefaultMaxConnsPerClient].
	MaxConns, MaxConnsPerClient int
	// MaxStreams and MaxStreamsPerClient bound the notification streams
	// open at once (subscriptions/listen of 2026 clients, and the GET
	// stream of a 2025 session), in all and from one address; with Auth,
	// MaxStreamsPerClient bounds each authenticated caller's streams too,
	// whatever its tokens and addresses. One more is refused with 429. Each holds a connection, a few goroutines and the
	// SDK's state, about 50 KiB. Zero means [DefaultMaxStreams] and
	// [DefaultMaxStreamsPerClient].
	MaxStreams, MaxStreamsPerClient int
	// StreamLifetime ends a notification stream however healthy, so that
	// none is held for ever; the client opens a new one. Zero means
	// [DefaultStreamLifetime].
	StreamLifetime time.Duration

	// Sessions gives MCP clients of the 2025 era (those that send
	// initialize) a session, so that a table change reaches them as
	// notifications/tools/list_changed on their standalone SSE stream. A
	// session lives in one replica: with several replicas it needs session
	// affinity (sticky sessions) at the Service or ingress. Without it the
	// gateway is stateless for every client and any replica answers any
	// request. 2026-07-28 clients are stateless either way and get
	// list_changed through subscriptions/listen.
	Sessions bool
	// SessionTimeout closes a session after this long without a request.
	// Zero means [DefaultSessionTimeout]. Only used with Sessions.
	SessionTimeout time.Duration
	// MaxSessions and MaxSessionsPerClient bound the sessions held, in all
	// and opened from one address (and, with Auth, by one authenticated
	// caller); an initialize over either is refused with 429. A session costs about 8 KiB until it times out. Zero means
	// [DefaultMaxSessions] and [DefaultMaxSessionsPerClient]. Only used
	// with Sessions.
	MaxSessions, MaxSessionsPerClient int
	// SessionLifetime closes a session this long after it opened, however
	// busy; the client initializes again. Zero means
	// [DefaultSessionLifetime]. Only used with Sessions.
	SessionLifetime time.Duration
	// MaxNotificationsPerCall bounds the progress and log notifications,
	// and the elicitation and sampling requests, that a backend may send a
	// client through the gateway during one call; later ones are dropped
	// (the call goes on) and counted in
	// toolplane_gateway_notifications_total. Zero means
	// [DefaultMaxNotificationsPerCall].
	MaxNotificationsPerCall int
	// MaxNotificationBytes bounds one relayed notification's text (a
	// progress message; a log message's data and logger); a larger one is
	// dropped and counted. The bytes a backend sends during a call count
	// against MaxResultBytes and MaxResultMemory besides, as its result
	// does. Zero means [DefaultMaxNotificationBytes].
	MaxNotificationBytes int

	// AllowAnyHostOnLoopback turns off the MCP SDK's DNS-rebinding
	// protection, which refuses (403) a request that arrives on a loopback
	// address with a Host header that is not a loopback name. Set it only
	// behind a proxy on the same host.
	AllowAnyHostOnLoopback bool

	// Auth authenticates callers and authorizes each tool. Nil means no
	// authentication: every caller sees and may call every tool, which is
	// for trusted networks only. See [KubernetesAuth] and [OIDCAuth].
	Auth Auth
	// ProtectedResource, with Auth, serves the gateway's OAuth protected
	// resource metadata (RFC 9728) and names it in every 401, so that MCP
	// clients find where to get a token. Nil serves none: a 401 says
	// WWW-Authenticate: Bearer only.
	ProtectedResource *ProtectedResource

	// TxnTokens, with Auth, mints a transaction token for every call
	// routed for an authenticated caller, sent to the workload in the
	// Txn-Token header (toolkit's server.Options.TxnToken verifies it), and
	// serves its public keys at [JWKSPath]. Without Auth no token is ever
	// sent: there is no caller to vouch for. Nil sends none.
	TxnTokens *TxnTokens

	// Search configures the index behind /v1/search, /mcp/search and the
	// catalog. Nil is lexical ranking only. With Search.Embedder (such as
	// toolkit/search/embedding.OpenAI, for an in-cluster /v1/embeddings
	// endpoint), each new table's tools are embedded off the request path,
	// only the new and changed ones, and retried with backoff when the
	// endpoint fails; until then, and whenever a query cannot be embedded
	// within Search.EmbedTimeout, searches are lexical.
	Search *search.Options
	// MaxReviewsPerRequest bounds the authorization questions that one
	// request (a tools/list page, a GET /v1/tools, a search, a call) may
	// ask that Auth cannot answer from memory: with [KubernetesAuth], the
	// SubjectAccessReviews it may cause. A tools/list page that reaches it
	// ends early, with a nextCursor where it stopped; a GET /v1/tools
	// answers 503 with Retry-After, since a table with tools missing would
	// be a lie. The answers given are kept either way, so the next request
	// goes further. Zero means [DefaultMaxReviewsPerRequest].
	MaxReviewsPerRequest int
	// ClusterDomain is the cluster's DNS domain; empty means
	// discovery.DefaultClusterDomain (cluster.local). A tool is routed only
	// to a Service of its own namespace, named
	// <service>.<namespace>.svc.<ClusterDomain> (see
	// discovery.CheckServiceEndpoint), and dialed with a final dot, so that
	// the resolver's search path is never walked.
	ClusterDomain string

	// DialContext, if set, dials the workloads' endpoints instead of a
	// net.Dialer. The gateway dials workloads by fully qualified Service
	// DNS names (name.namespace.svc.<ClusterDomain>:port); outside a
	// cluster (tests, the demo) a dialer stands in for cluster DNS.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)

	// Resolver resolves the workloads' Service names when DialContext is
	// nil; nil means net.DefaultResolver. Its Dial (if set) and
	// StrictErrors are used with Go's own resolver, which lets the gateway
	// read every reply: before each new connection to a workload it looks
	// the Service name up once, refuses one whose replies show an alias (an
	// ExternalName Service's CNAME), and dials the addresses it checked.
	Resolver *net.Resolver

	// Propagator carries the caller's trace context from its request's
	// header to the workload's, so that the workload's spans join the
	// caller's trace, as children of the gateway's own call span when
	// TracerProvider records spans. The default is W3C Trace Context and
	// Baggage.
	Propagator propagation.TextMapPropagator
	// TracerProvider makes the gateway's own spans (a server span per
	// tools/list and tools/call, with authorize, route and backend call
	// spans inside), parented to the trace context the client sent in its
	// header or in the request's _meta.traceparent. The default is the
	// global provider (otel.GetTracerProvider) when New is called.
	TracerProvider trace.TracerProvider

	// Credentials gives the bearer token and the TLS trust a ToolSet's
	// workload must be called with (its spec.authorization and spec.tls),
	// read for each ToolSet on its first call and again after
	// CredentialsTTL. A token is sent only over https, only to the
	// ToolSet's own endpoint, and never with anything of the caller's. Nil
	// means every workload is called with no token and the system roots.
	// See [KubernetesCredentials].
	Credentials Credentials
	// CredentialsTTL is how long a ToolSet's credentials are reused: how
	// long a rotated token or CA takes to be used. A failure to read them
	// is reused for a fifth of it. Zero means [DefaultCredentialsTTL].
	CredentialsTTL time.Duration

	// BackendFailures is the number of consecutive transport failures (no
	// connection, or no answer within CallTimeout) of one ToolSet's
	// workload that open its circuit: its calls then fail at once with an
	// isError result naming the ToolSet, for BackendCooldown, after which
	// one call probes it and closes the circuit if it gets an answer. A
	// tool's own isError is an answer, never a failure. Zero means
	// [DefaultBackendFailures]; negative never opens a circuit.
	BackendFailures int
	// BackendCooldown is how long an open circuit fails calls fast. Zero
	// means [DefaultBackendCooldown].
	BackendCooldown time.Duration

	// AuditLog, if set, receives the audit log: one JSON line per
	// tools/call (call_tool's included) with who called (user, groups,
	// ServiceAccount, auth mode), what (method, view, tool, owner
	// ToolSet), the decision (allowed; denied, and why; rate_limited, by
	// which limit), the outcome, the duration and the bytes, and never the
	// arguments or the result. Lines are written by one goroutine from a
	// buffer of AuditBuffer lines, so a slow sink never holds up a call; a
	// line that finds the buffer full is dropped and counted in
	// toolplane_gateway_audit_dropped_total. Nil means no audit log.
	AuditLog io.Writer
	// AuditArguments adds each call's arguments to its audit line, with
	// the value of every field that the tool's input schema marks
	// sensitive (writeOnly or x-sensitive, as toolkit serves a field
	// tagged tool:"sensitive") replaced by "[redacted]"; see
	// toolkit.Redactor.
	AuditArguments bool
	// AuditBuffer is how many audit lines wait for the sink at most. Zero
	// means [DefaultAuditBuffer].
	AuditBuffer int

	// MaxCallsPerCallerPerMinute bounds the calls one caller may make of
	// one tool per minute, in each replica: an admin ceiling, whatever
	// the ToolSet's own spec.limits.callsPerMinute (which bounds every
	// caller together). The caller is its user name under Auth, its
	// address without. A call over it is an isError result that says when
	// to retry. Zero means no per-caller limit.
	MaxCallsPerCallerPerMinute int

	// TaskKey is the secret (at least 32 bytes) that task ids are sealed
	// with (tasks.go): every replica must have the same, so that a task
	// started through one can be polled through another. Nil means a
	// random key of this replica's own: a task is then reached only
	// through the replica that started it (and not after it restarts).
	TaskKey []byte
	// MaxTasksPerCaller bounds the tasks one caller has running through
	// one replica (with N replicas, N times as many in all); the caller
	// is its user name under Auth, its address without. Zero means
	// [DefaultMaxTasksPerCaller].
	MaxTasksPerCaller int
	// MaxTaskTTL bounds a task's ttl, and its id's lifetime. Zero means
	// [DefaultMaxTaskTTL].
	MaxTaskTTL time.Duration

	// Registerer, if set, receives the gateway's Prometheus metrics. Nil
	// means they are kept but not exported.
	Registerer prometheus.Registerer
	// Logger receives the gateway's logs (never a call's arguments) and the
	// MCP SDK's warnings. The default is [slog.Default].
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Name == "" {
		o.Name = "toolplane-gateway"
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.MaxConcurrentCalls <= 0 {
		o.MaxConcurrentCalls = DefaultMaxConcurrentCalls
	}
	if o.MaxConcurrentCallsPerNamespace <= 0 {
		o.MaxConcurrentCallsPerNamespace = max(1, o.MaxConcurrentCalls/namespaceShareDivisor)
	}
	o.MaxConcurrentCallsPerNamespace = min(o.MaxConcurrentCallsPerNamespace, o.MaxConcurrentCalls)
	if o.PageSize <= 0 {
		o.PageSize = DefaultPageSize
	}
	if o.ListTTL == 0 {
		o.ListTTL = DefaultListTTL
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxResultBytes <= 0 {
		o.MaxResultBytes = DefaultMaxResultBytes
	}
	if o.MaxReviewsPerRequest <= 0 {
		o.MaxReviewsPerRequest = DefaultMaxReviewsPerRequest
	}
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = DefaultSessionTimeout
	}
	o.MaxBodyMemory = orDefault(o.MaxBodyMemory, DefaultMaxBodyMemory)
	o.MaxResultMemory = max(orDefault(o.MaxResultMemory, DefaultMaxResultMemory), o.MaxResultBytes)
	o.MaxResponseHeaderBytes = orDefault(o.MaxResponseHeaderBytes, DefaultMaxResponseHeaderBytes)
	o.WriteTimeout = orDefault(o.WriteTimeout, DefaultWriteTimeout)
	o.MaxConns = orDefault(o.MaxConns, DefaultMaxConns)
	o.MaxConnsPerClient = orDefault(o.MaxConnsPerClient, DefaultMaxConnsPerClient)
	o.MaxConcurrentLists = orDefault(o.MaxConcurrentLists, DefaultMaxConcurrentLists)
	o.MaxStreams = orDefault(o.MaxStreams, DefaultMaxStreams)
	o.MaxStreamsPerClient = orDefault(o.MaxStreamsPerClient, DefaultMaxStreamsPerClient)
	o.StreamLifetime = orDefault(o.StreamLifetime, DefaultStreamLifetime)
	o.MaxSessions = orDefault(o.MaxSessions, DefaultMaxSessions)
	o.MaxSessionsPerClient = orDefault(o.MaxSessionsPerClient, DefaultMaxSessionsPerClient)
	o.SessionLifetime = orDefault(o.SessionLifetime, DefaultSessionLifetime)
	o.AuditBuffer = orDefault(o.AuditBuffer, DefaultAuditBuffer)
	o.MaxNotificationsPerCall = orDefault(o.MaxNotificationsPerCall, DefaultMaxNotificationsPerCall)
	o.MaxNotificationBytes = orDefault(o.MaxNotificationBytes, DefaultMaxNotificationBytes)
	if o.Propagator == nil {
		o.Propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.CredentialsTTL = orDefault(o.CredentialsTTL, DefaultCredentialsTTL)
	if o.BackendFailures == 0 {
		o.BackendFailures = DefaultBackendFailures
	}
	o.BackendCooldown = orDefault(o.BackendCooldown, DefaultBackendCooldown)
	o.MaxTasksPerCaller = orDefault(o.MaxTasksPerCaller, DefaultMaxTasksPerCaller)
	o.MaxTaskTTL = orDefault(o.MaxTaskTTL, DefaultMaxTaskTTL)
	return o
}

// orDefault is v, or def when v is zero or negative.
func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
