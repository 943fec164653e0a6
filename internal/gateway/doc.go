// Package gateway serves every tool of the toolplane tool table behind one
// MCP endpoint, for agents in any namespace and any language; cmd/gateway
// runs it.
//
// # What it serves
//
//   - /mcp: MCP Streamable HTTP through the official Go SDK, for clients of
//     both protocol eras (2025-11-25 with initialize, 2026-07-28 with
//     server/discover), stateless by default. tools/list lists the table's
//     tools under their published names, page by page (Options.PageSize;
//     the cursor is the last name of a page, so it stays valid across table
//     revisions). tools/call is routed to the owner's invoke endpoint under
//     the tool's source name, and the workload's result comes back
//     unchanged. A stateless tools/call that needs no stream (no progress
//     token, task, elicitation or sampling, a supported protocol version)
//     is answered without the SDK's per-request session, by the same
//     decision and call code, with the status, headers and body the SDK
//     would write (fastcall.go); everything else goes to the SDK.
//   - /mcp/namespaces/{namespace} and /mcp/toolsets/{namespace}/{name}: the
//     same, for the tools of one namespace's ToolSets or of one ToolSet.
//   - GET /v1/tools: the table as one JSON document, in the format of the
//     ConfigMap's tools.json, with its revision as ETag, 304 and gzip.
//     toolkit/discovery's LoadURL and WatchURL read it.
//   - /mcp/search, GET /v1/search and /catalog: search, for agents and
//     people who cannot read the whole table (see Search below).
//
// # Search
//
// A model cannot read a cluster's worth of tool definitions on every turn,
// so the gateway answers a task in plain words with the few tools that fit
// it. Each snapshot of the table (built once per revision in SetTable)
// carries a toolkit/search index, updated from the last snapshot's rather
// than rebuilt, immutable, and shared by every request of the replica; no
// request does per-table work, and a request that arrives after the
// gateway has taken a table sees that table's index, so a published tool is
// found in the revision that has it and a removed one is never returned
// again.
//
//   - GET /v1/search?q=TEXT&limit=N&namespace=NS&toolSet=NS/NAME (and
//     readOnly, destructive, category) answers {"revision", "tools",
//     "ttlMs", "cacheScope"}: table entries exactly as the table holds them
//     plus a "score", best first. limit is 10 by default and lowered to 50;
//     a query is at most MaxQueryBytes. A bad request is 400 with toolkit's
//     JSON error body. HTTP caches are told no-cache (private under auth):
//     ttlMs and cacheScope are the hints for the client's own cache.
//   - /mcp/search is an MCP endpoint through the same SDK server as /mcp,
//     both eras, stateless: the HTTP handler marks the request (a header
//     the handlers set and strip, as they do the view's), and a receiving
//     middleware outside the table's answers tools/list with two
//     meta-tools. search_tools {"query", "limit"} gives /v1/search's answer
//     as structuredContent and a line per tool, with its parameters, as
//     text; call_tool {"name", "arguments"} becomes the tools/call of that
//     name and goes down the same chain as a tools/call on /mcp, so its
//     authorization, view, timeout and result are exactly those. Any
//     other tools/call there is the table tool of that name. A table tool
//     named search_tools or call_tool is reached through call_tool.
//   - /mcp/namespaces/{namespace}/search and
//     /mcp/toolsets/{namespace}/{name}/search are the same for one view:
//     the view's header filters the search and limits call_tool as it
//     limits tools/call on the view.
//
// With Options.Search.Embedder the index has a semantic stage fused with
// the lexical ranks: each new revision's new and changed tools are
// embedded by a goroutine of the gateway, retried with backoff while the
// endpoint fails and abandoned once a newer revision is served; until then,
// and for a query that cannot be embedded in time, searches are lexical.
//
// Under Options.Auth the index asks Gateway.permits about its candidates
// through search.Filter.Allow, best first and only until the limit is
// filled, so a search never returns a tool the caller may not call and its
// limit still fills with tools it may. One search asks about at most 2,000
// candidates and draws on the request's review budget
// (Options.MaxReviewsPerRequest, shared with call_tool's call): a caller
// granted few of many matches gets fewer results, not a request that
// authorizes the table, and since decisions are cached the same search
// asked again goes further. A spent budget answers with the tools decided
// so far; an authorizer that fails answers nothing (503, or a JSON-RPC
// error) rather than too much.
//
// # Catalog
//
// /catalog is a server-rendered page (html/template) for the people who
// run and use the cluster: a search box (GET, so a result is a link), the
// tools found or, without a query, the first 100 by name, each with its
// owner ToolSet, description and state (Published, or Unroutable with the
// reason), and /catalog/tool?name=NAME for one tool: its parameters as a
// table (nested ones under their parent, bounded), its schemas as JSON, its
// owner, endpoints and annotations. A tool name is a query parameter, not
// a path segment, because "." and ".." are valid tool names. Pages carry
// no script and load nothing: Content-Security-Policy default-src 'none',
// the one inline stylesheet allowed by its sha256, form-action 'self',
// frame-ancestors 'none'. Under Options.Auth the catalog wants the bearer
// token of /mcp and shows only what the caller may call; the page of any
// other tool is 404, as an unknown one.
//
// # Calls
//
// The gateway calls a workload at its invoke endpoint, POST
// /tools/{sourceName}, over keep-alive HTTP: one request per call, no MCP
// session to set up or keep, and the workload's lenient binder sees the
// arguments exactly as the client sent them. The reply is an MCP
// CallToolResult already, so it passes through as it is (structuredContent
// byte for byte). Each call is bounded by Options.CallTimeout, the reply by
// Options.MaxResultBytes, and the calls in flight by
// Options.MaxConcurrentCalls.
//
// A tool of protocol MCP, from an MCP server that toolkit did not write (a
// ToolSet with spec.protocol MCP), has no invoke endpoint. The gateway
// calls it at its MCP endpoint with tools/call under its source name,
// through the Go SDK client, in the server's own protocol era: for a 2025
// server that keeps sessions it opens one for the call (initialize, the
// call, DELETE). The result passes on as the SDK decodes it, every content
// type included (structuredContent as decoded JSON, not byte for byte), and
// the same timeout, bounds and concurrency apply.
//
// What a backend says while a call runs (progress, log messages,
// elicitation and sampling requests) is relayed to the client that asked
// for it, on the call's own stream and in the client's own protocol era:
// see relay.go, and relay_park.go for a 2025 backend's question to a
// 2026-07-28 client. A toolkit workload is called at its MCP endpoint for
// such a call, and at its invoke endpoint otherwise.
//
// A workload that is down, hangs, or answers
// with something that is not a result gives the client an isError result
// that names the tool and its owner ToolSet. Only the caller's trace
// context (W3C traceparent, baggage) is passed to the workload; its
// Authorization header never is.
//
// # Backends
//
// With Options.Credentials (see [KubernetesCredentials]) each ToolSet's
// workload is called with its own spec.authorization bearer token and
// spec.tls trust (a client of its own per ToolSet with TLS settings), read
// on its first call and kept for Options.CredentialsTTL (backend.go). The
// token goes only over https, only to the call's own Service host, never
// with anything of the caller's, and never into a log or an error.
//
// Each ToolSet has a circuit (circuit.go): Options.BackendFailures
// transport failures in a row open it, and its calls fail at once, naming
// it, for Options.BackendCooldown; then one call probes the workload. A
// tool's own isError, a refusal (an HTTP error status) and a call whose
// caller gave up never count. [Gateway.OpenCircuits] lists the open ones.
//
// # Traces
//
// The gateway makes spans of its own with Options.TracerProvider
// (tracing.go): a server span per tools/list and tools/call, parented to
// the trace context of the request's header or its _meta.traceparent, and
// inside it authorize, route (circuit and credentials) and call, a client
// span whose context the workload's header carries.
//
// An endpoint must be a Service of the owner ToolSet's own namespace
// (<service>.<namespace>.svc) and, an invoke endpoint, name the tool's
// source name; a tool whose
// endpoint is not is left out of the MCP lists and cannot be called.
//
// # list_changed
//
// When the table's revision changes, 2026-07-28 clients that listen
// (subscriptions/listen) get notifications/tools/list_changed. 2025-era
// clients get it on their session's stream only with Options.Sessions, which
// gives them sessions; a session lives in one replica, so several replicas
// then need sticky sessions. A listener is sent it only when the change
// touched a tool of its view as tools/list shows it and, with Auth, one it
// may call (listchanged.go).
//
// # Audit and call limits
//
// callTool (mcp.go) is the one funnel of every tools/call: it decides the
// call (the tool is in the view, the caller may call it, the limits of
// ratelimit.go let it through), routes it with g.call, and writes its one
// line of Options.AuditLog (audit.go), never blocking on the sink.
//
// # Bounds
//
// Nothing one client sends, and nothing one workload answers, makes the
// gateway hold more than a bound of [Options] (limits.go, sessions.go),
// applied in [Gateway.ServeHTTP] in front of every endpoint and in
// [Gateway.Listener]: JSON-RPC batches are refused (no supported
// protocol era needs them); connections, notification streams and
// sessions are bounded per client address and in all, and streams and
// sessions have a lifetime; every write to a client has a deadline;
// request bodies, tools/list pages and workloads' results in flight are
// bounded in bytes or number until their answer is written; and a
// workload's response header is bounded. docs/operations.md adds them up
// against the chart's memory limit.
//
// # Authorization
//
// With Options.Auth (see [KubernetesAuth]) a caller presents a bearer
// token, and sees and may call only the tools it is granted: verb call on
// resource tools of group toolplane.io, named by the published name, in the
// owner ToolSet's namespace. Lists and GET /v1/tools are filtered the same
// way, and the 2026 cache fields of a list say cacheScope private. Without
// it, every caller sees and calls every tool: for trusted networks only.
//
// Every path that shows or calls a tool asks through one gate, which asks
// the broad questions first (every namespace, then the tool's namespace,
// then the tool) and bounds the questions one request may ask that the
// Authorizer cannot answer from memory ([Options.MaxReviewsPerRequest],
// 1,000): a tools/list page that reaches the bound ends there with a
// nextCursor, and GET /v1/tools answers 503 with Retry-After rather than a
// table with tools missing; the answers given are kept, so the retry goes
// further. [KubernetesAuth] keeps decisions by [Caller.Key] (user, uid,
// groups and the extra a review carries, all but the token's credential
// id, so every token of a ServiceAccount shares them), an allow for its
// TTL and a deny for its DenyTTL, and makes concurrent identical reviews
// one. What a caller may see of a table is kept per key and revision, so a
// poll or a 304 asks nothing, and its document is written from the table's
// own bytes. cmd/gateway gives SubjectAccessReviews and TokenReviews a
// client each, whose rate limits (--auth-qps, --auth-burst) bound what the
// API server sees, whatever callers do, and keep forged tokens from
// delaying authenticated callers.
//
// [OIDCAuth] authenticates people's agents by their identity provider's
// JWTs, with the API server's own JWT authenticator configured by an
// AuthenticationConfiguration ([LoadAuthenticationConfiguration]), and
// authorizes them with [KubernetesAuth]'s SubjectAccessReviews, so
// RoleBindings to IdP users and groups grant tools; a token's iss decides
// whether it is the IdP's or goes to a TokenReview. With
// Options.ProtectedResource the gateway is an OAuth protected resource: it
// serves RFC 9728 metadata at [ResourceMetadataPath] (and under it, per
// endpoint), and every 401 names it in WWW-Authenticate, so that an MCP
// client without a token finds where to get one.
package gateway
