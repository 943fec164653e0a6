package spec

import (
	"encoding/json"
	"slices"
	"strings"
)

// Table is the tool table: every published tool in the cluster, as the
// operator writes it to the tool-table ConfigMap and agents read it.
type Table struct {
	// SchemaVersion is always [SchemaVersion].
	SchemaVersion string `json:"schemaVersion"`
	// Revision is "sha256:<hex>" over Tools.
	Revision string `json:"revision"`
	// Tools are sorted by published name; each name appears once.
	Tools []TableTool `json:"tools"`
	// Records are the ledger's: Records[i] says since when and why the
	// ToolSet of Tools[i] owns its name (the zero TableRecord for none).
	// They are not part of the table's JSON: a publisher stores them apart,
	// in the ledger's chunks ([TableLedgerChunkKey]), and reads them back
	// with it. Nil for none.
	Records []TableRecord `json:"-"`
}

// TableTool is one published tool.
type TableTool struct {
	// Name is the published name: the ToolSet's prefix plus SourceName.
	Name string `json:"name"`
	// SourceName is the name the workload serves the tool under.
	SourceName   string          `json:"sourceName"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  *Annotations    `json:"annotations,omitempty"`
	// Execution is the tool's [Execution]: whether it may be called as a
	// task. Nil means forbidden; readers that do not know it ignore it.
	Execution *Execution     `json:"execution,omitempty"`
	Meta      map[string]any `json:"_meta,omitempty"`
	// SchemaDigest is [SchemaDigest] of InputSchema, OutputSchema,
	// Annotations and Execution: it changes when the tool's contract with its callers
	// does. The operator sets it; it is empty in tables written before it
	// existed.
	SchemaDigest string          `json:"schemaDigest,omitempty"`
	ToolSet      ObjectReference `json:"toolSet"`
	// ToolSetUID is the UID of the ToolSet that owns the entry, so that
	// whoever reads the table back tells that ToolSet from one deleted and
	// created again under its name, a new claimant. It is not in the
	// table's JSON, nor in its revision: the ledger records it once per
	// owner ([TableLedgerOwned]), and [DecodeTableLedgerChunks] sets it on
	// the entries read back. Written in every entry, it cost a fifth of a
	// large table's bytes, and every write of the table carried them.
	// Empty where no ledger says it.
	ToolSetUID string `json:"-"`
	// Protocol is how agents call the tool: "" for a toolkit workload,
	// which serves both endpoints, or [ProtocolMCP] for any other MCP
	// server, whose only endpoint is MCP: call it with tools/call under
	// SourceName.
	Protocol string `json:"protocol,omitempty"`
	// Endpoints is nil when the ToolSet names no Service to reach it by.
	Endpoints *Endpoints `json:"endpoints,omitempty"`
	// CallsPerMinute is the owner ToolSet's spec.limits.callsPerMinute:
	// what its workload can take, from every caller and for every tool of
	// the ToolSet together; a gateway holds the calls it routes within
	// it. 0 (absent) means no limit; readers that do not know it ignore
	// it.
	CallsPerMinute int `json:"callsPerMinute,omitempty"`
	// Extensions are the MCP extensions the tool's server advertises
	// ([Document.Extensions]; those every ready Pod's document names),
	// which a gateway may advertise in turn where it relays them. Entries
	// of one ToolSet share the slice; nothing modifies it. Readers that do
	// not know it ignore it.
	Extensions []string `json:"extensions,omitempty"`
}

// ProtocolMCP is the Protocol of a table entry whose workload is any MCP
// server: it has an MCP endpoint and no invoke endpoint.
const ProtocolMCP = "MCP"

// IsMCP reports whether the tool is called only over MCP.
func (t *TableTool) IsMCP() bool { return t.Protocol == ProtocolMCP }

// ObjectReference names a namespaced object.
type ObjectReference struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// String returns "namespace/name".
func (r ObjectReference) String() string { return r.Namespace + "/" + r.Name }

// Endpoints are the URLs at which agents call a tool.
type Endpoints struct {
	// Invoke is the tool's plain HTTP endpoint: POST the arguments object.
	// Entries of Protocol [ProtocolMCP] have none.
	Invoke string `json:"invoke,omitempty"`
	// MCP is the workload's MCP Streamable HTTP endpoint.
	MCP string `json:"mcp"`
}

// TableRevision returns "sha256:<hex>" over tools, which must be sorted by
// name.
func TableRevision(tools []TableTool) string {
	if tools == nil {
		tools = []TableTool{}
	}
	return hashJSON(tools)
}

// SortTableTools sorts tools by name, in place.
func SortTableTools(tools []TableTool) {
	slices.SortFunc(tools, func(a, b TableTool) int { return strings.Compare(a.Name, b.Name) })
}
