package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/test/harness"
	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/server"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// servicePort is every workload's Service port, as the table names it.
const servicePort = 8080

// workload is a toolkit server on loopback, standing in for the Pod of a
// Deployment behind Service <service>.<namespace>.svc, with its ToolSet.
type workload struct {
	namespace, service, prefix string
	srv                        *httptest.Server
	h                          *server.Handler
}

func newWorkload(namespace, service, prefix string, tools ...*toolkit.Tool) *workload {
	reg := &toolkit.Registry{}
	Expect(reg.Add(tools...)).To(Succeed())
	h := server.New(reg, &server.Options{Name: service, AllowAnyHostOnLoopback: true})
	return &workload{namespace: namespace, service: service, prefix: prefix, srv: httptest.NewServer(h), h: h}
}

func (w *workload) host() string {
	return fmt.Sprintf("%s.%s.svc.cluster.local:%d", w.service, w.namespace, servicePort)
}
func (w *workload) addr() string { return w.srv.Listener.Addr().String() }

func (w *workload) close() {
	w.h.Close()
	w.srv.Close()
}

// apply creates the workload's ready Pod and its ToolSet.
func (w *workload) apply(ctx context.Context) {
	_, p, err := net.SplitHostPort(w.addr())
	Expect(err).NotTo(HaveOccurred())
	port, err := strconv.Atoi(p)
	Expect(err).NotTo(HaveOccurred())
	_, err = harness.CreateReadyPod(ctx, cp.Client, w.namespace, w.service+"-0", w.service, port)
	Expect(err).NotTo(HaveOccurred())
	ts := harness.NewToolSet(w.namespace, w.service, w.service, spec.DefaultPath, 30*time.Second)
	ts.Spec.Service = &v1alpha1.ServiceReference{Name: w.service, Port: servicePort}
	ts.Spec.Prefix = w.prefix
	Expect(cp.Client.Create(ctx, ts)).To(Succeed())
}

// The workloads' tools.

type echoIn struct {
	Text  string `json:"text"`
	Count int    `json:"count,omitempty" default:"1"`
}

type echoOut struct {
	Echo   string `json:"echo"`
	Server string `json:"server"`
}

func echoTool(server string) *toolkit.Tool {
	return toolkit.MustNew("echo", "Echoes text count times", func(_ context.Context, in echoIn) (echoOut, error) {
		return echoOut{Echo: strings.Repeat(in.Text, in.Count), Server: server}, nil
	})
}

func headerTool(name string) *toolkit.Tool {
	return toolkit.MustNew(name, "Shows the request header the workload got", func(ctx context.Context, _ struct{}) (string, error) {
		c, _ := toolkit.CallerFrom(ctx)
		keys := make([]string, 0, len(c.Header))
		for k := range c.Header {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return strings.Join(keys, ","), nil
	})
}

type cityIn struct {
	City string `json:"city"`
	Days int    `json:"days,omitempty" default:"1" tool:"minimum=1;maximum=7"`
}

func forecastTool() *toolkit.Tool {
	return toolkit.MustNew("forecast", "The weather of a city", func(_ context.Context, in cityIn) (string, error) {
		return fmt.Sprintf("%s: sunny for %d days", in.City, in.Days), nil
	})
}

func lateTool() *toolkit.Tool {
	return toolkit.MustNew("late_tool", "Published after clients connected", func(context.Context, struct{}) (string, error) {
		return "late", nil
	})
}

func sharedTool(server string) *toolkit.Tool {
	return toolkit.MustNew("shared", "Served by two ToolSets; the first owns it", func(context.Context, struct{}) (string, error) {
		return "served by " + server, nil
	})
}

func hangTool() *toolkit.Tool {
	return toolkit.MustNew("hang", "Never answers", func(ctx context.Context, _ struct{}) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	})
}

func deadTool() *toolkit.Tool {
	return toolkit.MustNew("dead_echo", "Its workload dies", func(context.Context, struct{}) (string, error) {
		return "alive", nil
	})
}

// waitForTable waits until the published table satisfies ok, given the
// owner of each name, and returns the table.
func waitForTable(ok func(owners map[string]string) bool) *spec.Table {
	var t *spec.Table
	Eventually(func(g Gomega) {
		var err error
		t, _, err = harness.ReadTable(ctx, cp.Client, tableNamespace, tableName)
		g.Expect(err).NotTo(HaveOccurred())
		owners := map[string]string{}
		for _, tt := range t.Tools {
			owners[tt.Name] = tt.ToolSet.String()
		}
		g.Expect(ok(owners)).To(BeTrue(), "table %v", owners)
	}, settle, 250*time.Millisecond).Should(Succeed())
	return t
}

// The MCP clients.

// connect opens a Go SDK client session at endpoint. changed, if not nil,
// receives each list_changed. hc may carry a token.
func connect(endpoint, version string, changed chan<- struct{}, hc *http.Client) *mcp.ClientSession {
	opts := &mcp.ClientOptions{}
	if changed != nil {
		opts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-agent", Version: "1.0.0"}, opts)
	c, cancel := context.WithTimeout(ctx, settle)
	defer cancel()
	cs, err := client.Connect(c, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(cs.Close)
	return cs
}

func listNames(cs *mcp.ClientSession) ([]string, error) {
	var out []string
	c, cancel := context.WithTimeout(ctx, settle)
	defer cancel()
	for tool, err := range cs.Tools(c, nil) {
		if err != nil {
			return nil, err
		}
		out = append(out, tool.Name)
	}
	return out, nil
}

func call(cs *mcp.ClientSession, name string, args any) (*mcp.CallToolResult, error) {
	c, cancel := context.WithTimeout(ctx, settle)
	defer cancel()
	return cs.CallTool(c, &mcp.CallToolParams{Name: name, Arguments: args})
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

func names(t *spec.Table) []string {
	out := make([]string, len(t.Tools))
	for i, tt := range t.Tools {
		out[i] = tt.Name
	}
	return out
}

// interopDir holds the TypeScript SDK client (npm ci --prefix hack/interop).
var interopDir = filepath.Join("..", "..", "hack", "interop")

// tsEvent is one line of hack/interop/interop.mjs's output.
type tsEvent struct {
	Event           string          `json:"event"`
	ProtocolVersion string          `json:"protocolVersion"`
	Tools           []spec.Tool     `json:"tools"`
	Result          json.RawMessage `json:"result"`
}

// typeScriptClient runs the TypeScript SDK client against url: it lists
// every tool and calls tool with args, and returns its events by name.
func typeScriptClient(url, tool, args string) map[string]tsEvent {
	node, err := exec.LookPath("node")
	Expect(err).NotTo(HaveOccurred(), "node is needed for the TypeScript SDK client")
	Expect(filepath.Join(interopDir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")).To(BeAnExistingFile(),
		"the TypeScript SDK client is not installed: run make interop-deps")
	c, cancel := context.WithTimeout(ctx, settle)
	defer cancel()
	cmd := exec.CommandContext(c, node, "interop.mjs", url, tool, args)
	cmd.Dir = interopDir
	cmd.Stderr = GinkgoWriter
	out, err := cmd.Output()
	Expect(err).NotTo(HaveOccurred(), "the TypeScript client: %s", out)
	events := map[string]tsEvent{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var e tsEvent
		Expect(json.Unmarshal([]byte(line), &e)).To(Succeed(), line)
		events[e.Event] = e
	}
	return events
}

// bearer is an HTTP client that presents token.
func bearer(token string) *http.Client {
	return &http.Client{Transport: bearerTransport(token)}
}

type bearerTransport string

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}
