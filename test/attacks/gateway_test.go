package attacks

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
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
