package gateway

import (
	"context"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/propagation"
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
	// PageSize is the number of tools in one tools/list page; a client
	// follows nextCursor for the rest. A page that holds the whole table
	// of a large cluster would be megabytes of JSON that many clients read
	// whole. Zero means [DefaultPageSize].
	PageSize int
	// ListTTL is the ttlMs that 2026-07-28 clients may cache a tools/list
	// page for. The table changes rarely and list_changed tells listening
	// clients at once, so a short TTL costs little. Zero means
	// [DefaultListTTL]; a negative value sends ttlMs 0 (do not cache).
	ListTTL time.Duration
	// MaxBodyBytes bounds the body of an MCP request; a larger one is
	// refused with 413. Zero means [DefaultMaxBodyBytes].
	MaxBodyBytes int64
	// MaxResultBytes bounds a workload's reply to one call; a larger reply
	// gives an isError result. Zero means [DefaultMaxResultBytes].
	MaxResultBytes int64

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
	// AllowAnyHostOnLoopback turns off the MCP SDK's DNS-rebinding
	// protection, which refuses (403) a request that arrives on a loopback
	// address with a Host header that is not a loopback name. Set it only
	// behind a proxy on the same host.
	AllowAnyHostOnLoopback bool

	// Auth authenticates callers and authorizes each tool. Nil means no
	// authentication: every caller sees and may call every tool, which is
	// for trusted networks only. See [KubernetesAuth].
	Auth Auth

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

	// Propagator carries the caller's trace context from its request's
	// header to the workload's, so that the workload's spans join the
	// caller's trace. The default is W3C Trace Context and Baggage.
	Propagator propagation.TextMapPropagator

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
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = DefaultSessionTimeout
	}
	if o.Propagator == nil {
		o.Propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}
