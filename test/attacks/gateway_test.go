package attacks

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/toolplane/toolplane/test/harness"
)

var _ = Describe("The gateway under attack", func() {
	It("refuses a 64 KiB JSON-RPC batch of 1,331 tools/list calls (no Mcp-Protocol-Version: 2025-03-26) against 5,000 tools, on every MCP endpoint", func() {
		g := startGateway("batch", tableTools("batch-ns", "big-tools", 5000, 300), nil)
		p := startProbing(g, 500*time.Millisecond)

		calls := make([]string, 1331)
		for i := range calls {
			calls[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, i)
		}
		batch := "[" + strings.Join(calls, ",") + "]"
		Expect(len(batch)).To(BeNumerically("<=", 64<<10))

		for i, path := range []string{"/mcp", "/mcp/namespaces/batch-ns", "/mcp/toolsets/batch-ns/big-tools"} {
			By("posting the batch to " + path + " and reading slowly")
			hc := harness.ClientFrom(harness.LoopbackIP(i), 1)
			for _, version := range []string{"", "2025-03-26"} {
				resp, err := postMCP(ctx, hc, g.URL()+path, version, batch)
				Expect(err).NotTo(HaveOccurred())
				// A client that does not read: the gateway holds whatever it
				// answers while the client sits on it.
				time.Sleep(2 * time.Second)
				expectPeakRSS(g)
				body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
				resp.Body.Close()
				Expect(err).NotTo(HaveOccurred())
				Expect(resp.StatusCode).To(Equal(http.StatusBadRequest), "a batch is refused before the SDK sees it; got %d and %d bytes", resp.StatusCode, len(body))
				var rpc struct {
					Error struct {
						Code    int    `json:"code"`
						Message string `json:"message"`
					} `json:"error"`
				}
				Expect(json.Unmarshal(body, &rpc)).To(Succeed(), "a JSON-RPC error body: %.200s", body)
				Expect(rpc.Error.Code).To(Equal(-32600))
				Expect(rpc.Error.Message).To(ContainSubstring("batch"))
			}
			hc.CloseIdleConnections()
		}
		p.Stop()
		expectBounded(g)
	})
})

var _ = Describe("The gateway under many clients", func() {
	It("holds to 64 of 1,000 idle connections from one address, and closes 300 slow-body connections at the read timeout", Label("heavy"), func() {
		g := startGateway("conns", tableTools("conns-ns", "tools", 100, 100), nil)
		p := startProbing(g, 500*time.Millisecond)
		addr := g.Addr

		By("opening 1,000 connections from 127.0.0.2 that send nothing")
		var idle []net.Conn
		DeferCleanup(func() {
			for _, c := range idle {
				c.Close()
			}
		})
		d := harness.DialerFrom(harness.LoopbackIP(0))
		for range 1000 {
			c, err := d.DialContext(ctx, "tcp", addr)
			Expect(err).NotTo(HaveOccurred())
			idle = append(idle, c)
		}

		By("opening 300 connections from 127.0.1.x that send a 1 MiB body a byte a second")
		type slow struct {
			c      net.Conn
			closed chan time.Duration
		}
		var slows []slow
		start := time.Now()
		for i := range 300 {
			c, err := harness.DialerFrom(harness.LoopbackIP(256+i%10)).DialContext(ctx, "tcp", addr)
			Expect(err).NotTo(HaveOccurred())
			s := slow{c: c, closed: make(chan time.Duration, 1)}
			slows = append(slows, s)
			DeferCleanup(c.Close)
			go func() {
				_, _ = fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n{", addr, 1<<20)
				tick := time.NewTicker(time.Second)
				defer tick.Stop()
				for range 90 {
					<-tick.C
					if _, err := c.Write([]byte(" ")); err != nil {
						break
					}
				}
			}()
			go func() {
				_, _ = io.Copy(io.Discard, c) // until the gateway closes it
				s.closed <- time.Since(start)
			}()
		}

		By("counting the idle connections the gateway closed at once, well within its read-header timeout (10s)")
		var closedAtOnce atomic.Int32
		var wg sync.WaitGroup
		for _, c := range idle {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
				if _, err := c.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
					closedAtOnce.Add(1)
				}
			}()
		}
		wg.Wait()
		Expect(time.Since(start)).To(BeNumerically("<", 8*time.Second), "the count is not of connections that the read-header timeout closed")
		Expect(int(closedAtOnce.Load())).To(BeNumerically(">=", 1000-64), "connections from one address beyond --max-conns-per-client are closed when accepted, or (64 at a time) once they have sent no request to answer for 2s")

		By("waiting for the slow bodies to be cut at the read timeout (30s)")
		for _, s := range slows {
			Eventually(s.closed, 45*time.Second).Should(Receive(BeNumerically("<", 45*time.Second)))
		}
		expectPeakRSS(g)
		p.Stop()
		expectBounded(g)
	})

	It("holds 2,000 subscriptions/listen streams from 20 addresses to 16 per address and 256 in all", func() {
		g := startGateway("listen", tableTools("listen-ns", "tools", 100, 100), nil)
		p := startProbing(g, 500*time.Millisecond)
		clients := attackers(512, 20, 128)
		c, cancelStreams := context.WithCancel(ctx)
		DeferCleanup(cancelStreams)

		var (
			mu                    sync.Mutex
			open                  = map[int]int{}
			opened, refused, errs int
			wg                    sync.WaitGroup
			dialing               = make(chan struct{}, 64)
		)
		for i := range 2000 {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				dialing <- struct{}{}
				rc, cancel := context.WithTimeout(c, 10*time.Second)
				resp, err := post2026(rc, clients[i%20], g.URL()+"/mcp", "subscriptions/listen", "", `"notifications":{"toolsListChanged":true}`)
				<-dialing
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					errs++
					cancel()
				case resp.StatusCode == http.StatusOK:
					opened++
					open[i%20]++
					// Held open (and its context uncancelled) until the spec ends.
					DeferCleanup(resp.Body.Close)
					DeferCleanup(cancel)
				default:
					refused++
					Expect(resp.StatusCode).To(Equal(http.StatusTooManyRequests))
					resp.Body.Close()
					cancel()
				}
			}()
		}
		wg.Wait()
		AddReportEntry("listen streams", fmt.Sprintf("opened %d, refused %d, failed %d", opened, refused, errs))
		Expect(opened).To(BeNumerically("<=", 256), "--max-streams")
		Expect(opened).To(BeNumerically(">=", 200), "streams within the bounds open")
		for addr, n := range open {
			Expect(n).To(BeNumerically("<=", 16), "--max-streams-per-client, address %d", addr)
		}
		time.Sleep(2 * time.Second)
		p.Stop()
		expectBounded(g)
	})

	It("holds 20,000 initialize requests with --sessions from 40 addresses to 32 sessions per address and 1,000 in all", func() {
		g := startGateway("sessions", tableTools("sessions-ns", "tools", 100, 100), nil, "--sessions")
		p := startProbing(g, 500*time.Millisecond)
		clients := attackers(1024, 40, 4)
		var (
			mu       sync.Mutex
			sessions = map[int]int{}
			total    int
			wg       sync.WaitGroup
		)
		const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"attacker","version":"1"}}}`
		deadline := time.Now().Add(settle)
		for w := range 80 {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				hc := clients[w%40]
				for range 250 {
					if time.Now().After(deadline) {
						return
					}
					rc, cancel := context.WithTimeout(ctx, 10*time.Second)
					resp, err := postMCP(rc, hc, g.URL()+"/mcp", "", initialize)
					if err == nil {
						_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
						resp.Body.Close()
						if resp.Header.Get("Mcp-Session-Id") != "" {
							mu.Lock()
							sessions[w%40]++
							total++
							mu.Unlock()
						}
					}
					cancel()
				}
			}()
		}
		wg.Wait()
		AddReportEntry("sessions", fmt.Sprintf("%d opened", total))
		Expect(total).To(BeNumerically("<=", 1000), "--max-sessions")
		Expect(total).To(BeNumerically(">=", 900), "sessions within the bounds open")
		for addr, n := range sessions {
			Expect(n).To(BeNumerically("<=", 32), "--max-sessions-per-client, address %d", addr)
		}
		p.Stop()
		expectBounded(g)
	})
})

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

var _ = Describe("The gateway under a hostile workload", func() {
	// calls makes n concurrent tools/call requests of tool from attackers
	// with one connection each, reads each answer whole, and returns the
	// answers' bodies and how long the slowest took.
	calls := func(g *harness.Gateway, tool string, n int) ([]string, time.Duration) {
		clients := attackers(4096, n/32, 32)
		bodies := make([]string, n)
		start := time.Now()
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				c, cancel := context.WithTimeout(ctx, 90*time.Second)
				defer cancel()
				resp, err := post2026(c, clients[i%len(clients)], g.URL()+"/mcp", "tools/call", tool, fmt.Sprintf(`"name":%q,"arguments":{}`, tool))
				if err != nil {
					bodies[i] = "error: " + err.Error()
					return
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				if err != nil {
					bodies[i] = "error: " + err.Error()
					return
				}
				bodies[i] = string(b)
			}()
		}
		wg.Wait()
		return bodies, time.Since(start)
	}

	It("holds 256 concurrent calls whose results are 4 MiB each within the results' memory budget", Label("heavy"), func() {
		result, err := json.Marshal(map[string]any{
			"content": []map[string]any{{"type": "text", "text": strings.Repeat("x", 4<<20-256)}},
		})
		Expect(err).NotTo(HaveOccurred())
		wl := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			// Chunked: no Content-Length to reserve by.
			for b := result; len(b) > 0; {
				n := min(len(b), 64<<10)
				if _, err := w.Write(b[:n]); err != nil {
					return
				}
				b = b[n:]
			}
		}))
		DeferCleanup(wl.Close)
		tools := tableTools("results-ns", "big-results", 1, 100)
		g := startGateway("results", tools, map[string]string{serviceHost("results-ns", "big-results"): wl.Listener.Addr().String()})
		p := startProbing(g, 500*time.Millisecond)

		bodies, took := calls(g, tools[0].Name, 256)
		ok, busy := 0, 0
		for _, b := range bodies {
			switch {
			case len(b) > 4<<20-256:
				ok++
			case strings.Contains(b, "budget"):
				busy++
			default:
				Fail(fmt.Sprintf("a call answered neither the result nor that the budget is spent: %.300s", b))
			}
		}
		AddReportEntry("calls", fmt.Sprintf("%d results, %d busy, in %s", ok, busy, took.Round(time.Millisecond)))
		Expect(ok).To(BeNumerically(">=", 1), "calls within the budget pass their results through")
		p.Stop()
		expectBounded(g)
	})

	It("fails 128 concurrent calls of a workload that sends 9 MiB of header and stalls at the header limit, not the call timeout", func() {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(l.Close)
		stall, unstall := context.WithCancel(ctx)
		DeferCleanup(unstall)
		line := "X-Padding: " + strings.Repeat("p", 1000) + "\r\n"
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					_, _ = c.Read(make([]byte, 64<<10)) // the request
					w := bufio.NewWriterSize(c, 64<<10)
					_, _ = w.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
					for range 9 << 20 / len(line) {
						if _, err := w.WriteString(line); err != nil {
							return
						}
					}
					_ = w.Flush()
					<-stall.Done()
				}()
			}
		}()
		tools := tableTools("headers-ns", "header-bomb", 1, 100)
		g := startGateway("headers", tools, map[string]string{serviceHost("headers-ns", "header-bomb"): l.Addr().String()})
		p := startProbing(g, 500*time.Millisecond)

		bodies, took := calls(g, tools[0].Name, 128)
		for _, b := range bodies {
			Expect(b).To(ContainSubstring(`"isError":true`), "each call fails with an error result")
		}
		AddReportEntry("calls", fmt.Sprintf("128 failed in %s", took.Round(time.Millisecond)))
		Expect(took).To(BeNumerically("<", 15*time.Second), "the calls fail at the header limit, well before the call timeout (30s)")
		p.Stop()
		expectBounded(g)
	})
})
