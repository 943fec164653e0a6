package attacks

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/toolplane/toolplane/test/harness"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// probeTimeout is a well-behaved client's timeout for one request.
const probeTimeout = 5 * time.Second

// wellBehaved is the address of the well-behaved client; attackers use
// harness.LoopbackIP addresses.
var wellBehaved = net.IPv4(127, 0, 0, 1)

var namespaces atomic.Int32

// newNamespace creates a namespace of its own for a spec.
func newNamespace(prefix string) string {
	ns := fmt.Sprintf("%s-%d", prefix, namespaces.Add(1))
	Expect(cp.CreateNamespace(ctx, ns)).To(Succeed())
	return ns
}

// tableTools returns n tools of ToolSet ns/service, routed to the Service
// service.ns.svc:8080, with a description of about descBytes bytes each.
func tableTools(ns, service string, n, descBytes int) []spec.TableTool {
	tools := make([]spec.TableTool, n)
	for i := range tools {
		name := fmt.Sprintf("%s_%05d", strings.ReplaceAll(service, "-", "_"), i)
		tools[i] = spec.TableTool{
			Name: name, SourceName: name,
			Description: strings.Repeat("Looks up records; ", max(1, descBytes/18)),
			InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}}}`),
			ToolSet:     spec.ObjectReference{Namespace: ns, Name: service},
			Endpoints: &spec.Endpoints{
				Invoke: fmt.Sprintf("http://%s.%s.svc:8080/tools/%s", service, ns, name),
				MCP:    fmt.Sprintf("http://%s.%s.svc:8080/mcp", service, ns),
			},
		}
	}
	return tools
}

// serviceHost is the host:port that tableTools routes ns/service to.
func serviceHost(ns, service string) string { return fmt.Sprintf("%s.%s.svc:8080", service, ns) }

// startGateway publishes tools as the table of a namespace of its own,
// without a manager, and starts a gateway that serves it with the chart's
// GOMEMLIMIT, resolve and args; the spec stops it.
func startGateway(name string, tools []spec.TableTool, resolve map[string]string, args ...string) *harness.Gateway {
	ns := newNamespace(name)
	spec.SortTableTools(tools)
	Expect(harness.WriteTable(ctx, cp.Client, ns, tableName, &spec.Table{Tools: tools})).To(Succeed())
	g := &harness.Gateway{Bin: gatewayBin, Kubeconfig: cp.Kubeconfig, TableNamespace: ns, Resolve: resolve,
		Args: args, Env: []string{chartGoMemLimit}, LogPath: filepath.Join(workDir, name+"-gateway.log")}
	Expect(g.Start(ctx)).To(Succeed())
	if st, err := harness.ReadProcStats(g.Pid()); err == nil {
		AddReportEntry("gateway RSS at start", fmt.Sprintf("%d MiB (%d tools)", st.RSS>>20, len(tools)))
	}
	DeferCleanup(func() {
		// Not Succeed: a gateway killed by its attack has exited already,
		// which expectBounded reports.
		_ = g.Stop(30 * time.Second)
	})
	return g
}

// listOnce is a well-behaved MCP client's request: connect at 2026-07-28
// from 127.0.0.1 and list the first page of tools, within probeTimeout.
func listOnce(g *harness.Gateway) error {
	c, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	hc := harness.ClientFrom(wellBehaved, 2)
	defer hc.CloseIdleConnections()
	client := mcp.NewClient(&mcp.Implementation{Name: "well-behaved", Version: "1.0.0"}, nil)
	cs, err := client.Connect(c, &mcp.StreamableClientTransport{Endpoint: g.URL() + "/mcp", HTTPClient: hc, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer cs.Close()
	if _, err := cs.ListTools(c, nil); err != nil {
		return fmt.Errorf("listing tools: %w", err)
	}
	return nil
}

// prober is a well-behaved client that keeps making listOnce requests.
type prober struct {
	stop     chan struct{}
	done     chan struct{}
	mu       sync.Mutex
	ok       int
	failures []string
}

// startProbing makes a listOnce request every interval until stopped.
func startProbing(g *harness.Gateway, interval time.Duration) *prober {
	p := &prober{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer GinkgoRecover()
		defer close(p.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			start := time.Now()
			err := listOnce(g)
			p.mu.Lock()
			if err != nil {
				p.failures = append(p.failures, fmt.Sprintf("%s after %s: %v", start.Format("15:04:05.000"), time.Since(start).Round(time.Millisecond), err))
			} else {
				p.ok++
			}
			p.mu.Unlock()
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return p
}

// Stop stops probing and checks that every request of the well-behaved
// client was answered in time.
func (p *prober) Stop() {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	Expect(p.failures).To(BeEmpty(), "the well-behaved client's requests during the attack (%d answered)", p.ok)
	Expect(p.ok).To(BeNumerically(">", 0))
}

// expectBounded checks what must hold after any attack on the gateway: it
// is running, it answers a well-behaved client, and its peak RSS stayed
// within gatewayRSSBound.
func expectBounded(g *harness.Gateway) {
	GinkgoHelper()
	exited, err := g.Exited()
	Expect(exited).To(BeFalse(), "the gateway exited: %v", err)
	Expect(listOnce(g)).To(Succeed(), "the gateway answers a well-behaved client after the attack")
	st := expectPeakRSS(g)
	AddReportEntry("gateway peak RSS", fmt.Sprintf("%d MiB", st.PeakRSS>>20))
}

// expectPeakRSS checks the gateway's peak RSS so far against
// gatewayRSSBound.
func expectPeakRSS(g *harness.Gateway) harness.ProcStats {
	GinkgoHelper()
	st, err := harness.ReadProcStats(g.Pid())
	Expect(err).NotTo(HaveOccurred())
	Expect(st.PeakRSS).To(BeNumerically("<=", gatewayRSSBound), "the gateway's peak RSS, %d MiB", st.PeakRSS>>20)
	return st
}

// postMCP sends one raw MCP POST, as a hostile client writes it, with the
// 2026 headers when version is set.
func postMCP(c context.Context, hc *http.Client, url, version, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(c, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if version != "" {
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	return hc.Do(req)
}

// meta2026 is the _meta a 2026-07-28 client sends with every request.
const meta2026 = `"_meta":{"io.modelcontextprotocol/clientInfo":{"name":"attacker","version":"1"},"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// post2026 sends one raw 2026-07-28 request of method, with params (a JSON
// object's members, without braces, or "") and the Mcp-Method and Mcp-Name
// headers a 2026 client sends.
func post2026(c context.Context, hc *http.Client, url, method, name, params string) (*http.Response, error) {
	if params != "" {
		params = "," + params
	}
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":{%s%s}}`, method, meta2026, params)
	req, err := http.NewRequestWithContext(c, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	return hc.Do(req)
}

// attackers returns n HTTP clients, each from an address of its own
// (harness.LoopbackIP(first+i)) with up to conns connections.
func attackers(first, n, conns int) []*http.Client {
	out := make([]*http.Client, n)
	for i := range out {
		out[i] = harness.ClientFrom(harness.LoopbackIP(first+i), conns)
	}
	DeferCleanup(func() {
		for _, hc := range out {
			hc.CloseIdleConnections()
		}
	})
	return out
}
