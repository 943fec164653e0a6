// Package server serves a [toolkit.Registry] over HTTP: the spec document
// that the toolplane operator scrapes, a plain invoke endpoint for simple
// agents, and MCP for every MCP client. One [Handler] serves all three
// from the same registry, so they always offer the same tools, bind
// arguments the same way and run the same middleware.
//
//	reg := new(toolkit.Registry)
//	reg.Add(toolkit.MustNew("get_weather", "Current weather of a city", getWeather))
//	h, err := server.NewHandler(reg, &server.Options{Name: "weather-tools"})
//	if err != nil {
//		log.Fatal(err)
//	}
//	srv := &http.Server{Addr: ":8080", Handler: h}
//	srv.RegisterOnShutdown(func() { h.Close() })
//
// [New] is NewHandler for options known to be right: it panics on what
// NewHandler returns as an error. A Handler also ends its MCP streams when
// the http.Server of a request it served shuts down, so that Shutdown never
// waits on them; Close, which also stops following the registry, stays
// the owner's to call.
//
// # Inside an MCP server of your own
//
// [AddTools] puts a registry's tools on a go-sdk [mcp.Server] that you
// own and serve over any transport (stdio, Streamable HTTP, in memory),
// beside your own prompts, resources and tools, with the same binding,
// results, progress, content and middleware as the Handler's /mcp, which
// is built on it:
//
//	s := mcp.NewServer(&mcp.Implementation{Name: "weather-tools"}, nil)
//	tools, err := server.AddTools(s, reg, nil)
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer tools.Close()
//	err = s.Run(ctx, &mcp.StdioTransport{})
//
// A tool reaches the MCP request that called it with [CallToolRequest]
// (the session, the client's capabilities, _meta), and asks its user for
// input with [toolkit.Ask] (or [Elicit], with the SDK's types): a 2025
// client is asked during the call (elicitation/create); a 2026-07-28 one
// gets the question as the call's input_required result and calls again
// with the answer, which runs the tool again, so a tool does nothing
// before it asks that should not be done twice. Where the client cannot
// answer, the error matches [toolkit.ErrCannotAsk] (and
// [ErrElicitationUnsupported]), so that the tool carries on without.
// cmd/example-tools --stdio is a complete example (delete_ticket asks).
// # Endpoints
//
// GET /.well-known/toolplane/tools ([spec.DefaultPath], see
// [Options.SpecPath]) returns the [spec.Document]: the tools sorted by name,
// each a valid MCP Tool, and the registry's revision, which is also the
// reply's ETag. A request whose If-None-Match holds the current ETag is
// answered 304 with no body, so a scrape that finds nothing new costs next
// to nothing.
//
// POST /tools/{name} calls a tool with the request body as its arguments.
// It keeps web pages out as /mcp does: the body must be application/json,
// a request that a browser marks cross-origin is refused, and so is one on
// a loopback address whose Host is not a loopback name. Each check has an
// option to turn it off ([Options.AllowAnyContentType],
// [Options.AllowCrossOrigin] or [Options.CrossOriginProtection], and
// [Options.AllowAnyHostOnLoopback]).
// The reply is 200 with a [spec.CallResult] (an MCP CallToolResult), also
// when the arguments were wrong or the tool failed: then isError is set and
// the text says what went wrong, so that a model can correct itself. Other
// failures have a JSON [spec.ErrorResponse] body:
//
//	403 forbidden            a cross-origin browser request, or a foreign Host
//	                         on a loopback address (DNS rebinding)
//	415 unsupported_media_type  a body not sent as application/json
//	404 tool_not_found       no tool of that name
//	400 bad_request          a body that could not be read
//	413 body_too_large       a body over Options.MaxBodyBytes (1 MiB)
//	405 method_not_allowed   any method but POST (the spec document: GET, HEAD)
//
// The 404 of an unknown tool names the tool most likely meant, as MCP's
// tools/call error does ("did you mean").
//
// /mcp serves MCP Streamable HTTP through the official MCP Go SDK. Its
// tools/list returns the spec document's tools, and its tools/call returns
// what invoke returns for the same arguments. Tools are registered with the
// SDK as raw tools, so the arguments a client sends reach toolkit's lenient
// binding untouched: the SDK's strict decoding never runs. A tool's image,
// audio and resource blocks are sent as MCP's own content types, and what
// it reports with toolkit.Progress and toolkit.Log becomes
// notifications/progress (for a call that carries a progressToken) and
// notifications/message (at or above the level the client set) on that
// call's stream; the server advertises the logging capability for it.
//
// # MCP protocol eras and list_changed
//
// /mcp answers clients of both MCP protocol eras. How a change of the
// registry reaches a client depends on its era:
//
//   - 2026-07-28 clients (server/discover, SEP-2575) are always served
//     statelessly. They receive notifications/tools/list_changed on a
//     subscriptions/listen request, which stays open for as long as the
//     client listens.
//   - 2025-era clients (initialize, such as 2025-11-25) are served
//     statelessly by default too: every request stands alone, which is what
//     several replicas behind one Kubernetes Service need. Such a client
//     gets no notifications, since the stateless transport has no standalone
//     SSE stream (its GET is answered 405, which clients expect); it sees a
//     change the next time it lists tools. With [Options.MCPSessions], a
//     2025-era client gets a session instead, and with it the standalone SSE
//     stream on which list_changed arrives. Sessions live in one process: use
//     them with one replica, or with session affinity.
//
// # The caller
//
// Each call's context carries a [toolkit.Caller] for the authorization
// hook and the tools: the request's HTTP header, and the subject and
// scopes that an outer middleware put in the request's context with
// [toolkit.WithCaller], or otherwise those of a bearer token verified by
// the MCP SDK's auth.RequireBearerToken middleware.
//
// On invoke and on stateless MCP the tool's context derives from the HTTP
// request's, so values that outer middleware put there, such as the span
// of an instrumented HTTP handler, reach the tool and the tracing
// middleware. In an MCP session (Options.MCPSessions) the context is the
// session's, so only the header and the verified token are per request;
// [Options.CallContext] derives the context from the header on every
// transport, for example to extract a W3C trace context.
//
// # Tasks
//
// A tool declared with [toolkit.TaskSupport] may (optional) or must
// (required) be called as an MCP task (protocol 2025-11-25, experimental):
// tools/list gives it execution.taskSupport, initialize advertises the
// tasks capability (list, cancel, tools/call), and a tools/call with
// params.task returns a task at once, while the tool's ordinary handler
// runs in the background. The client polls tasks/get, reads the tool's
// result with tasks/result (which waits for the end), and may list its
// tasks and cancel one, which cancels the handler's context. What the tool
// reports with toolkit.Progress becomes the task's statusMessage; a result
// with isError, or a JSON-RPC error, fails the task. A required tool
// called without params.task, and a tool without task support called with
// it, get JSON-RPC error -32601. Invoke calls every tool the ordinary way.
//
// The go-sdk has no tasks, so the [Handler] answers them itself in front
// of the SDK, and only while the registry has a tool with task support; a
// go-sdk server of your own ([AddTools]) serves no tasks. Tasks are
// bounded, and kept per caller: the verified [toolkit.Caller] subject
// (from a Txn-Token, a bearer token or an outer middleware), else the MCP
// session (which must exist), else the remote IP address. A verified
// caller or a session sees only its own tasks: another's task id is not
// found. An address is not an identity (behind a gateway it is a
// replica's, and the next poll may come through another): it bounds the
// tasks it starts, and any anonymous caller reaches an anonymous task by
// its id. Ids are 128 random bits. [Options.MaxTasksPerCaller] (16) tasks of a caller run
// at once and as many finished ones are kept, [Options.MaxTasks] (256) run
// in all, and a task lives at most [Options.MaxTaskTTL] (1h) from its
// creation, the ttl it asks clamped to that: then it is cancelled if it
// still runs, and dropped with its result. A task past a bound is refused
// with JSON-RPC error [CodeTooManyTasks]. Tasks live in one process, as
// sessions do: a client must poll the replica that made them (one
// replica, or session affinity). Behind the gateway
// every caller arrives from its address, so verify Txn-Tokens
// ([Options.TxnToken]) for the per-caller bound to be per caller.
//
// # The caller behind the toolplane gateway
//
// The gateway never forwards a caller's token. Under authentication it
// signs a short-lived transaction token for each call instead, in the
// Txn-Token header ([TxnTokenHeader]), for the ToolSet that owns the
// tool. [Options.TxnToken] verifies it against the gateway's JWKS:
//
//	h := server.New(reg, &server.Options{TxnToken: &server.TxnTokenOptions{
//		JWKSURL:  "http://toolplane-gateway.toolplane-system.svc/.well-known/jwks.json",
//		Audience: "crm/crm-tools", // this workload's ToolSet
//	}})
//
// A call whose token verifies carries the caller it names, and only that:
// [toolkit.Caller] Subject, Groups and RequestID. A token that does not
// verify is refused (401 on invoke, JSON-RPC error [CodeTxnTokenInvalid]
// on MCP); a call without one is anonymous unless [TxnTokenOptions.Required],
// which a workload reachable other than through the gateway should set.
// The keys are fetched within a time and size bound, kept parsed, and
// fetched again for an unknown key id at most once per
// [TxnTokenOptions.MinRefreshInterval]. [TxnTokenVerifier] verifies tokens
// for a transport of your own.
package server
