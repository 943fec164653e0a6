// Command gateway serves every tool of the toolplane tool table behind one
// MCP endpoint, for agents in any namespace and any language. It reads the
// table with a watch on its ConfigMaps, in the table's namespace only, and
// routes each tools/call to the workload that owns the tool. See
// internal/gateway for what it serves.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/internal/metricsauth"
	"github.com/toolplane/toolplane/toolkit/search"
	"github.com/toolplane/toolplane/toolkit/search/embedding"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	var (
		addr, probeAddr, metricsAddr string
		tableNamespace, tableName    string
		authMode, audiences          string
		logLevel                     string
		authTTL, authDenyTTL         time.Duration
		authQPS                      float64
		authBurst                    int
		resolve                      resolveFlag
		o                            gateway.Options
		metricsSecure                bool
		srv                          serverTimeouts
		sso                          signIn
		cert                         servingCert
	)
	flag.StringVar(&addr, "addr", ":8080", "The address that serves MCP (/mcp, its views and /mcp/search), GET /v1/tools, GET /v1/search and the catalog (/catalog).")
	flag.StringVar(&cert.certFile, "tls-cert-file", "", "A PEM certificate (chain) to serve --addr over HTTPS (TLS 1.2 or later) with, read again whenever it changes; with --tls-key-file. Empty serves plain HTTP.")
	flag.StringVar(&cert.keyFile, "tls-key-file", "", "The PEM private key of --tls-cert-file.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "The address that serves /healthz and /readyz (ready once a good tool table is held).")
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8082", `The address that serves Prometheus metrics at /metrics; "0" disables it.`)
	flag.StringVar(&srv.pprofAddr, "pprof-bind-address", "", `The address that serves net/http/pprof at /debug/pprof/, for profiling, to anyone who reaches it: loopback only; empty or "0" disables it.`)
	flag.BoolVar(&metricsSecure, "metrics-secure", true,
		"Serve metrics over HTTPS, only to clients the API server authenticates (TokenReview) and authorizes for GET /metrics (SubjectAccessReview). "+
			"False serves plain HTTP to anyone who reaches the port.")
	flag.StringVar(&tableNamespace, "table-namespace", "toolplane-system", "The namespace of the tool-table ConfigMaps; the only namespace the gateway reads.")
	flag.StringVar(&tableName, "table-name", "toolplane-tools", "The name of the tool-table ConfigMap.")
	flag.DurationVar(&o.CallTimeout, "call-timeout", gateway.DefaultCallTimeout, "How long one tools/call may take; a workload slower than this gives the caller an error result.")
	flag.IntVar(&o.MaxConcurrentCalls, "max-concurrent-calls", gateway.DefaultMaxConcurrentCalls, "The most calls in flight to workloads at once.")
	flag.IntVar(&o.MaxConcurrentCallsPerNamespace, "max-concurrent-calls-per-namespace", 0, "The most calls in flight to the ToolSets of one namespace at once, so that one tenant's slow workload cannot hold every slot; 0 means a quarter of --max-concurrent-calls.")
	flag.IntVar(&o.PageSize, "page-size", gateway.DefaultPageSize, "Tools per tools/list page.")
	flag.DurationVar(&o.ListTTL, "list-ttl", gateway.DefaultListTTL, "The ttlMs that 2026-07-28 clients may cache a tools/list page for; negative sends 0.")
	flag.Func("relay-extension", "An MCP extension the gateway advertises when a backend of the view does, because it only annotates tools and results (repeat for more; default none).", func(v string) error {
		o.RelayExtensions = append(o.RelayExtensions, v)
		return nil
	})
	flag.BoolVar(&o.Sessions, "sessions", false, "Give 2025-era MCP clients sessions, so that list_changed reaches them; needs sticky sessions with more than one replica.")
	flag.Int64Var(&o.MaxBodyBytes, "max-body-bytes", gateway.DefaultMaxBodyBytes, "The largest MCP request body accepted.")
	flag.Int64Var(&o.MaxResultBytes, "max-result-bytes", gateway.DefaultMaxResultBytes, "The largest result accepted from a workload for one call.")
	flag.Int64Var(&o.MaxBodyMemory, "max-body-memory", gateway.DefaultMaxBodyMemory, "The bytes of MCP request bodies that requests in flight may hold together; a request beyond it waits, then gets 503.")
	flag.Int64Var(&o.MaxResultMemory, "max-result-memory", gateway.DefaultMaxResultMemory, "The bytes of workloads' results that calls in flight may hold together; at least --max-result-bytes.")
	flag.Int64Var(&o.MaxResponseHeaderBytes, "max-response-header-bytes", gateway.DefaultMaxResponseHeaderBytes, "The largest response header accepted from a workload.")
	flag.DurationVar(&srv.readHeader, "read-header-timeout", defaultReadHeaderTimeout, "How long a client may take to send a request's header.")
	flag.DurationVar(&srv.read, "read-timeout", defaultReadTimeout, "How long a client may take to send a whole request, header and body.")
	flag.DurationVar(&srv.idle, "idle-timeout", defaultIdleTimeout, "How long a keep-alive connection may wait for its next request.")
	flag.DurationVar(&o.WriteTimeout, "write-timeout", gateway.DefaultWriteTimeout, "How long one write of a response or stream may block; a client that does not read is dropped after it.")
	flag.IntVar(&o.MaxConns, "max-conns", gateway.DefaultMaxConns, "The most client connections open at once; the request of one more is answered 503 with Retry-After, and the connection closed.")
	flag.IntVar(&o.MaxConnsPerClient, "max-conns-per-client", gateway.DefaultMaxConnsPerClient, "The most connections open at once from one client address (raise it behind a proxy); the request of one more is answered 429 with Retry-After, and the connection closed.")
	flag.IntVar(&o.MaxConcurrentLists, "max-concurrent-lists", gateway.DefaultMaxConcurrentLists, "The most tools/list requests answered at once, until their page is written; more wait, then get 503.")
	flag.IntVar(&o.MaxStreams, "max-streams", gateway.DefaultMaxStreams, "The most notification streams (subscriptions/listen, a session's GET) open at once; more get 429.")
	flag.IntVar(&o.MaxStreamsPerClient, "max-streams-per-client", gateway.DefaultMaxStreamsPerClient, "The most notification streams open at once from one client address, and for one authenticated caller.")
	flag.DurationVar(&o.StreamLifetime, "stream-lifetime", gateway.DefaultStreamLifetime, "How long a notification stream lives; the client opens another.")
	flag.IntVar(&o.MaxNotificationsPerCall, "max-notifications-per-call", gateway.DefaultMaxNotificationsPerCall, "The most progress and log notifications (and elicitation and sampling requests) a backend may send a client through the gateway during one call; later ones are dropped.")
	flag.IntVar(&o.MaxNotificationBytes, "max-notification-bytes", gateway.DefaultMaxNotificationBytes, "The largest relayed notification text (a progress message; a log message's data); a larger one is dropped.")
	flag.DurationVar(&o.SessionTimeout, "session-timeout", gateway.DefaultSessionTimeout, "With --sessions, how long a session lives without a request.")
	flag.DurationVar(&o.SessionLifetime, "session-lifetime", gateway.DefaultSessionLifetime, "With --sessions, how long a session lives however busy; the client initializes again.")
	flag.IntVar(&o.MaxSessions, "max-sessions", gateway.DefaultMaxSessions, "With --sessions, the most sessions held at once; more initialize requests get 429.")
	flag.IntVar(&o.MaxSessionsPerClient, "max-sessions-per-client", gateway.DefaultMaxSessionsPerClient, "With --sessions, the most sessions held at once for one client address, and for one authenticated caller.")
	flag.StringVar(&authMode, "auth", "none", `How callers are authenticated: "none" (every caller may call every tool; trusted networks only), "kubernetes" (TokenReview), `+
		`"oidc" (the JWTs of the issuers of --authentication-config) or "kubernetes,oidc" (a JWT of those issuers is theirs to accept or refuse; any other token goes to TokenReview). `+
		"Every authenticated caller is authorized by a SubjectAccessReview per tool.")
	flag.StringVar(&sso.config, "authentication-config", "", "With --auth=oidc or kubernetes,oidc, an apiserver.config.k8s.io AuthenticationConfiguration file, as kube-apiserver's --authentication-config takes: "+
		"the issuers, their audiences and CAs, the claim mappings (username and groups, with prefixes) and the claim validation rules.")
	flag.StringVar(&sso.publicURL, "public-url", "", "The gateway's URL as its clients reach it (https://tools.example.com, no path), the iss of its transaction tokens: with --auth, it serves OAuth protected resource metadata (RFC 9728) "+
		"at /.well-known/oauth-protected-resource/<path> and names it in every 401, so that MCP clients find where to sign in. Required with oidc.")
	flag.StringVar(&sso.scopes, "oauth-scopes", "openid", "With --public-url, the scopes (comma-separated) a client should ask for: the metadata's scopes_supported, and scope in WWW-Authenticate.")
	flag.StringVar(&audiences, "token-audience", "", "With kubernetes in --auth, the audiences (comma-separated) a ServiceAccount token must be issued for; empty means the API server's own.")
	flag.DurationVar(&authTTL, "auth-cache-ttl", gateway.DefaultAuthCacheTTL, "With --auth, how long token reviews, accepted IdP tokens (never past their exp) and access decisions that allow are reused: how long a revoked grant can still work.")
	flag.DurationVar(&authDenyTTL, "auth-deny-cache-ttl", gateway.DefaultAuthDenyCacheTTL, "With --auth, how long access decisions that deny are reused: how long a new grant can take to show.")
	flag.Float64Var(&authQPS, "auth-qps", gateway.DefaultReviewQPS, "With --auth, the most SubjectAccessReviews per second sent to the API server, whatever callers do, and apart from them the most TokenReviews; more wait.")
	flag.IntVar(&authBurst, "auth-burst", gateway.DefaultReviewBurst, "With --auth, the reviews that may be sent at once above --auth-qps.")
	flag.IntVar(&o.MaxReviewsPerRequest, "max-reviews-per-request", gateway.DefaultMaxReviewsPerRequest,
		"With --auth, the most authorization questions one request may ask that the cache cannot answer; a tools/list page stops short there (with a nextCursor), a GET /v1/tools answers 503 to be retried.")
	flag.StringVar(&o.ClusterDomain, "cluster-domain", "cluster.local",
		"The cluster's DNS domain. Tools are routed only to <service>.<namespace>.svc.<cluster-domain> of their own namespace, dialed fully qualified.")
	flag.Var(&resolve, "resolve", "host:port=ip:port: dial ip:port for the workload endpoint host:port (name.namespace.svc.<cluster-domain>:port), as curl's --resolve does; repeatable. "+
		"For running outside a cluster (the demo, tests), where Service names do not resolve; in a cluster leave it unset.")
	var embedURL, embedModel string
	var embedTimeout time.Duration
	flag.StringVar(&embedURL, "search-embeddings-url", "", "The base URL of an OpenAI-compatible /v1/embeddings endpoint (vLLM, TEI, Ollama in the cluster) for search's semantic stage, fused with the lexical ranking; empty means lexical only. Tools are embedded off the request path.")
	flag.StringVar(&embedModel, "search-embeddings-model", "", "With --search-embeddings-url, the model named in each request.")
	flag.DurationVar(&embedTimeout, "search-embed-timeout", search.DefaultEmbedTimeout, "With --search-embeddings-url, how long a query may wait for its embedding before the search answers lexically.")
	var auditLog string
	flag.StringVar(&auditLog, "audit-log", "", `Write the audit log, one JSON line per tools/call (who, what, the decision, the outcome; never arguments or results), to "stdout" or to a file (opened for appending); empty means no audit log.`)
	flag.BoolVar(&o.AuditArguments, "audit-arguments", false, "With --audit-log, add each call's arguments to its line, every value the tool's input schema marks sensitive (writeOnly, x-sensitive) redacted.")
	flag.IntVar(&o.AuditBuffer, "audit-buffer", gateway.DefaultAuditBuffer, "With --audit-log, the lines waiting for the sink at most; a line that finds it full is dropped and counted in toolplane_gateway_audit_dropped_total, so a stalled sink never holds up a call.")
	flag.IntVar(&o.MaxCallsPerCallerPerMinute, "max-calls-per-caller-per-minute", 0,
		"The most calls one caller (its user name under --auth, its address without) may make of one tool per minute, in each replica; 0 means no limit. A ToolSet's spec.limits.callsPerMinute bounds every caller together.")
	flag.DurationVar(&o.CredentialsTTL, "backend-credentials-ttl", gateway.DefaultCredentialsTTL, "With --backend-credentials=kubernetes, how long a ToolSet's token and CA are reused before they are read again: how long a rotation takes to be used.")
	flag.IntVar(&o.BackendFailures, "backend-failures", gateway.DefaultBackendFailures, "The transport failures in a row (unreachable, timed out; never a tool's own error) that open a ToolSet's circuit, whose calls then fail at once; negative never opens one.")
	flag.DurationVar(&o.BackendCooldown, "backend-cooldown", gateway.DefaultBackendCooldown, "How long an open circuit fails its ToolSet's calls at once before one call probes the workload again.")
	var txnKeyDir string
	var txnLifetime time.Duration
	flag.StringVar(&txnKeyDir, "txn-token-key-dir", "",
		"With --auth, sign a transaction token (Txn-Token header) naming the caller for every call routed to a workload, with the keys of this directory "+
			"(current.key, and previous.key while rotating: PEM or JWK, ECDSA P-256 or Ed25519), reread every 10s; their public keys are served at /.well-known/jwks.json. Empty sends none.")
	flag.DurationVar(&txnLifetime, "txn-token-lifetime", gateway.DefaultTxnTokenLifetime, "With --txn-token-key-dir, how long a transaction token is valid.")
	var taskKeyFile string
	flag.StringVar(&taskKeyFile, "task-key-file", "",
		"A file holding the secret (at least 32 bytes, a mounted Secret's key) that MCP task ids are sealed with; every replica needs the same, so that a task started through one is polled through another. "+
			"Empty seals with a random key of each replica's own: a task is then reached only through the replica that started it.")
	flag.IntVar(&o.MaxTasksPerCaller, "max-tasks-per-caller", gateway.DefaultMaxTasksPerCaller, "The most MCP tasks one caller (user under --auth, address without) has running through one replica; with N replicas, N times as many.")
	flag.DurationVar(&o.MaxTaskTTL, "max-task-ttl", gateway.DefaultMaxTaskTTL, "The longest ttl of an MCP task: a longer one asked for is clamped to it, and a task id expires with its task's ttl.")
	flag.StringVar(&logLevel, "log-level", "info", "The least level logged: debug, info, warn or error.")
	flag.Parse()
	if embedURL != "" {
		o.Search = &search.Options{Embedder: &embedding.OpenAI{URL: embedURL, Model: embedModel}, EmbedTimeout: embedTimeout}
	}
	if len(resolve) > 0 {
		o.DialContext = resolve.dialer(o.ClusterDomain)
	}

	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		fmt.Fprintln(os.Stderr, "gateway: --log-level:", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	// controller-runtime's packages (the kubeconfig loader, the metrics
	// filter) log through its global logger: give it the same sink, or it
	// warns that it has none and drops what they say.
	ctrl.SetLogger(logr.FromSlogHandler(log.Handler()))
	slog.SetDefault(log)
	switch auditLog {
	case "":
	case "stdout":
		o.AuditLog = os.Stdout
	default:
		// O_APPEND: each line is one write at the end of the file, so that
		// a log shipper's rotation (copytruncate) or a second writer never
		// interleaves within a line.
		f, err := os.OpenFile(auditLog, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			fmt.Fprintln(os.Stderr, "gateway: --audit-log:", err)
			os.Exit(2)
		}
		o.AuditLog = f // open for the process's life; run's g.Close writes out the lines queued
	}
	if taskKeyFile != "" {
		key, err := gateway.LoadTaskKey(taskKeyFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "gateway: --task-key-file:", err)
			os.Exit(2)
		}
		o.TaskKey = key
	} else {
		log.Info("MCP task ids are sealed with a key of this replica's own; with more than one replica, give every replica the same --task-key-file")
	}
	if txnKeyDir != "" {
		tokens, err := gateway.NewTxnTokens(gateway.TxnTokenOptions{KeyDir: txnKeyDir, Issuer: sso.publicURL, Lifetime: txnLifetime, Logger: log})
		if err != nil {
			fmt.Fprintln(os.Stderr, "gateway: --txn-token-key-dir:", err)
			os.Exit(2)
		}
		o.TxnTokens = tokens
	}
	ka := &gateway.KubernetesAuth{TTL: authTTL, DenyTTL: authDenyTTL}
	for _, a := range strings.Split(audiences, ",") {
		if a = strings.TrimSpace(a); a != "" {
			ka.Audiences = append(ka.Audiences, a)
		}
	}
	if err := cert.check(); err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(2)
	}
	if authQPS <= 0 || authBurst <= 0 {
		fmt.Fprintln(os.Stderr, "gateway: --auth-qps and --auth-burst must be positive")
		os.Exit(2)
	}
	if err := run(log, addr, probeAddr, metricsAddr, metricsSecure, tableNamespace, tableName, authMode, ka, float32(authQPS), authBurst, srv, sso, cert, o); err != nil {
		log.Error("The gateway stopped", "error", err)
		os.Exit(1)
	}
}

// Defaults of the client-facing server's timeouts.
const (
	defaultReadHeaderTimeout = 10 * time.Second
	// defaultReadTimeout bounds a whole request; bodies are at most
	// --max-body-bytes (1 MiB) and come from inside the cluster.
	defaultReadTimeout = 30 * time.Second
	defaultIdleTimeout = 60 * time.Second
	// maxReadyDetail bounds the open circuits /readyz lists.
	maxReadyDetail = 50
	// maxHeaderBytes bounds a request's header, well above what any MCP
	// client sends (Go's default is 1 MiB).
	maxHeaderBytes = 64 << 10
)

// logIssuerHealth says when every OIDC issuer has been reached, and
// warns every minute until then: the gateway serves (ServiceAccount
// tokens, and the tokens of the issuers it reached) whether or not an IdP
// answers, so the log is where an unreachable one shows.
func logIssuerHealth(ctx context.Context, log *slog.Logger, jwt *gateway.JWTAuthenticator) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	start := time.Now()
	warned := start
	for {
		err := jwt.Healthy()
		if err == nil {
			log.Info("Reached every OIDC issuer (its discovery document)", "issuers", jwt.Issuers())
			return
		}
		if time.Since(warned) >= time.Minute {
			log.Warn("An OIDC issuer is not reachable yet: its tokens are refused", "error", err, "for", time.Since(start).Round(time.Second))
			warned = time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// signIn holds the flags of OIDC sign-in and of the protected resource
// metadata.
type signIn struct{ config, publicURL, scopes string }

// serverTimeouts are the timeouts of the client-facing server. It has no
// WriteTimeout: that would end every notification stream; each write gets
// a deadline of its own instead (gateway.Options.WriteTimeout). pprofAddr
// is the address of net/http/pprof ("" or "0": none).
type serverTimeouts struct {
	readHeader, read, idle time.Duration
	pprofAddr              string
}

func run(log *slog.Logger, addr, probeAddr, metricsAddr string, metricsSecure bool, tableNamespace, tableName, authMode string,
	ka *gateway.KubernetesAuth, authQPS float32, authBurst int, srv serverTimeouts, sso signIn, cert servingCert, o gateway.Options) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	o.Registerer = reg
	o.Logger = log
	o.Version = version

	modes := map[string]bool{}
	for _, m := range strings.Split(authMode, ",") {
		modes[strings.TrimSpace(m)] = true
	}
	switch {
	case authMode == "none":
		log.Warn("Serving without authentication (--auth=none): every caller may list and call every tool")
	case len(modes) == 1 && modes["kubernetes"], len(modes) == 1 && modes["oidc"], len(modes) == 2 && modes["kubernetes"] && modes["oidc"]:
		// The reviews get clients of their own, whose rate limits bound
		// them whatever callers do: a storm of them cannot reach the API
		// server, the table's watch does not wait behind them, and forged
		// tokens (TokenReviews, which anyone may cause) do not delay the
		// SubjectAccessReviews of authenticated callers.
		reviews := rest.CopyConfig(cfg)
		reviews.QPS, reviews.Burst, reviews.RateLimiter = authQPS, authBurst, nil
		if ka.Client, err = kubernetes.NewForConfig(reviews); err != nil {
			return err
		}
		if ka.TokenClient, err = kubernetes.NewForConfig(reviews); err != nil {
			return err
		}
		o.Auth = ka
		if !modes["oidc"] {
			break
		}
		if sso.config == "" || sso.publicURL == "" {
			return errors.New("--auth with oidc needs --authentication-config and --public-url")
		}
		ac, err := gateway.LoadAuthenticationConfiguration(sso.config)
		if err != nil {
			return fmt.Errorf("--authentication-config: %w", err)
		}
		jwt, err := gateway.NewJWTAuthenticator(ctx, ac)
		if err != nil {
			return fmt.Errorf("--authentication-config: %w", err)
		}
		go logIssuerHealth(ctx, log, jwt)
		o.Auth = &gateway.OIDCAuth{JWT: jwt, Kubernetes: ka, Review: modes["kubernetes"], Logger: log}
		o.ProtectedResource = &gateway.ProtectedResource{AuthorizationServers: jwt.Issuers()}
	default:
		return fmt.Errorf(`--auth must be "none", "kubernetes", "oidc" or "kubernetes,oidc", not %q`, authMode)
	}
	if sso.publicURL != "" && o.Auth != nil {
		if err := gateway.CheckURL(sso.publicURL); err != nil {
			return fmt.Errorf("--public-url: %w", err)
		}
		if o.ProtectedResource == nil {
			o.ProtectedResource = &gateway.ProtectedResource{}
		}
		o.ProtectedResource.URL = sso.publicURL
		for _, sc := range strings.Split(sso.scopes, ",") {
			if sc = strings.TrimSpace(sc); sc != "" {
				o.ProtectedResource.Scopes = append(o.ProtectedResource.Scopes, sc)
			}
		}
	}

	if o.Credentials, err = newCredentials(cfg, *backendCredentials); err != nil {
		return err
	}
	tp, shutdownTracing, err := setupTracing(ctx, log)
	if err != nil {
		return err
	}
	defer func() { _ = shutdownTracing(context.Background()) }()
	o.TracerProvider = tp

	if o.TxnTokens != nil {
		if o.Auth == nil {
			log.Warn("Minting no transaction tokens (--txn-token-key-dir) without authentication: there is no caller to vouch for")
		}
		go o.TxnTokens.Run(ctx)
	}
	g := gateway.New(&o)
	defer g.Close()

	servers := []*http.Server{{Addr: addr, Handler: g, ReadHeaderTimeout: srv.readHeader, ReadTimeout: srv.read,
		IdleTimeout: srv.idle, MaxHeaderBytes: maxHeaderBytes}}
	servers[0].RegisterOnShutdown(func() { _ = g.Close() })
	probes := http.NewServeMux()
	probes.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	probes.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !g.Ready() {
			http.Error(w, "no tool table yet", http.StatusServiceUnavailable)
			return
		}
		// Open circuits are detail, not unreadiness: one bad workload
		// must not take every other tool away.
		_, _ = w.Write([]byte("ok"))
		open := g.OpenCircuits()
		for i, c := range open {
			if i == maxReadyDetail {
				_, _ = fmt.Fprintf(w, "\nand %d more open circuits", len(open)-i)
				break
			}
			_, _ = fmt.Fprintf(w, "\ncircuit %s: ToolSet %s (%d failures in a row)", c.State, c.ToolSet, c.Failures)
		}
	})
	// The probe and metrics servers answer small GETs: the same read and
	// idle timeouts, and a write timeout of their own.
	small := func(addr string, h http.Handler) *http.Server {
		return &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: srv.readHeader, ReadTimeout: srv.read,
			IdleTimeout: srv.idle, WriteTimeout: o.WriteTimeout, MaxHeaderBytes: maxHeaderBytes}
	}
	servers = append(servers, small(probeAddr, probes))
	if metricsAddr != "0" && metricsAddr != "" {
		m := http.NewServeMux()
		m.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		s := small(metricsAddr, m)
		if metricsSecure {
			if err := secureMetrics(cfg, s, log); err != nil {
				return err
			}
		}
		servers = append(servers, s)
	}

	if srv.pprofAddr != "" && srv.pprofAddr != "0" {
		m := http.NewServeMux()
		m.HandleFunc("/debug/pprof/", pprof.Index)
		m.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		m.HandleFunc("/debug/pprof/profile", pprof.Profile)
		m.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		m.HandleFunc("/debug/pprof/trace", pprof.Trace)
		// A CPU profile or trace lasts as long as it is asked to.
		servers = append(servers, &http.Server{Addr: srv.pprofAddr, Handler: m, ReadHeaderTimeout: srv.readHeader,
			ReadTimeout: srv.read, IdleTimeout: srv.idle, MaxHeaderBytes: maxHeaderBytes})
	}

	// The client-facing server listens through the gateway's connection
	// bounds (--max-conns, --max-conns-per-client), and TLS within them:
	// a connection over a bound is answered 429 or 503 over TLS too.
	tlsConfig, err := cert.tlsConfig(ctx, log, o.Auth != nil)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	client := g.TLSListener(l, tlsConfig)
	listeners := map[*http.Server]net.Listener{servers[0]: client}
	errs := make(chan error, len(servers))
	for _, s := range servers {
		go func() {
			serve := s.ListenAndServe
			if l, ok := listeners[s]; ok {
				serve = func() error { return s.Serve(l) }
			}
			if s.TLSConfig != nil {
				serve = func() error { return s.ListenAndServeTLS("", "") }
			}
			if err := serve(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("serving %s: %w", s.Addr, err)
			}
		}()
	}
	// The probes answer from the start (not ready) while the table loads.
	if err := gateway.WatchTable(ctx, cfg, tableNamespace, tableName, g); err != nil {
		return err
	}
	log.Info("Started the gateway", "addr", addr, "tableNamespace", tableNamespace, "tableName", tableName,
		"auth", authMode, "tls", cert.certFile != "", "sessions", o.Sessions, "revision", g.Revision())

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errs:
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, s := range servers {
		runErr = errors.Join(runErr, s.Shutdown(shutdown))
	}
	log.Info("Stopped the gateway")
	return runErr
}

// resolveFlag maps workload host:port pairs to the addresses to dial.
type resolveFlag map[string]string

func (f *resolveFlag) String() string { return fmt.Sprint(map[string]string(*f)) }

func (f *resolveFlag) Set(v string) error {
	from, to, ok := strings.Cut(v, "=")
	if !ok || from == "" || to == "" {
		return fmt.Errorf("want host:port=ip:port, not %q", v)
	}
	if *f == nil {
		*f = resolveFlag{}
	}
	(*f)[from] = to
	return nil
}

// dialer dials the address mapped for each address, and refuses any other:
// outside a cluster nothing else is a workload. The gateway dials Services
// by their fully qualified names; a mapping given for the short
// name.namespace.svc:port serves as well.
func (f resolveFlag) dialer(clusterDomain string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	suffix := ".svc." + strings.Trim(clusterDomain, ".")
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		to, ok := f[addr]
		if host, port, err := net.SplitHostPort(addr); !ok && err == nil && strings.HasSuffix(host, suffix) {
			to, ok = f[net.JoinHostPort(strings.TrimSuffix(host, suffix)+".svc", port)]
		}
		if !ok {
			return nil, fmt.Errorf("no --resolve for %s", addr)
		}
		return (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, to)
	}
}

// secureMetrics puts the metrics server behind the API server's
// authentication and authorization, as the manager's --metrics-secure does
// with the same filter (internal/metricsauth): a caller needs a token the API
// server accepts (TokenReview) and the right to GET /metrics
// (SubjectAccessReview). It serves HTTPS with a self-signed certificate
// made at start, HTTP/2 off (Rapid Reset, CVE-2023-44487).
func secureMetrics(cfg *rest.Config, s *http.Server, log *slog.Logger) error {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return fmt.Errorf("securing metrics: %w", err)
	}
	filter, err := metricsauth.WithAuthenticationAndAuthorization(cfg, httpClient)
	if err != nil {
		return fmt.Errorf("securing metrics: %w", err)
	}
	h, err := filter(logr.FromSlogHandler(log.Handler()).WithName("metrics"), s.Handler)
	if err != nil {
		return fmt.Errorf("securing metrics: %w", err)
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("localhost", nil, nil)
	if err != nil {
		return fmt.Errorf("securing metrics: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("securing metrics: %w", err)
	}
	s.Handler = h
	s.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12}
	return nil
}
