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
// schemas and annotations, in [CanonicalJSON]); every table entry carries
// it. Package contract, beside this one, says whether a change to that
// contract breaks callers.
package spec
