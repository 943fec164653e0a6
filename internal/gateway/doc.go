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
//     unchanged.
//   - /mcp/namespaces/{namespace} and /mcp/toolsets/{namespace}/{name}: the
//     same, for the tools of one namespace's ToolSets or of one ToolSet.
//   - GET /v1/tools: the table as one JSON document, in the format of the
//     ConfigMap's tools.json, with its revision as ETag, 304 and gzip.
//     toolkit/discovery's LoadURL and WatchURL read it.
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
// A workload that is down, hangs, or answers
// with something that is not a result gives the client an isError result
// that names the tool and its owner ToolSet. Only the caller's trace
// context (W3C traceparent, baggage) is passed to the workload; its
// Authorization header never is.
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
// then need sticky sessions.
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
package gateway
