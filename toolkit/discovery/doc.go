// Package discovery is the agent's side of toolplane: it reads the cluster's
// tool table, offers its tools to a model, and calls them.
//
// The operator publishes the table as ConfigMap toolplane-tools (split over
// toolplane-tools-1, -2, … up to -63 when large, possibly with holes in the
// numbering; see spec.TableKey). An agent mounts it as a directory, with a
// projected volume that lists the optional parts:
//
//	volumes:
//	- name: tools
//	  projected:
//	    sources:
//	    - configMap: {name: toolplane-tools}
//	    - configMap: {name: toolplane-tools-1, optional: true}
//	    - configMap: {name: toolplane-tools-2, optional: true}
//	containers:
//	- volumeMounts:
//	  - {name: tools, mountPath: /etc/toolplane/tools, readOnly: true}
//
// and follows it with [Client.WatchDir]: kubelet swaps a new version of the
// volume in atomically, and the client reloads on the swap, keeping its last
// good table when an update is torn or unreadable. An agent in another
// namespace, which cannot mount the operator's ConfigMaps, reads the table
// from the toolplane gateway's GET /v1/tools instead, with [Client.LoadURL]
// and [Client.WatchURL] (conditional GETs, with backoff on failure).
// [Client.LoadBytes] and [Client.SetTable] take a table from anywhere else.
//
// [Client.OpenAITools] and [Client.AnthropicTools] describe the tools to a
// model, in OpenAI's strict mode if asked ([StrictSchema]). Tool names that
// those APIs do not accept (dots, more than 64 characters) are given a
// portable function name ([MappedName]), which [Client.Lookup],
// [Client.Call] and [Client.ToolName] resolve back. [Client.Call] invokes a
// tool through its HTTP endpoint, POST /tools/{name}, with a timeout and a
// bound on the reply, and returns the workload's spec.CallResult. A tool
// whose table entry has protocol MCP, from an MCP server that toolkit did
// not write, has no such endpoint: Call uses MCP's tools/call at its MCP
// endpoint instead ([MCPCaller], on the official Go SDK client, in either
// protocol era), so that an agent calls every tool the same way, and the
// server's content blocks (images, audio, resources, resource links, their
// annotations) pass through unchanged.
//
// Call trusts the table no further than the operator's own rules: it sends
// arguments only to a Service of the tool's own ToolSet namespace
// (<service>.<namespace>.svc.<Client.ClusterDomain>, as the operator
// publishes it, or <service>.<namespace>.svc of older tables) and never
// follows a redirect, so that a tampered table cannot send them elsewhere
// ([ErrForeignEndpoint], [ErrRedirect]). The rule is
// [CheckServiceEndpoint], which the toolplane gateway applies too. The
// operator publishes fully qualified names so that a Pod's resolver, whose
// search path (ndots:5) is walked for shorter names, finds no other host
// for them; a transport that dials them with a final dot never walks it.
//
// An agent facing thousands of tools finds the few a task needs instead of
// offering them all: [Client.Search] ranks the tools of the table the
// client holds (package search), and [Client.SearchURL] asks the
// gateway's GET /v1/search, which returns only the tools the caller may
// call, bounded by Timeout and MaxResponseBytes like a call.
package discovery
