package gateway

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/toolkit/server"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// snapshot is one table with everything the gateway serves from it, built
// once when the table arrives so that no request does per-table work. It is
// never modified once published, so readers need no lock.
type snapshot struct {
	table  *spec.Table
	loaded time.Time
	// byName maps a published name to its index in table.Tools.
	byName map[string]int
	// tools are the table's tools as MCP serves them, in table order.
	tools []*mcp.Tool
	// routes are the tools' invoke URLs, checked; "" for a tool the
	// gateway cannot route (no endpoint, or one outside its namespace).
	routes []string
	// listed, byNamespace and byToolSet list the indexes of each view's
	// routable tools, in table order (so sorted by name).
	listed      []int
	byNamespace map[string][]int
	byToolSet   map[spec.ObjectReference][]int
	// doc is the table's JSON as GET /v1/tools serves it, and docGzip the
	// same gzipped. entries[i] is the JSON of table.Tools[i], a slice of
	// doc, from which a caller's part of the table is written without
	// encoding it again.
	doc, docGzip []byte
	entries      [][]byte
	// unroutable says why each tool left out of the views was left out.
	unroutable []string
}

func newSnapshot(t *spec.Table, now time.Time) (*snapshot, error) {
	if !sort.SliceIsSorted(t.Tools, func(i, j int) bool { return t.Tools[i].Name < t.Tools[j].Name }) {
		tools := append([]spec.TableTool(nil), t.Tools...)
		spec.SortTableTools(tools)
		c := *t
		c.Tools = tools
		t = &c
	}
	s := &snapshot{
		table:       t,
		loaded:      now,
		byName:      make(map[string]int, len(t.Tools)),
		tools:       make([]*mcp.Tool, len(t.Tools)),
		routes:      make([]string, len(t.Tools)),
		byNamespace: map[string][]int{},
		byToolSet:   map[spec.ObjectReference][]int{},
	}
	for i := range t.Tools {
		tt := &t.Tools[i]
		if _, dup := s.byName[tt.Name]; dup {
			return nil, fmt.Errorf("%w: %q", spec.ErrDuplicateTool, tt.Name)
		}
		if len(tt.InputSchema) == 0 {
			return nil, fmt.Errorf("%w: tool %q has no inputSchema", spec.ErrTableMalformed, tt.Name)
		}
		s.byName[tt.Name] = i
		s.tools[i] = mcpTool(tt)
		route, err := invokeRoute(tt)
		if err != nil {
			s.unroutable = append(s.unroutable, err.Error())
			continue
		}
		s.routes[i] = route
		s.listed = append(s.listed, i)
		s.byNamespace[tt.ToolSet.Namespace] = append(s.byNamespace[tt.ToolSet.Namespace], i)
		s.byToolSet[tt.ToolSet] = append(s.byToolSet[tt.ToolSet], i)
	}
	var err error
	if s.doc, s.entries, err = encodeTable(t); err != nil {
		return nil, err
	}
	if s.docGzip, err = gzipBytes(s.doc); err != nil {
		return nil, err
	}
	return s, nil
}

func gzipBytes(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// mcpTool is t as MCP's tools/list serves it, under its published name,
// exactly as toolkit serves it.
func mcpTool(t *spec.TableTool) *mcp.Tool {
	return server.MCPTool(spec.Tool{
		Name: t.Name, Title: t.Title, Description: t.Description,
		InputSchema: t.InputSchema, OutputSchema: t.OutputSchema,
		Annotations: t.Annotations, Meta: t.Meta,
	})
}

// view is the subset of the table that one endpoint serves.
type view struct {
	// namespace, if set, keeps the tools of ToolSets in that namespace;
	// name, if set too, those of the ToolSet namespace/name.
	namespace, name string
}

func (v view) String() string {
	switch {
	case v.namespace == "":
		return "all"
	case v.name == "":
		return "namespaces/" + v.namespace
	default:
		return "toolsets/" + v.namespace + "/" + v.name
	}
}

// indexes returns the indexes of the view's tools in s, sorted by name.
func (v view) indexes(s *snapshot) []int {
	switch {
	case v.namespace == "":
		return s.listed
	case v.name == "":
		return s.byNamespace[v.namespace]
	default:
		return s.byToolSet[spec.ObjectReference{Namespace: v.namespace, Name: v.name}]
	}
}

// contains reports whether the tool at index i of s is in the view and
// routable.
func (v view) contains(s *snapshot, i int) bool {
	ref := s.table.Tools[i].ToolSet
	return s.routes[i] != "" && (v.namespace == "" || (ref.Namespace == v.namespace && (v.name == "" || ref.Name == v.name)))
}

// after returns the view's tools whose names sort after name ("" gives
// them all).
func (v view) after(s *snapshot, name string) []int {
	idx := v.indexes(s)
	k := sort.Search(len(idx), func(k int) bool { return s.table.Tools[idx[k]].Name > name })
	return idx[k:]
}

// invokeRoute returns the URL at which the gateway calls t: its invoke
// endpoint, checked to be a Service of its own ToolSet's namespace
// (<service>.<namespace>.svc, any cluster domain after it) and to name the
// tool's source name. The operator builds endpoints that way; the check
// keeps a table that says otherwise from sending callers' arguments
// anywhere else.
//
// A tool of protocol MCP (an MCP server toolkit did not write) is routed to
// its MCP endpoint instead, checked the same way but for the path, which is
// the server's own: the gateway calls it with tools/call.
func invokeRoute(t *spec.TableTool) (string, error) {
	if t.IsMCP() {
		return mcpRoute(t)
	}
	if t.Endpoints == nil || t.Endpoints.Invoke == "" {
		return "", fmt.Errorf("tool %s of ToolSet %s has no invoke endpoint", t.Name, t.ToolSet)
	}
	u, err := url.Parse(t.Endpoints.Invoke)
	if err != nil {
		return "", fmt.Errorf("tool %s of ToolSet %s: invoke endpoint: %w", t.Name, t.ToolSet, err)
	}
	labels := strings.Split(u.Hostname(), ".")
	switch {
	case u.Scheme != "http" && u.Scheme != "https", u.User != nil, u.RawQuery != "", u.Fragment != "":
		return "", fmt.Errorf("tool %s of ToolSet %s: invoke endpoint %q is not a plain http(s) URL", t.Name, t.ToolSet, t.Endpoints.Invoke)
	case len(labels) < 3 || labels[1] != t.ToolSet.Namespace || labels[2] != "svc" || labels[0] == "":
		return "", fmt.Errorf("tool %s of ToolSet %s: invoke endpoint %q is not a Service of namespace %s", t.Name, t.ToolSet, t.Endpoints.Invoke, t.ToolSet.Namespace)
	case u.EscapedPath() != spec.InvokePrefix+url.PathEscape(t.SourceName) && u.Path != spec.InvokePrefix+t.SourceName:
		return "", fmt.Errorf("tool %s of ToolSet %s: invoke endpoint %q does not name its source tool %s", t.Name, t.ToolSet, t.Endpoints.Invoke, t.SourceName)
	}
	return u.String(), nil
}

func mcpRoute(t *spec.TableTool) (string, error) {
	if t.Endpoints == nil || t.Endpoints.MCP == "" {
		return "", fmt.Errorf("tool %s of ToolSet %s has no MCP endpoint", t.Name, t.ToolSet)
	}
	u, err := url.Parse(t.Endpoints.MCP)
	if err != nil {
		return "", fmt.Errorf("tool %s of ToolSet %s: MCP endpoint: %w", t.Name, t.ToolSet, err)
	}
	labels := strings.Split(u.Hostname(), ".")
	switch {
	case u.Scheme != "http" && u.Scheme != "https", u.User != nil, u.RawQuery != "", u.Fragment != "":
		return "", fmt.Errorf("tool %s of ToolSet %s: MCP endpoint %q is not a plain http(s) URL", t.Name, t.ToolSet, t.Endpoints.MCP)
	case len(labels) < 3 || labels[1] != t.ToolSet.Namespace || labels[2] != "svc" || labels[0] == "":
		return "", fmt.Errorf("tool %s of ToolSet %s: MCP endpoint %q is not a Service of namespace %s", t.Name, t.ToolSet, t.Endpoints.MCP, t.ToolSet.Namespace)
	}
	return u.String(), nil
}
