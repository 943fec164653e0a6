package spec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strings"
)

// SchemaVersion is the value of schemaVersion in the spec document and the
// tool table.
const SchemaVersion = "toolplane.io/v1alpha1"

// Default endpoint paths served by a toolkit workload.
const (
	// DefaultPath is where the spec document is served.
	DefaultPath = "/.well-known/toolplane/tools"
	// InvokePrefix is followed by a tool's name: POST /tools/{name}.
	InvokePrefix = "/tools/"
	// MCPPath is the MCP Streamable HTTP endpoint.
	MCPPath = "/mcp"
)

// Keys of toolplane's metadata in a tool's _meta object.
const (
	MetaVersion  = "toolplane.io/version"
	MetaCategory = "toolplane.io/category"
	MetaTags     = "toolplane.io/tags"
	MetaScopes   = "toolplane.io/scopes"
	// MetaAsks is true for a tool that asks its user (toolkit.Ask), so
	// that a gateway calls it where it can ask: over MCP, for a client
	// that can answer.
	MetaAsks = "toolplane.io/asks"
)

// Document is the spec document served at [DefaultPath].
type Document struct {
	// SchemaVersion is always [SchemaVersion].
	SchemaVersion string `json:"schemaVersion"`
	// Revision is [Revision] of Tools. It is also the document's ETag.
	Revision string `json:"revision"`
	// Server names the workload.
	Server Server `json:"server"`
	// Tools are sorted by name.
	Tools []Tool `json:"tools"`
	// Extensions are the names of the MCP extensions the server
	// advertises in its capabilities (2026-07-28, SEP-2133), sorted: an
	// MCP server's, as the operator read them from its initialize result,
	// at most [MaxExtensions] valid names. A toolkit workload advertises
	// none.
	Extensions []string `json:"extensions,omitempty"`
}

// MaxExtensions bounds the extension names a document or a table entry
// carries, and [MaxExtensionName] the length of each.
const (
	MaxExtensions    = 16
	MaxExtensionName = 128
)

// ValidExtensionName reports whether s is an extension identifier as MCP
// writes them, "{vendor-prefix}/{extension-name}" (io.modelcontextprotocol/ui),
// within [MaxExtensionName].
func ValidExtensionName(s string) bool {
	if len(s) == 0 || len(s) > MaxExtensionName {
		return false
	}
	vendor, name, ok := strings.Cut(s, "/")
	if !ok || vendor == "" || name == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '-', c == '_', c == '/':
		default:
			return false
		}
	}
	return !strings.Contains(name, "/")
}

// Server identifies the workload that serves a spec document.
type Server struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

// Tool is one tool as MCP describes it: each Tool is a valid MCP Tool object.
// Schemas are kept as raw JSON so that they pass through the operator byte for
// byte.
type Tool struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  *Annotations    `json:"annotations,omitempty"`
	// Execution says whether the tool may, must or must not be called as a
	// task (MCP 2025-11-25 tasks). Nil means MCP's default: forbidden.
	Execution *Execution     `json:"execution,omitempty"`
	Meta      map[string]any `json:"_meta,omitempty"`
}

// Execution is MCP's tool execution object (2025-11-25): how a tool may be
// called. It is part of the tool's contract with its callers: a tool whose
// task support becomes required can no longer be called the ordinary way.
type Execution struct {
	// TaskSupport is one of [TaskSupportForbidden], [TaskSupportOptional]
	// and [TaskSupportRequired]; empty means forbidden.
	TaskSupport string `json:"taskSupport,omitempty"`
}

// Values of [Execution.TaskSupport].
const (
	// TaskSupportForbidden: the tool is called the ordinary way only. It is
	// MCP's default.
	TaskSupportForbidden = "forbidden"
	// TaskSupportOptional: a caller may call the tool as a task, or not.
	TaskSupportOptional = "optional"
	// TaskSupportRequired: a caller must call the tool as a task.
	TaskSupportRequired = "required"
)

// ErrTaskSupport is the error of an [Execution] whose taskSupport MCP does
// not define.
var ErrTaskSupport = errors.New(`execution.taskSupport must be "forbidden", "optional" or "required"`)

// Validate reports whether e is an execution object MCP defines. A nil e is
// valid.
func (e *Execution) Validate() error {
	if e == nil {
		return nil
	}
	switch e.TaskSupport {
	case "", TaskSupportForbidden, TaskSupportOptional, TaskSupportRequired:
		return nil
	}
	return ErrTaskSupport
}

// Tasks reports whether a caller may call the tool as a task.
func (e *Execution) Tasks() bool {
	return e != nil && (e.TaskSupport == TaskSupportOptional || e.TaskSupport == TaskSupportRequired)
}

// TasksRequired reports whether a caller must call the tool as a task.
func (e *Execution) TasksRequired() bool {
	return e != nil && e.TaskSupport == TaskSupportRequired
}

// Annotations are MCP's tool annotations. They are hints to a client, not
// guarantees. A nil pointer means the hint is not given, and MCP's default
// applies (destructive and open-world default to true, the others to false).
type Annotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    *bool  `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool  `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
}

// SortTools sorts tools by name, in place.
func SortTools(tools []Tool) {
	slices.SortFunc(tools, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
}

// Revision returns "sha256:<hex>" over the canonical JSON of tools, which
// must already be sorted by name. It changes if and only if the list changes.
func Revision(tools []Tool) string {
	if tools == nil {
		tools = []Tool{}
	}
	return hashJSON(tools)
}

func hashJSON(v any) string {
	// encoding/json sorts map keys and compacts raw messages, so equal values
	// hash equally whatever whitespace their schemas arrived with.
	b, err := json.Marshal(v)
	if err != nil {
		// Only a value that cannot be encoded at all gets here (a NaN in
		// _meta, say); hash its error text so the result is still stable.
		b = []byte(err.Error())
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ETag returns the HTTP entity tag for a revision: the revision in quotes.
func ETag(revision string) string { return `"` + revision + `"` }
