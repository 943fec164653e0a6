package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/test/harness"
	"github.com/toolplane/toolplane/toolkit/spec"
)

var _ = Describe("A hostile workload", func() {
	It("that accepts the connection and never answers times out, and holds no one else up", func() {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		held := holdConnections(l)
		atSuiteEnd(held.close)

		since := time.Now()
		ts := hostile("hang", portOf(l.Addr()), spec.DefaultPath)
		eventuallyStatus(ts, func(g Gomega, ts *v1alpha1.ToolSet) {
			expectScrapeFailed(g, ts, "timed out")
		})
		Expect(held.accepted()).To(BeNumerically(">=", 1), "the manager never connected")
		expectUnharmed(since)
	})

	It("that drips one byte a second times out within spec.timeout", func() {
		var dripped atomic.Int64
		srv := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			body := `{"schemaVersion":"` + spec.SchemaVersion + `","tools":[`
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for i := 0; ; i++ {
				if _, err := w.Write([]byte{body[i%len(body)]}); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				dripped.Add(1)
				select {
				case <-r.Context().Done():
					return
				case <-tick.C:
				}
			}
		}))

		since := time.Now()
		ts := hostile("drip", srv.port, spec.DefaultPath)
		eventuallyStatus(ts, func(g Gomega, ts *v1alpha1.ToolSet) {
			expectScrapeFailed(g, ts, "timed out")
		})
		Expect(dripped.Load()).To(BeNumerically(">=", 1))
		expectUnharmed(since)
	})

	It("that returns 50 MB is cut off at --max-response-bytes", func() {
		const total = 50 << 20
		var written atomic.Int64
		srv := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			chunk := []byte(strings.Repeat(`{"name":"padding","inputSchema":{"type":"object"}},`, 1024))
			n, _ := w.Write([]byte(`{"schemaVersion":"` + spec.SchemaVersion + `","tools":[`))
			sent := int64(n)
			for sent < total {
				n, err := w.Write(chunk)
				sent += int64(n)
				if err != nil {
					break
				}
			}
			written.Store(max(written.Load(), sent))
		}))

		since := time.Now()
		ts := hostile("huge", srv.port, spec.DefaultPath)
		eventuallyStatus(ts, func(g Gomega, ts *v1alpha1.ToolSet) {
			expectScrapeFailed(g, ts, "too large", "4194304 bytes")
		})
		// The manager hung up after its limit: the server could write no
		// more than the limit plus what the socket buffers held.
		Eventually(written.Load).WithTimeout(settle).Should(BeNumerically(">", 0))
		Expect(written.Load()).To(BeNumerically("<", total))
		expectUnharmed(since)
	})

	It("that serves invalid JSON is reported as an invalid document", func() {
		srv := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"schemaVersion":"` + spec.SchemaVersion + `","tools":[{"name":"x",`))
		}))

		since := time.Now()
		ts := hostile("badjson", srv.port, spec.DefaultPath)
		eventuallyStatus(ts, func(g Gomega, ts *v1alpha1.ToolSet) {
			expectScrapeFailed(g, ts, "decoding spec document")
		})
		expectUnharmed(since)
	})

	It("whose schema has a $ref to a network URL gets that tool rejected, never fetches it, and publishes the rest", func() {
		canary := newCanary()
		tools := harness.Tools("ref_ok_", 1)
		tools = append(tools, spec.Tool{
			Name:        "ref_remote",
			InputSchema: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"x":{"$ref":"%s/schema.json"}}}`, canary.url)),
		})
		srv := serve(harness.NewWorkload("ref", tools))

		since := time.Now()
		ts := hostile("ref", srv.port, spec.DefaultPath)
		eventuallyStatus(ts, func(g Gomega, ts *v1alpha1.ToolSet) {
			g.Expect(apimeta.IsStatusConditionTrue(ts.Status.Conditions, v1alpha1.ConditionReady)).To(BeTrue())
			degraded := apimeta.FindStatusCondition(ts.Status.Conditions, v1alpha1.ConditionDegraded)
			g.Expect(degraded).NotTo(BeNil())
			g.Expect(degraded.Reason).To(Equal(v1alpha1.ReasonInvalidTools))
			g.Expect(degraded.Message).To(ContainSubstring("ref_remote"))
			state, reason := toolState(ts, "ref_remote")
			g.Expect(state).To(Equal(v1alpha1.ToolInvalid))
			g.Expect(reason).To(ContainSubstring("$ref"))
			state, _ = toolState(ts, "ref_ok_00")
			g.Expect(state).To(Equal(v1alpha1.ToolPublished))
		})
		expectPublished(ts, "ref_ok_00")
		expectNotPublished("ref_remote")
		expectUnharmed(since)
		Expect(canary.hits.Load()).To(BeZero(), "the manager fetched the $ref")
	})

	It("whose names have spaces or 300 characters gets those tools rejected and publishes the rest", func() {
		long := strings.Repeat("n", 300)
		tools := harness.Tools("names_ok_", 1)
		tools = append(tools,
			spec.Tool{Name: "has space", InputSchema: json.RawMessage(`{"type":"object"}`)},
			spec.Tool{Name: long, InputSchema: json.RawMessage(`{"type":"object"}`)},
		)
		srv := serve(harness.NewWorkload("names", tools))

		since := time.Now()
		ts := hostile("names", srv.port, spec.DefaultPath)
		eventuallyStatus(ts, func(g Gomega, ts *v1alpha1.ToolSet) {
			g.Expect(apimeta.IsStatusConditionTrue(ts.Status.Conditions, v1alpha1.ConditionReady)).To(BeTrue())
			for _, bad := range []string{"has space", long} {
				state, reason := toolState(ts, bad)
				g.Expect(state).To(Equal(v1alpha1.ToolInvalid), "tool %.20q…", bad)
				g.Expect(reason).To(ContainSubstring("does not match"))
			}
			state, _ := toolState(ts, "names_ok_00")
			g.Expect(state).To(Equal(v1alpha1.ToolPublished))
			degraded := apimeta.FindStatusCondition(ts.Status.Conditions, v1alpha1.ConditionDegraded)
			g.Expect(degraded).NotTo(BeNil())
			g.Expect(degraded.Reason).To(Equal(v1alpha1.ReasonInvalidTools))
		})
		expectPublished(ts, "names_ok_00")
		expectNotPublished("has space", long)
		expectUnharmed(since)
	})

	It("whose tool name is 1 MiB long gets that tool rejected and its status still written", func() {
		huge := strings.Repeat("m", 1<<20)
		tools := harness.Tools("mib_ok_", 1)
		tools = append(tools, spec.Tool{Name: huge, InputSchema: json.RawMessage(`{"type":"object"}`)})
		srv := serve(harness.NewWorkload("mib", tools))

		since := time.Now()
		ts := hostile("mib", srv.port, spec.DefaultPath)
		eventuallyStatus(ts, func(g Gomega, ts *v1alpha1.ToolSet) {
			g.Expect(apimeta.IsStatusConditionTrue(ts.Status.Conditions, v1alpha1.ConditionReady)).To(BeTrue())
			state, _ := toolState(ts, "mib_ok_00")
			g.Expect(state).To(Equal(v1alpha1.ToolPublished))
			degraded := apimeta.FindStatusCondition(ts.Status.Conditions, v1alpha1.ConditionDegraded)
			g.Expect(degraded).NotTo(BeNil())
			g.Expect(degraded.Reason).To(Equal(v1alpha1.ReasonInvalidTools))
			g.Expect(len(degraded.Message)).To(BeNumerically("<=", 1024))
		})
		expectPublished(ts, "mib_ok_00")
		expectUnharmed(since)
	})

	It("that serves 10,000 tools is refused whole at limits.maxTools", func() {
		srv := serve(harness.NewWorkload("many", harness.Tools("many_", 10000)))

		since := time.Now()
		ts := hostile("many", srv.port, spec.DefaultPath)
		eventuallyStatus(ts, func(g Gomega, ts *v1alpha1.ToolSet) {
			expectScrapeFailed(g, ts, "10000 tools", "limits.maxTools 256")
		})
		expectNotPublished("many_00")
		expectUnharmed(since)
	})

	It("that flaps between 200 and 500 keeps its tools in the table and says so", func() {
		wl := harness.NewWorkload("flap", harness.Tools("flap_", 2))
		var n atomic.Int64
		srv := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if n.Add(1)%2 == 0 {
				http.Error(w, "flapping", http.StatusInternalServerError)
				return
			}
			wl.ServeHTTP(w, r)
		}))

		since := time.Now()
		ts := hostile("flap", srv.port, spec.DefaultPath)
		expectPublished(ts, "flap_00", "flap_01")
		By("reporting the failed scrapes while holding the tools")
		eventuallyStatus(ts, func(g Gomega, ts *v1alpha1.ToolSet) {
			expectStale(g, ts, "HTTP 500")
		})
		By("recovering at the next good scrape")
		eventuallyStatus(ts, func(g Gomega, ts *v1alpha1.ToolSet) {
			g.Expect(apimeta.IsStatusConditionTrue(ts.Status.Conditions, v1alpha1.ConditionReady)).To(BeTrue())
			g.Expect(apimeta.IsStatusConditionTrue(ts.Status.Conditions, v1alpha1.ConditionStale)).To(BeFalse())
		})
		expectUnharmed(since)
	})

	It("that redirects to another host is refused, and the other host never reached", func() {
		canary := newCanary()
		srv := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, canary.url+spec.DefaultPath, http.StatusFound)
		}))

		since := time.Now()
		ts := hostile("redirect", srv.port, spec.DefaultPath)
		eventuallyStatus(ts, func(g Gomega, ts *v1alpha1.ToolSet) {
			expectScrapeFailed(g, ts, "redirect to another host refused")
		})
		expectUnharmed(since)
		Expect(canary.hits.Load()).To(BeZero(), "the manager followed the redirect")
	})

	It("whose revision changes on every request is scraped at its interval, not in a loop", func() {
		tools := harness.Tools("churn_", 2)
		spec.SortTools(tools)
		var n atomic.Int64
		srv := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			doc := spec.Document{SchemaVersion: spec.SchemaVersion, Server: spec.Server{Name: "churn"}, Tools: tools,
				Revision: fmt.Sprintf("sha256:%064x", n.Add(1))}
			w.Header().Set("ETag", spec.ETag(doc.Revision))
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(doc)
		}))

		since := time.Now()
		ts := hostile("churn", srv.port, spec.DefaultPath)
		expectPublished(ts, "churn_00", "churn_01")
		before, start := n.Load(), time.Now()
		expectUnharmed(since)
		// One scrape per interval, plus one for an event that raced the
		// window: a reconciler that requeued on every new revision would
		// scrape as fast as it could.
		rounds := int64(time.Since(start)/interval) + 2
		Expect(n.Load() - before).To(BeNumerically("<=", rounds))
	})

	It("that is an MCP server and never answers times out, and holds no one else up", func() {
		var asked atomic.Int64
		srv := serve(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			asked.Add(1)
			// Read the request, so that the server notices the client go.
			_, _ = io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
		}))

		since := time.Now()
		ts := hostile("mcp-hang", srv.port, "/mcp", asMCP)
		eventuallyStatus(ts, func(g Gomega, ts *v1alpha1.ToolSet) {
			expectScrapeFailed(g, ts, "timed out")
		})
		Expect(asked.Load()).To(BeNumerically(">=", 1), "the manager never asked")
		expectUnharmed(since)
	})

	It("that is an MCP server paginating tools/list forever is cut off, not followed", func() {
		var pages atomic.Int64
		srv := serve(mcpServer(func(context.Context, *mcp.ListToolsRequest) (*mcp.ListToolsResult, error) {
			n := pages.Add(1)
			return &mcp.ListToolsResult{Tools: []*mcp.Tool{}, NextCursor: fmt.Sprintf("page-%d", n)}, nil
		}))

		since := time.Now()
		ts := hostile("mcp-pages", srv.port, "/mcp", asMCP, func(ts *v1alpha1.ToolSet) { ts.Spec.Limits.MaxTools = 10 })
		eventuallyStatus(ts, func(g Gomega, ts *v1alpha1.ToolSet) {
			expectScrapeFailed(g, ts)
			// Within the timeout it ends at the page bound; on a loaded
			// machine the timeout may come first. Either ends it.
			g.Expect(apimeta.FindStatusCondition(ts.Status.Conditions, v1alpha1.ConditionReady).Message).
				To(Or(ContainSubstring("more than 11 pages"), ContainSubstring("timed out")))
		})
		expectUnharmed(since)
	})

	It("that is an MCP server listing 50 MB of tools is cut off at --max-response-bytes", func() {
		const total = 50 << 20
		var lists atomic.Int64
		// The SDK answers the handshake; tools/list is streamed as it is
		// written, so that the manager's body bound decides the outcome, not
		// how long a busy machine takes to encode 50 MB before the headers.
		handshake := mcpServer(func(context.Context, *mcp.ListToolsRequest) (*mcp.ListToolsResult, error) {
			return &mcp.ListToolsResult{}, nil
		})
		tool := `{"name":"pad","description":"` + strings.Repeat("padding ", 128) + `","inputSchema":{"type":"object"}},`
		srv := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			var msg struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if r.Method != http.MethodPost || json.Unmarshal(body, &msg) != nil || msg.Method != "tools/list" || len(msg.ID) == 0 {
				r.Body = io.NopCloser(bytes.NewReader(body))
				handshake.ServeHTTP(w, r)
				return
			}
			lists.Add(1)
			w.Header().Set("Content-Type", "application/json")
			if _, err := fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[`, msg.ID); err != nil {
				return
			}
			for sent := 0; sent < total; sent += len(tool) {
				if _, err := io.WriteString(w, tool); err != nil {
					return
				}
			}
		}))

		since := time.Now()
		ts := hostile("mcp-huge", srv.port, "/mcp", asMCP, func(ts *v1alpha1.ToolSet) { ts.Spec.Limits.MaxTools = 10000 })
		eventuallyStatus(ts, func(g Gomega, ts *v1alpha1.ToolSet) {
			expectScrapeFailed(g, ts, "too large", "4194304 bytes")
		})
		Expect(lists.Load()).To(BeNumerically(">=", 1))
		expectUnharmed(since)
	})

	It("that is an MCP server answering with invalid JSON-RPC is reported as such", func() {
		srv := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":`))
		}))

		since := time.Now()
		ts := hostile("mcp-badrpc", srv.port, "/mcp", asMCP)
		eventuallyStatus(ts, func(g Gomega, ts *v1alpha1.ToolSet) {
			expectScrapeFailed(g, ts, "MCP http://127.0.0.1:", "connecting")
		})
		expectUnharmed(since)
	})

	It("leaves every healthy ToolSet on time with all of them active at once", func() {
		expectUnharmed(time.Now())
		versions, torn := table.Observed()
		By(fmt.Sprintf("the table watch saw %d versions (%d torn reads between parts)", versions, torn))
	})
})

// expectPublished waits until the table holds names for ts, then requires
// them.
func expectPublished(ts *v1alpha1.ToolSet, names ...string) {
	GinkgoHelper()
	owner := spec.ObjectReference{Namespace: ts.Namespace, Name: ts.Name}
	Eventually(func(g Gomega) {
		got := harness.Names(table.Latest())
		for _, n := range names {
			g.Expect(got).To(HaveKeyWithValue(n, owner))
		}
	}).WithTimeout(settle).Should(Succeed())
	required.Add(owner, names...)
}

func expectNotPublished(names ...string) {
	GinkgoHelper()
	got := harness.Names(table.Latest())
	for _, n := range names {
		Expect(got).NotTo(HaveKey(n))
	}
}

// expectStale checks a ToolSet whose scrapes fail while its last good tools
// are held: Stale True, and Ready saying why.
func expectStale(g Gomega, ts *v1alpha1.ToolSet, detail string) {
	stale := apimeta.FindStatusCondition(ts.Status.Conditions, v1alpha1.ConditionStale)
	g.Expect(stale).NotTo(BeNil())
	g.Expect(stale.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(stale.Reason).To(Equal(v1alpha1.ReasonToolsStale))
	ready := apimeta.FindStatusCondition(ts.Status.Conditions, v1alpha1.ConditionReady)
	g.Expect(ready).NotTo(BeNil())
	g.Expect(ready.Message).To(ContainSubstring(detail))
	for _, t := range ts.Status.Tools {
		g.Expect(t.State).To(Equal(v1alpha1.ToolStale), "tool %s", t.Name)
	}
}

type server struct{ port int }

// serve runs h on loopback until the suite ends: a hostile ToolSet stays
// hostile for every later spec.
func serve(h http.Handler) server {
	GinkgoHelper()
	srv := httptest.NewServer(h)
	atSuiteEnd(srv.Close)
	return server{port: portOf(srv.Listener.Addr())}
}

// canary is a server on another loopback host (127.0.0.2) that nothing may
// reach: it counts every request.
type canary struct {
	url  string
	hits atomic.Int64
}

func newCanary() *canary {
	GinkgoHelper()
	c := &canary{}
	l, err := net.Listen("tcp", "127.0.0.2:0")
	Expect(err).NotTo(HaveOccurred())
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.hits.Add(1)
		_, _ = w.Write([]byte(`{"type":"object"}`))
	}))
	srv.Listener = l
	srv.Start()
	atSuiteEnd(srv.Close)
	c.url = srv.URL
	return c
}

// heldConns accepts connections and never answers them.
type heldConns struct {
	l     net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func holdConnections(l net.Listener) *heldConns {
	h := &heldConns{l: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			h.mu.Lock()
			h.conns = append(h.conns, c)
			h.mu.Unlock()
		}
	}()
	return h
}

func (h *heldConns) accepted() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conns)
}

func (h *heldConns) close() {
	_ = h.l.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.conns {
		_ = c.Close()
	}
}

// asMCP makes a hostile ToolSet list its tools over MCP.
func asMCP(ts *v1alpha1.ToolSet) { ts.Spec.Protocol = v1alpha1.ProtocolMCP }

// mcpServer is a stateless Go SDK MCP server whose tools/list answers list.
func mcpServer(list func(context.Context, *mcp.ListToolsRequest) (*mcp.ListToolsResult, error)) http.Handler {
	s := mcp.NewServer(&mcp.Implementation{Name: "hostile"}, nil)
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" {
				return list(ctx, req.(*mcp.ListToolsRequest))
			}
			return next(ctx, method, req)
		}
	})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
}
