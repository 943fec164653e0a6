package gateway

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net/url"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/toolkit/discovery"
	"github.com/toolplane/toolplane/toolkit/search"
	"github.com/toolplane/toolplane/toolkit/server"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// snapshot is one table with everything the gateway serves from it, built
// once when the table arrives so that no request does per-table work. It is
// never modified once published, so readers need no lock.
type snapshot struct {
	table  *spec.Table
	loaded time.Time
	// clusterDomain is the DNS domain the routes were checked against.
	clusterDomain string
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
	// calls[i] are tool i's counts of calls (metrics_calls.go), set by
	// Gateway.SetTable; nil in a snapshot it did not make.
	calls []*toolCalls
	// index is the search index of table, built by the first search of
	// the revision (Gateway.searchIndex), so that a replica pays for it
	// only when it serves searches, and a table's arrival never holds the
	// build's garbage on top of the table's own. prevIndex is the last
	// revision's index, when it had one, to update from.
	indexOnce sync.Once
	index     atomic.Pointer[search.Index]
	prevIndex *search.Index
}

// newSnapshot indexes t for serving. clusterDomain is the cluster's DNS
// domain, for the routes (empty means discovery.DefaultClusterDomain).
func newSnapshot(t *spec.Table, now time.Time, clusterDomain string) (*snapshot, error) {
	if !sort.SliceIsSorted(t.Tools, func(i, j int) bool { return t.Tools[i].Name < t.Tools[j].Name }) {
		tools := append([]spec.TableTool(nil), t.Tools...)
		spec.SortTableTools(tools)
		c := *t
		c.Tools = tools
		t = &c
	}
	s := &snapshot{
		table:         t,
		loaded:        now,
		clusterDomain: clusterDomain,
		byName:        make(map[string]int, len(t.Tools)),
		tools:         make([]*mcp.Tool, len(t.Tools)),
		routes:        make([]string, len(t.Tools)),
		byNamespace:   map[string][]int{},
		byToolSet:     map[spec.ObjectReference][]int{},
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
		route, err := invokeRoute(tt, clusterDomain)
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
		Annotations: t.Annotations, Execution: t.Execution, Meta: t.Meta,
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
// endpoint, checked by discovery.CheckServiceEndpoint (a Service of its own
// ToolSet's namespace, <service>.<namespace>.svc.<cluster domain> or the
// <service>.<namespace>.svc of older tables, and nothing else after ".svc")
// and to name the tool's source name. The operator builds endpoints that
// way; the check keeps a table that says otherwise from sending callers'
// arguments anywhere else, and is the one toolkit/discovery applies, so
// that an agent and the gateway refuse the same endpoints. The URL returned
// has the host fully qualified, which the gateway's dialer resolves as
// rooted: no name it dials walks the resolver's search path.
//
// A tool of protocol MCP (an MCP server toolkit did not write) is routed to
// its MCP endpoint instead, checked the same way but for the path, which is
// the server's own: the gateway calls it with tools/call.
func invokeRoute(t *spec.TableTool, clusterDomain string) (string, error) {
	if t.IsMCP() {
		return mcpRoute(t, clusterDomain)
	}
	if t.Endpoints == nil || t.Endpoints.Invoke == "" {
		return "", fmt.Errorf("tool %s of ToolSet %s has no invoke endpoint", t.Name, t.ToolSet)
	}
	u, err := serviceRoute(t, "invoke", t.Endpoints.Invoke, clusterDomain)
	if err != nil {
		return "", err
	}
	if u.EscapedPath() != spec.InvokePrefix+url.PathEscape(t.SourceName) && u.Path != spec.InvokePrefix+t.SourceName {
		return "", fmt.Errorf("tool %s of ToolSet %s: invoke endpoint %q does not name its source tool %s", t.Name, t.ToolSet, t.Endpoints.Invoke, t.SourceName)
	}
	return u.String(), nil
}

func mcpRoute(t *spec.TableTool, clusterDomain string) (string, error) {
	if t.Endpoints == nil || t.Endpoints.MCP == "" {
		return "", fmt.Errorf("tool %s of ToolSet %s has no MCP endpoint", t.Name, t.ToolSet)
	}
	u, err := serviceRoute(t, "MCP", t.Endpoints.MCP, clusterDomain)
	if err != nil {
		return "", err
	}
	return u.String(), nil
}

// serviceRoute checks one endpoint of t by the shared rule, and refuses a
// query or a fragment besides, which the gateway's calls never carry.
func serviceRoute(t *spec.TableTool, which, endpoint, clusterDomain string) (*url.URL, error) {
	u, err := discovery.CheckServiceEndpoint(endpoint, t.ToolSet.Namespace, clusterDomain)
	if err != nil {
		return nil, fmt.Errorf("tool %s of ToolSet %s: %s endpoint %q: %w", t.Name, t.ToolSet, which, endpoint, err)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return nil, fmt.Errorf("tool %s of ToolSet %s: %s endpoint %q is not a plain http(s) URL", t.Name, t.ToolSet, which, endpoint)
	}
	return u, nil
}
