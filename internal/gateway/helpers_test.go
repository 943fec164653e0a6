package gateway_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/server"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// The tools the workloads of these tests serve.

type echoIn struct {
	Text  string `json:"text"`
	Count int    `json:"count,omitempty" default:"1"`
	Big   int64  `json:"big,omitempty"`
}

type echoOut struct {
	Echo   string `json:"echo"`
	Big    int64  `json:"big"`
	Server string `json:"server"`
}

func echoTool(server string) *toolkit.Tool {
	return toolkit.MustNew("echo", "Echoes text count times", func(_ context.Context, in echoIn) (echoOut, error) {
		return echoOut{Echo: strings.Repeat(in.Text, in.Count), Big: in.Big, Server: server}, nil
	})
}

// headerTool returns the header the workload received, as text.
func headerTool(name string) *toolkit.Tool {
	return toolkit.MustNew(name, "Shows the request header the workload got", func(ctx context.Context, _ struct{}) (string, error) {
		c, _ := toolkit.CallerFrom(ctx)
		var b strings.Builder
		for k, v := range c.Header {
			fmt.Fprintf(&b, "%s=%s\n", k, strings.Join(v, ","))
		}
		return b.String(), nil
	})
}

// hangTool blocks until its call is cancelled.
func hangTool() *toolkit.Tool {
	return toolkit.MustNew("hang", "Never answers", func(ctx context.Context, _ struct{}) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	})
}

// workload is a toolkit server on loopback, standing in for the Pods behind
// Service <service>.<namespace>.svc.cluster.local:8080.
type workload struct {
	namespace, service string
	prefix             string
	reg                *toolkit.Registry
	srv                *httptest.Server
}

func newWorkload(t testing.TB, namespace, service, prefix string, tools ...*toolkit.Tool) *workload {
	t.Helper()
	reg := &toolkit.Registry{}
	if err := reg.Add(tools...); err != nil {
		t.Fatal(err)
	}
	h := server.New(reg, &server.Options{Name: service, AllowAnyHostOnLoopback: true})
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		h.Close()
		srv.Close()
	})
	return &workload{namespace: namespace, service: service, prefix: prefix, reg: reg, srv: srv}
}

func (w *workload) host() string {
	return fmt.Sprintf("%s.%s.svc.cluster.local:8080", w.service, w.namespace)
}

// tableTools are the workload's tools as the operator publishes them.
func (w *workload) tableTools() []spec.TableTool {
	var out []spec.TableTool
	for _, t := range w.reg.Specs() {
		base := "http://" + w.host()
		out = append(out, spec.TableTool{
			Name: w.prefix + t.Name, SourceName: t.Name, Title: t.Title, Description: t.Description,
			InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Annotations: t.Annotations, Meta: t.Meta,
			ToolSet:   spec.ObjectReference{Namespace: w.namespace, Name: w.service},
			Endpoints: &spec.Endpoints{Invoke: base + spec.InvokePrefix + t.Name, MCP: base + spec.MCPPath},
		})
	}
	return out
}

func table(tools ...[]spec.TableTool) *spec.Table {
	t := &spec.Table{SchemaVersion: spec.SchemaVersion, Tools: []spec.TableTool{}}
	for _, ts := range tools {
		t.Tools = append(t.Tools, ts...)
	}
	spec.SortTableTools(t.Tools)
	t.Revision = spec.TableRevision(t.Tools)
	return t
}

// routes stands in for cluster DNS and Services: it maps each Service host
// to its workload's loopback address. It can change while a test runs.
type routes struct {
	mu sync.Mutex
	m  map[string]string
}

func (r *routes) set(host, addr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]string{}
	}
	r.m[host] = addr
}

func (r *routes) add(ws ...*workload) *routes {
	for _, w := range ws {
		r.set(w.host(), w.srv.Listener.Addr().String())
	}
	return r
}

func (r *routes) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	r.mu.Lock()
	to, ok := r.m[addr]
	r.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("no route to %s", addr)
	}
	return (&net.Dialer{}).DialContext(ctx, network, to)
}

// newGateway serves a gateway with opts on loopback, dialing through r.
func newGateway(t testing.TB, r *routes, opts gateway.Options) (*gateway.Gateway, string) {
	t.Helper()
	if r != nil {
		opts.DialContext = r.dial
	}
	g := gateway.New(&opts)
	srv := httptest.NewServer(g)
	t.Cleanup(func() {
		g.Close()
		srv.Close()
	})
	return g, srv.URL
}

// connect opens a Go SDK client session at endpoint with the given protocol
// version; changed, if not nil, receives each list_changed.
func connect(t testing.TB, endpoint, version string, changed chan<- struct{}, hc *http.Client) *mcp.ClientSession {
	t.Helper()
	opts := &mcp.ClientOptions{}
	if changed != nil {
		opts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1.0.0"}, opts)
	transport := &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, MaxRetries: -1}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connecting at %s: %v", version, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func bounded(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// listAll lists every tool, page by page, and returns their names and the
// number of pages.
func listAll(t testing.TB, cs *mcp.ClientSession) ([]string, int) {
	t.Helper()
	var (
		names  []string
		pages  int
		cursor string
	)
	for {
		res, err := cs.ListTools(bounded(t), &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		pages++
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
		}
		if res.NextCursor == "" {
			return names, pages
		}
		cursor = res.NextCursor
		if pages > 100_000 {
			t.Fatal("tools/list does not end")
		}
	}
}

func names(t *spec.Table) []string {
	out := make([]string, len(t.Tools))
	for i, tt := range t.Tools {
		out[i] = tt.Name
	}
	return out
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// The two MCP protocol eras.
var eras = []string{"2026-07-28", "2025-11-25"}
