package controllers

import (
	"context"
	"net"
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolplane/toolplane/api/v1alpha1"
)

var _ = Describe("The ToolSet status, round after round", func() {
	It("costs no status write for a Pod that resets every connection, though each reset comes from a new local port", func(ctx context.Context) {
		ns := newNamespace(ctx)
		good := newWorkload(tool("steady_a"))
		resetting := newWorkload(tool("steady_a"))
		resetting.setHandler(func(rw http.ResponseWriter, _ *http.Request) {
			conn, _, err := rw.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			// SO_LINGER 0: the close sends RST, "connection reset by peer"
			// on the operator's side, naming its ephemeral port.
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = conn.Close()
		})
		createReadyPod(ctx, ns, "steady-0", map[string]string{"app": "steady"}, good.port())
		createReadyPod(ctx, ns, "steady-1", map[string]string{"app": "steady"}, resetting.port())
		ts := toolSet(ns, "steady")
		createToolSet(ctx, ts)
		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, ts)
			g.Expect(readyCondition(got).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(condition(got, v1alpha1.ConditionDegraded).Reason).To(Equal(v1alpha1.ReasonPartialScrape))
			g.Expect(condition(got, v1alpha1.ConditionDegraded).Message).To(ContainSubstring("steady-1"))
		}).Should(Succeed())
		// Settled: let the publish's own round pass, then count 5 rounds.
		hits := resetting.hits.Load()
		Eventually(resetting.hits.Load).Should(BeNumerically(">=", hits+1))
		writes := statusWrites(ts)
		hits = resetting.hits.Load()
		Eventually(resetting.hits.Load).WithTimeout(60 * 1e9).Should(BeNumerically(">=", hits+5))
		Expect(statusWrites(ts)).To(Equal(writes), "5 rounds of resets cost no status write")
		Expect(condition(getToolSet(ctx, Default, ts), v1alpha1.ConditionDegraded).Message).NotTo(MatchRegexp(`:\d+->`),
			"no local address in the message")
	})
})
