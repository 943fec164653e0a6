package attacks

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/toolplane/toolplane/test/harness"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// The gateway's attacks under --auth=kubernetes: callers that are
// authenticated and authorized, and still hostile.
var _ = Describe("The gateway under auth", func() {
	const audience = "toolplane-gateway"
	var (
		cs     *kubernetes.Clientset
		agents string
	)
	BeforeEach(func() {
		var err error
		cs, err = kubernetes.NewForConfig(cp.Config)
		Expect(err).NotTo(HaveOccurred())
		agents = newNamespace("agents")
	})
	// serviceAccount creates ServiceAccount agents/name.
	serviceAccount := func(name string) {
		_, err := cs.CoreV1().ServiceAccounts(agents).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
	}
	// token returns a new token of ServiceAccount agents/name: each has a
	// credential id of its own.
	token := func(name string) string {
		tr, err := cs.CoreV1().ServiceAccounts(agents).CreateToken(ctx, name, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: ptr.To[int64](3600)},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		return tr.Status.Token
	}
	// grant lets ServiceAccount agents/sa call names in namespace (every
	// tool of it if none).
	grant := func(sa, namespace string, names ...string) {
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "call-" + sa},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"toolplane.io"}, Resources: []string{"tools"}, Verbs: []string{"call"}, ResourceNames: names}}}
		_, err := cs.RbacV1().Roles(namespace).Create(ctx, role, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = cs.RbacV1().RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "call-" + sa},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: agents, Name: sa}},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
	}
	// reviews is the SubjectAccessReviews the gateway has sent.
	reviews := func(g *harness.Gateway) float64 {
		resp, err := http.Get("http://" + g.MetricsAddr + "/metrics")
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		fams, err := harness.ParseMetrics(string(b))
		Expect(err).NotTo(HaveOccurred())
		return harness.Sum(fams, "toolplane_gateway_authorization_cache_total", map[string]string{"kind": "access", "result": "miss"})
	}
	// getTable is one GET /v1/tools as tok, read whole; it returns the
	// status and the table of a 200.
	getTable := func(g *harness.Gateway, hc *http.Client, tok string, gzip bool) (int, *spec.Table, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.URL()+"/v1/tools", nil)
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		if !gzip {
			// Go's transport asks for gzip and inflates it unless told
			// otherwise.
			req.Header.Set("Accept-Encoding", "identity")
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			return resp.StatusCode, nil, err
		}
		t, err := spec.DecodeTable(map[string][]byte{spec.TableKey: b})
		return resp.StatusCode, t, err
	}
	// expectAnswers checks that the gateway answers a warm, well-behaved
	// caller's GET /v1/tools within probeTimeout, and is still running.
	expectAnswers := func(g *harness.Gateway, tok string, want int) {
		GinkgoHelper()
		exited, err := g.Exited()
		Expect(exited).To(BeFalse(), "the gateway exited: %v", err)
		hc := harness.ClientFrom(wellBehaved, 1)
		hc.Timeout = probeTimeout
		defer hc.CloseIdleConnections()
		status, t, err := getTable(g, hc, tok, true)
		Expect(err).NotTo(HaveOccurred())
		Expect(status).To(Equal(http.StatusOK))
		Expect(t.Tools).To(HaveLen(want))
	}

	// Against main at cbef45e: 10 fresh tokens of one ServiceAccount each
	// start cold and ask every question again: 50,060 reviews at once, with
	// no rate limit to the API server.
	It("10 concurrent fresh tokens of a ServiceAccount granted one of 5,000 tools ask each question once, at the rate limit", func() {
		const tools, qps, burst = 5000, 400, 400
		// Five namespaces of 1,000 tools; the grant's must exist for its
		// Role, the others need not.
		granted := newNamespace("granted")
		var all []spec.TableTool
		nss := []string{granted, "other-1", "other-2", "other-3", "other-4"}
		for _, ns := range nss {
			all = append(all, tableTools(ns, "records-"+ns, tools/len(nss), 100)...)
		}
		target := all[7].Name
		g := startGateway("auth-fresh-tokens", all, nil, "--auth=kubernetes", "--token-audience="+audience,
			fmt.Sprintf("--auth-qps=%d", qps), fmt.Sprintf("--auth-burst=%d", burst))
		serviceAccount("agent")
		grant("agent", granted, target)
		toks := make([]string, 10)
		for i := range toks {
			toks[i] = token("agent")
		}

		By("10 clients, each with a token of its own, get GET /v1/tools at once, again on 503, until they have it")
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			failures []string
			requests int
		)
		start, before := time.Now(), reviews(g)
		samples := []struct {
			at time.Time
			n  float64
		}{{start, before}}
		done := make(chan struct{})
		for i, tok := range toks {
			wg.Go(func() {
				defer GinkgoRecover()
				hc := harness.ClientFrom(harness.LoopbackIP(i+1), 1)
				defer hc.CloseIdleConnections()
				for deadline := time.Now().Add(2 * settle); time.Now().Before(deadline); {
					status, t, err := getTable(g, hc, tok, i%2 == 0)
					mu.Lock()
					requests++
					mu.Unlock()
					switch {
					case err != nil:
						mu.Lock()
						failures = append(failures, err.Error())
						mu.Unlock()
						return
					case status == http.StatusServiceUnavailable:
						time.Sleep(100 * time.Millisecond)
						continue
					case status != http.StatusOK || len(t.Tools) != 1 || t.Tools[0].Name != target:
						mu.Lock()
						failures = append(failures, fmt.Sprintf("client %d: %d, %d tools", i, status, len(t.Tools)))
						mu.Unlock()
					}
					return
				}
				mu.Lock()
				failures = append(failures, fmt.Sprintf("client %d never got its table", i))
				mu.Unlock()
			})
		}
		go func() {
			wg.Wait()
			close(done)
		}()
		// The reviews sent, sampled each second: never more than the
		// burst plus the rate over the time since the attack began.
		for running := true; running; {
			select {
			case <-done:
				running = false
			case <-time.After(time.Second):
			}
			samples = append(samples, struct {
				at time.Time
				n  float64
			}{time.Now(), reviews(g)})
		}
		Expect(failures).To(BeEmpty())
		for _, s := range samples[1:] {
			Expect(s.n-before).To(BeNumerically("<=", burst+qps*s.at.Sub(start).Seconds()+1),
				"reviews sent %s into the attack", s.at.Sub(start).Round(time.Millisecond))
		}
		sent, took := reviews(g)-before, time.Since(start)
		AddReportEntry("reviews", fmt.Sprintf("%.0f SubjectAccessReviews for %d requests in %s", sent, requests, took.Round(time.Millisecond)))
		// Every namespace, each namespace, and each tool: once, whatever
		// the tokens; and the one allowed tool again each time its
		// decision expires (--auth-cache-ttl, 10s).
		Expect(sent).To(BeNumerically("<=", 1+len(nss)+tools+int(took/(10*time.Second))+1), "SubjectAccessReviews for 10 fresh tokens of one ServiceAccount")

		By("a second round of fresh tokens asks nothing, and the gateway answers within its bounds")
		for range 3 {
			expectAnswers(g, token("agent"), 1)
		}
		Expect(reviews(g)-before).To(BeNumerically("<=", sent+2), "reviews for 3 more fresh tokens: at most the allowed tool's expired decision")
		expectPeakRSS(g)
	})

	// Against main at cbef45e: each read filters and encodes the whole
	// table again, gzips it, and holds both: 8 at once peaked at 994 MiB.
	It("8 concurrent authorized reads of a 26 MB table keep the gateway's peak RSS within 200 MiB", func() {
		big := newNamespace("big")
		// 5,000 tools of about 5,200 bytes: 26 MB of table JSON, and one
		// tool elsewhere, so that a caller granted the big namespace sees
		// a part of the table, not all of it.
		all := append(tableTools(big, "records", 5000, 5200), tableTools("elsewhere", "other", 1, 100)...)
		g := startGateway("auth-big-reads", all, nil, "--auth=kubernetes", "--token-audience="+audience)
		st, err := harness.ReadProcStats(g.Pid())
		Expect(err).NotTo(HaveOccurred())
		AddReportEntry("gateway RSS holding the table", fmt.Sprintf("%d MiB", st.RSS>>20))
		toks := make([]string, 8)
		for i := range toks {
			sa := fmt.Sprintf("reader-%d", i)
			serviceAccount(sa)
			grant(sa, big)
			toks[i] = token(sa)
		}

		By("8 callers, each granted the big namespace, read the table at once, twice, half of them gzipped")
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			failures []string
		)
		for i, tok := range toks {
			wg.Go(func() {
				defer GinkgoRecover()
				hc := harness.ClientFrom(harness.LoopbackIP(i+1), 1)
				defer hc.CloseIdleConnections()
				for range 2 {
					status, t, err := getTable(g, hc, tok, i%2 == 0)
					if err != nil || status != http.StatusOK || len(t.Tools) != 5000 {
						n := -1
						if t != nil {
							n = len(t.Tools)
						}
						mu.Lock()
						failures = append(failures, fmt.Sprintf("reader %d: %d, %d tools, %v", i, status, n, err))
						mu.Unlock()
						return
					}
				}
			})
		}
		wg.Wait()
		Expect(failures).To(BeEmpty())
		expectAnswers(g, toks[0], 5000)
		st = expectPeakRSS(g)
		AddReportEntry("gateway peak RSS", fmt.Sprintf("%d MiB", st.PeakRSS>>20))
	})
})
