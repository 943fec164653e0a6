package gateway

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the gateway's Prometheus metrics.
type metrics struct {
	calls       *callCounter
	duration    *prometheus.HistogramVec
	listSize    *prometheus.HistogramVec
	tools       prometheus.Gauge
	routable    prometheus.Gauge
	revision    *prometheus.GaugeVec
	loaded      prometheus.Gauge
	rejected    *prometheus.CounterVec
	authn       *prometheus.CounterVec
	authzCache  *prometheus.CounterVec
	authzBudget prometheus.Counter
	inFlight    prometheus.Gauge
	refused     *prometheus.CounterVec
	conns       prometheus.Gauge
	streams     prometheus.Gauge
	sessions    prometheus.Gauge

	callerCalls  *prometheus.CounterVec
	limited      *prometheus.CounterVec
	auditWritten prometheus.Counter
	auditDropped prometheus.Counter
	listChanged  *prometheus.CounterVec

	// notifications counts what the relay passed on (relay.go).
	notifications *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		calls: newCallCounter(),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "toolplane_gateway_call_duration_seconds",
			Help:    "Time from a tools/call's arrival to its result, by outcome, for calls routed to a workload.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 14),
		}, []string{"outcome"}),
		listSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "toolplane_gateway_list_tools",
			Help:    "Tools in one answer: a tools/list page (api=mcp), a GET /v1/tools (api=table), or a search: GET /v1/search, search_tools or the catalog (api=search).",
			Buckets: prometheus.ExponentialBuckets(1, 4, 9),
		}, []string{"api"}),
		tools: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "toolplane_gateway_table_tools",
			Help: "Tools in the table the gateway serves.",
		}),
		routable: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "toolplane_gateway_table_routable_tools",
			Help: "Tools of the table the gateway can route (an invoke endpoint, or an MCP endpoint for tools of MCP servers, in the owner's namespace); only these are listed over MCP.",
		}),
		revision: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "toolplane_gateway_table_revision_info",
			Help: "1 for the revision of the table the gateway serves.",
		}, []string{"revision"}),
		loaded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "toolplane_gateway_table_loaded_timestamp_seconds",
			Help: "When the gateway loaded the table it serves (Unix time); its age is time() minus this.",
		}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolplane_gateway_table_rejected_total",
			Help: "Table updates the gateway refused and kept its last good table instead, by reason (torn, missing_part, too_large, malformed, invalid).",
		}, []string{"reason"}),
		authn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolplane_gateway_authentications_total",
			Help: "Bearer tokens checked, by result (ok, unauthenticated, error).",
		}, []string{"result"}),
		authzCache: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolplane_gateway_authorization_cache_total",
			Help: "Authentication and authorization decisions by kind (token, access) and how they were answered: hit (the cache), miss (a review of its own), shared (a review made for another request at the same time).",
		}, []string{"kind", "result"}),
		authzBudget: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolplane_gateway_authorization_budget_exhausted_total",
			Help: "Requests that reached --max-reviews-per-request: a tools/list page cut short, or a GET /v1/tools answered 503 to be retried.",
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "toolplane_gateway_mcp_requests_in_flight",
			Help: "MCP HTTP requests being served now, open notification streams (subscriptions/listen, a session's GET) included.",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolplane_gateway_refused_total",
			Help: "Requests and connections the gateway refused at a bound, by reason (batch, body_memory, connections, connections_per_client, streams, streams_per_client, sessions, sessions_per_client, streams_per_caller, sessions_per_caller, result_memory, lists).",
		}, []string{"reason"}),
		conns: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "toolplane_gateway_connections",
			Help: "Client connections open now (--max-conns bounds them).",
		}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "toolplane_gateway_streams",
			Help: "Notification streams open now: subscriptions/listen, and a session's GET (--max-streams bounds them).",
		}),
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "toolplane_gateway_sessions",
			Help: "2025-era MCP sessions held now (--sessions; --max-sessions bounds them).",
		}),
		callerCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolplane_gateway_caller_calls_total",
			Help: "tools/call requests by the caller's namespace (a ServiceAccount's; \"\" for any other caller, and without auth) and decision (allowed, denied, rate_limited, error). Never per user.",
		}, []string{"caller_namespace", "decision"}),
		limited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolplane_gateway_calls_limited_total",
			Help: "tools/call requests refused by a call limit, by limit: caller (--max-calls-per-caller-per-minute) or toolset (a ToolSet's spec.limits.callsPerMinute).",
		}, []string{"limit"}),
		auditWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolplane_gateway_audit_lines_total",
			Help: "Lines written to the audit log (--audit-log).",
		}),
		auditDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolplane_gateway_audit_dropped_total",
			Help: "Audit lines dropped because the audit log's sink stalled (its buffer was full) or failed: alert on any increase.",
		}),
		listChanged: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolplane_gateway_list_changed_total",
			Help: "notifications/tools/list_changed by result: sent, or skipped for a listener whose view and grants the table's change did not concern.",
		}, []string{"result"}),
		notifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolplane_gateway_notifications_total",
			Help: "What backends sent clients during calls, by kind (progress, log, elicitation, sampling) and outcome: relayed, or dropped_count (past --max-notifications-per-call), dropped_size (past --max-notification-bytes), dropped_client (the client stopped reading), dropped_backward (progress that did not grow), dropped_level (a log at a level MCP does not have), dropped_token (progress whose numbers show the ToolSet's token).",
		}, []string{"kind", "outcome"}),
	}
	if reg != nil {
		reg.MustRegister(m.callerCalls, m.limited, m.auditWritten, m.auditDropped, m.listChanged, m.notifications)
		reg.MustRegister(m.refused, m.conns, m.streams, m.sessions)
		reg.MustRegister(m.inFlight, m.calls, m.duration, m.listSize, m.tools, m.routable, m.revision, m.loaded, m.rejected, m.authn, m.authzCache, m.authzBudget)
	}
	return m
}

func (m *metrics) setTable(s *snapshot) {
	m.tools.Set(float64(len(s.table.Tools)))
	m.routable.Set(float64(len(s.listed)))
	m.revision.Reset()
	m.revision.WithLabelValues(s.table.Revision).Set(1)
	m.loaded.Set(float64(s.loaded.UnixNano()) / 1e9)
}
