// Package spec defines toolplane's wire formats: the spec document that a
// toolkit workload serves at [DefaultPath], and the tool table that the
// operator publishes and agents read.
//
// Both the toolkit server and the operator use these types, so each format
// is defined exactly once. Encoding is deterministic: the same tools always
// give the same bytes and the same revision.
//
// A table entry ([TableTool]) of a toolkit workload has two endpoints,
// invoke and MCP. An entry of [ProtocolMCP] comes from any other MCP server
// (a ToolSet with spec.protocol MCP, in any language): it has the MCP
// endpoint only, and agents call it with tools/call under its SourceName.
// [Content] keeps the fields of such a server's content blocks that it does
// not name, so that its results pass through unchanged.
//
// [EncodeTable] and [DecodeTable] map a tool table to and from the payloads
// of the ConfigMaps it is published in: one plain ConfigMap for a small
// table, and gzipped chunks in several ConfigMaps, each within
// [MaxTablePartBytes], for a large one. See [TableKey] for the layout and for
// how an agent mounts it.
//
// [SchemaDigest] fingerprints a tool's contract with its callers (its
// schemas, annotations and task support, in [CanonicalJSON]); every table
// entry carries it. Package contract, beside this one, says whether a
// change to that contract breaks callers.
//
// # Additions since the first contract
//
// Each is optional and additive: a reader that does not know a field
// ignores it, and a writer leaves it out when it is empty, so tables and
// documents written before it read the same.
//
//   - A tool's execution.taskSupport ([Execution]; MCP 2025-11-25 tasks),
//     in documents and table entries: "forbidden", "optional" or
//     "required"; any other value makes the tool invalid. It is part of
//     the tool's contract: absent or "forbidden" leave [SchemaDigest] as it
//     was, so no digest published before it moved.
//   - A document's extensions ([Document.Extensions]), the MCP extensions an
//     MCP server advertises, by name only, and a table entry's (those every
//     ready Pod of the ToolSet advertises), at most [MaxExtensions].
//   - The owner's UID, which tells a ToolSet from one deleted and created
//     again under its name: in the ledger's chunks, once per owner
//     ([TableLedgerOwned]). Tables written for a while carried it in every
//     entry too, as toolSetUID; readers ignore it there now, and
//     [DecodeTableLedgerChunks] sets [TableTool.ToolSetUID] from the
//     ledger.
//   - A table entry's callsPerMinute, the owner's spec.limits.
package spec
