package discovery

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolplane/toolplane/toolkit/search"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// Defaults of a [Client]'s zero fields.
const (
	// DefaultTimeout bounds one call when Client.Timeout is zero.
	DefaultTimeout = 30 * time.Second
	// DefaultMaxResponseBytes bounds a reply's body when
	// Client.MaxResponseBytes is zero.
	DefaultMaxResponseBytes = 4 << 20
)

// Errors of the discovery client. Errors returned by its methods wrap them,
// with detail.
var (
	// ErrToolNotFound means the tool is not in the table, or its workload
	// answered 404 because it no longer serves it.
	ErrToolNotFound = errors.New("discovery: tool not found")
	// ErrNoEndpoint means the table lists the tool without an endpoint:
	// its ToolSet names no Service.
	ErrNoEndpoint = errors.New("discovery: tool has no invoke endpoint")
	// ErrBadRequest means the workload could not read the arguments (400).
	ErrBadRequest = errors.New("discovery: bad request")
	// ErrRequestTooLarge means the workload refused the arguments as too
	// large (413).
	ErrRequestTooLarge = errors.New("discovery: request too large")
	// ErrResponseTooLarge means the reply passed Client.MaxResponseBytes.
	ErrResponseTooLarge = errors.New("discovery: response too large")
	// ErrForeignEndpoint means the table gives a tool an endpoint that is
	// not a Service of the tool's own ToolSet namespace: a tampered or
	// forged table. The call is refused before anything is sent.
	ErrForeignEndpoint = errors.New("discovery: endpoint is not a Service in the tool's namespace")
	// ErrRedirect means the workload answered with a redirect. Calls never
	// follow one, so that arguments go only where the table says.
	ErrRedirect = errors.New("discovery: redirect refused")
	// ErrServiceAlias means a tool's Service name resolves through a CNAME:
	// an ExternalName Service, whose calls would leave the namespace (see
	// [ServiceDialer]). Nothing is sent.
	ErrServiceAlias = errors.New("discovery: the Service is an alias")
)

// DefaultClusterDomain is the cluster DNS domain that endpoints may carry
// after ".svc" when Client.ClusterDomain is empty.
const DefaultClusterDomain = "cluster.local"

// Client reads the tool table and calls its tools. It is safe for concurrent
// use, and its zero value is a client with an empty table and default limits:
// give it a table with [Client.SetTable], [Client.LoadBytes],
// [Client.LoadDir] or [Client.WatchDir]. Set its fields before first use.
type Client struct {
	// HTTPClient makes the calls; nil means a client whose transport has
	// http.DefaultTransport's settings but no proxy, and dials Service
	// names through [ServiceDialer]: once looked up, with no search path,
	// and never through an alias (an ExternalName Service). A client of
	// your own gets that with a transport whose DialContext is
	// ServiceDialer and whose Proxy is nil (a proxy resolves the names
	// itself).
	HTTPClient *http.Client
	// Timeout bounds each call, on top of the context's own deadline; zero
	// means DefaultTimeout.
	Timeout time.Duration
	// MaxResponseBytes bounds the body of each reply; zero means
	// DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// ClusterDomain is the cluster's DNS domain; empty means
	// DefaultClusterDomain. Call sends arguments only to an endpoint whose
	// host is <service>.<namespace>.svc.<ClusterDomain> (or the
	// <service>.<namespace>.svc of older tables), where namespace is that of
	// the tool's ToolSet, as the operator publishes them; any other host is
	// refused with [ErrForeignEndpoint]. To reach Services from outside the
	// cluster, give HTTPClient a transport that dials those names.
	ClusterDomain string
	// TableHTTPClient makes the GETs of LoadURL and WatchURL; nil means
	// http.DefaultClient. Put the credentials a table server such as the
	// toolplane gateway wants (a bearer token) here, not in HTTPClient,
	// which calls workloads.
	TableHTTPClient *http.Client
	// Logger reports tables loaded and updates refused while following a
	// directory; nil means slog.Default().
	Logger *slog.Logger
	// OnChange, if set, is called with each new table that WatchDir loads,
	// so that an agent can refresh the tools it offers a model. It runs on
	// the watching goroutine.
	OnChange func(*spec.Table)

	state atomic.Pointer[snapshot]
	// lastIndex is the newest search index built, which the next table's
	// index is updated from (search.go).
	lastIndex atomic.Pointer[search.Index]
}

// snapshot is one table with its lookup indexes. It is never modified once
// published, so readers need no lock.
type snapshot struct {
	table  *spec.Table
	byName map[string]int
	// fnName maps each tool to its provider-portable function name, and
	// byFn maps those back.
	fnName []string
	byFn   map[string]int

	exportOnce sync.Once
	openAI     []OpenAITool
	strict     []OpenAITool
	anthropic  []AnthropicTool
	notes      exportNotes

	searchOnce sync.Once
	index      *search.Index
}

var emptySnapshot = newSnapshot(&spec.Table{SchemaVersion: spec.SchemaVersion, Revision: spec.TableRevision(nil), Tools: []spec.TableTool{}})

func newSnapshot(t *spec.Table) *snapshot {
	s := &snapshot{table: t, byName: make(map[string]int, len(t.Tools))}
	for i, tool := range t.Tools {
		s.byName[tool.Name] = i
	}
	s.fnName, s.byFn = functionNames(t.Tools)
	return s
}

func (c *Client) snap() *snapshot {
	if s := c.state.Load(); s != nil {
		return s
	}
	return emptySnapshot
}

// SetTable replaces the client's table. The client keeps t: do not modify it
// afterwards. It fails with spec.ErrDuplicateTool if two tools share a name.
func (c *Client) SetTable(t *spec.Table) error {
	if t == nil {
		c.state.Store(emptySnapshot)
		return nil
	}
	seen := make(map[string]bool, len(t.Tools))
	for _, tool := range t.Tools {
		if seen[tool.Name] {
			return fmt.Errorf("%w: %q", spec.ErrDuplicateTool, tool.Name)
		}
		seen[tool.Name] = true
	}
	c.state.Store(newSnapshot(t))
	return nil
}

// LoadBytes replaces the client's table with the JSON table b: the content
// of the tools.json key of a plain tool table.
func (c *Client) LoadBytes(b []byte) error {
	t, err := spec.DecodeTable(map[string][]byte{spec.TableKey: b})
	if err != nil {
		return err
	}
	return c.SetTable(t)
}

// Table returns the current table. The caller must not modify it.
func (c *Client) Table() *spec.Table { return c.snap().table }

// Revision returns the current table's revision.
func (c *Client) Revision() string { return c.snap().table.Revision }

// Lookup returns the tool published as name. It also accepts the function
// name that [Client.OpenAITools] and [Client.AnthropicTools] give a tool
// whose name is not portable, so that a model's tool call can be looked up
// as it arrives. The caller must not modify the tool's schemas.
func (c *Client) Lookup(name string) (spec.TableTool, bool) {
	s := c.snap()
	if i, ok := s.lookup(name); ok {
		return s.table.Tools[i], true
	}
	return spec.TableTool{}, false
}

func (s *snapshot) lookup(name string) (int, bool) {
	if i, ok := s.byName[name]; ok {
		return i, true
	}
	i, ok := s.byFn[name]
	return i, ok
}

// ToolName resolves a function name given to a model back to the tool's
// published name. Portable names map to themselves.
func (c *Client) ToolName(function string) (string, bool) {
	s := c.snap()
	if i, ok := s.byFn[function]; ok {
		return s.table.Tools[i].Name, true
	}
	return "", false
}

// FunctionName returns the function name under which a tool published as
// name is offered to models: name itself when it is portable.
func (c *Client) FunctionName(name string) (string, bool) {
	s := c.snap()
	if i, ok := s.byName[name]; ok {
		return s.fnName[i], true
	}
	return "", false
}

func (c *Client) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.Default()
}
