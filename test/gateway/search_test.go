package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/test/harness"
	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// searchEntry is one tool of /v1/search or search_tools.
type searchEntry struct {
	spec.TableTool
	Score float64 `json:"score"`
}

type searchAnswer struct {
	Revision   string        `json:"revision"`
	Tools      []searchEntry `json:"tools"`
	CacheScope string        `json:"cacheScope"`
}

func (a *searchAnswer) names() []string {
	out := []string{}
	for _, t := range a.Tools {
		out = append(out, t.Name)
	}
	return out
}

// searchAs asks a gateway's GET /v1/search with query and a token ("" for
// none).
func searchAs(g Gomega, base, query, tok string) *searchAnswer {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/search?limit=50&q="+url.QueryEscape(query), nil)
	g.Expect(err).NotTo(HaveOccurred())
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK), string(b))
	var a searchAnswer
	g.Expect(json.Unmarshal(b, &a)).To(Succeed())
	return &a
}

// searchTools calls search_tools in a session at /mcp/search.
func searchTools(g Gomega, cs *mcp.ClientSession, query string) *searchAnswer {
	res, err := call(cs, "search_tools", map[string]any{"query": query, "limit": 50})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.IsError).To(BeFalse(), text(res))
	b, err := json.Marshal(res.StructuredContent)
	g.Expect(err).NotTo(HaveOccurred())
	var a searchAnswer
	g.Expect(json.Unmarshal(b, &a)).To(Succeed())
	return &a
}

var _ = Describe("Search at the gateway binary", func() {
	It("finds a tool through /mcp/search and calls it with call_tool, from the Go client (2026-07-28) and the TypeScript client (2025-11-25)", func() {
		const task = "weather of a city"

		By("the Go SDK client at 2026-07-28")
		cs := connect(gw.URL()+"/mcp/search", "2026-07-28", nil, nil)
		Expect(listNames(cs)).To(Equal([]string{"search_tools", "call_tool"}))
		var found string
		Eventually(func(g Gomega) {
			a := searchTools(g, cs, task)
			g.Expect(a.Tools).NotTo(BeEmpty())
			found = a.Tools[0].Name
		}, settle).Should(Succeed())
		Expect(found).To(Equal("forecast"))
		res, err := call(cs, "call_tool", map[string]any{"name": found, "arguments": map[string]any{"city": "Oslo", "days": "2"}})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.IsError).To(BeFalse(), text(res))
		Expect(text(res)).To(Equal("Oslo: sunny for 2 days"))

		By("the TypeScript SDK client at 2025-11-25: search_tools, then call_tool of what it found")
		ev := typeScriptClient(gw.URL()+"/mcp/search", "search_tools", `{"query":"weather of a city","limit":3}`)
		Expect(ev["connected"].ProtocolVersion).To(Equal("2025-11-25"))
		var listed []string
		for _, t := range ev["tools"].Tools {
			listed = append(listed, t.Name)
		}
		Expect(listed).To(Equal([]string{"search_tools", "call_tool"}))
		var searched struct {
			IsError           bool          `json:"isError"`
			StructuredContent *searchAnswer `json:"structuredContent"`
		}
		Expect(json.Unmarshal(ev["called"].Result, &searched)).To(Succeed())
		Expect(searched.IsError).To(BeFalse())
		Expect(searched.StructuredContent.names()).To(And(HaveLen(1), ContainElement("forecast")), "only the forecast speaks of weather and cities")
		name := searched.StructuredContent.Tools[0].Name
		ev = typeScriptClient(gw.URL()+"/mcp/search", "call_tool", fmt.Sprintf(`{"name":%q,"arguments":{"city":"Oslo","days":"3"}}`, name))
		var tsRes spec.CallResult
		Expect(json.Unmarshal(ev["called"].Result, &tsRes)).To(Succeed())
		Expect(tsRes.IsError).To(BeFalse(), tsRes.Text())
		Expect(tsRes.Text()).To(Equal("Oslo: sunny for 3 days"))
	})

	It("finds a tool published after it started within the table's next revision, and never returns one it has seen removed", func() {
		Expect(cp.CreateNamespace(ctx, "fresh")).To(Succeed())
		w := newWorkload("fresh", "fresh-tools", "", toolkit.MustNew("translate_text", "Translates a text into another language",
			func(context.Context, struct {
				Text string `json:"text"`
				To   string `json:"to"`
			}) (string, error) {
				return "translated", nil
			}))
		DeferCleanup(w.close)
		const task = "translate a text into French"
		Expect(searchAs(Default, gw.URL(), task, "").names()).NotTo(ContainElement("translate_text"))

		By("publishing its ToolSet: found once the gateway holds the table that has it")
		w.apply(ctx)
		tbl := waitForTable(func(owners map[string]string) bool { return owners["translate_text"] == "fresh/fresh-tools" })
		Eventually(func(g Gomega) []string {
			a := searchAs(g, gw.URL(), task, "")
			// Within one revision: the answer of a gateway that has the
			// table with the tool (or a later one) has it.
			if a.Revision != tbl.Revision {
				return []string{"revision " + a.Revision}
			}
			return a.names()
		}, settle, 200*time.Millisecond).Should(ContainElement("translate_text"))
		Expect(searchAs(Default, gw.URL(), task, "").Tools[0].Name).To(Equal("translate_text"))

		By("deleting it: once the gateway's table lacks it, no search returns it")
		Expect(cp.Client.Delete(ctx, &v1alpha1.ToolSet{ObjectMeta: metav1.ObjectMeta{Namespace: "fresh", Name: "fresh-tools"}})).To(Succeed())
		Eventually(func(g Gomega) []string {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, gw.URL()+"/v1/tools", nil)
			g.Expect(err).NotTo(HaveOccurred())
			resp, err := http.DefaultClient.Do(req)
			g.Expect(err).NotTo(HaveOccurred())
			defer resp.Body.Close()
			var t spec.Table
			g.Expect(json.NewDecoder(resp.Body).Decode(&t)).To(Succeed())
			return names(&t)
		}, settle, 200*time.Millisecond).ShouldNot(ContainElement("translate_text"))
		Expect(searchAs(Default, gw.URL(), task, "").names()).NotTo(ContainElement("translate_text"))
		cs := connect(gw.URL()+"/mcp/search", "2026-07-28", nil, nil)
		Expect(searchTools(Default, cs, task).names()).NotTo(ContainElement("translate_text"))
		_, err := call(cs, "call_tool", map[string]any{"name": "translate_text", "arguments": map[string]any{"text": "x"}})
		Expect(err).To(MatchError(ContainSubstring("unknown tool")))
	})
})

var _ = Describe("Search at the gateway with --auth=kubernetes", func() {
	It("never shows a caller a tool it may not call, in /v1/search, search_tools or the catalog, and denies call_tool of one", func() {
		cs, err := kubernetes.NewForConfig(cp.Config)
		Expect(err).NotTo(HaveOccurred())
		const sa = "agent-search"
		_, err = cs.CoreV1().ServiceAccounts("agents").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		tr, err := cs.CoreV1().ServiceAccounts("agents").CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: []string{tokenAudience}, ExpirationSeconds: ptr.To[int64](3600)},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		tok := tr.Status.Token
		// One tool of crm, by name: not crm_headers, nor any other
		// namespace's.
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "crm", Name: "call-" + sa},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"toolplane.io"}, Resources: []string{"tools"}, Verbs: []string{"call"}, ResourceNames: []string{"crm_echo"}}}}
		_, err = cs.RbacV1().Roles("crm").Create(ctx, role, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = cs.RbacV1().RoleBindings("crm").Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: "crm", Name: "call-" + sa},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "agents", Name: sa}},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		// A query whose words match every tool of the table.
		const everything = "echoes text count times shows the request header weather of a city never answers workload dies served by two toolsets"
		tbl, _, err := harness.ReadTable(ctx, cp.Client, tableNamespace, tableName)
		Expect(err).NotTo(HaveOccurred())
		Expect(len(tbl.Tools)).To(BeNumerically(">", 3))

		By("GET /v1/search: exactly the granted tool, marked private")
		Eventually(func(g Gomega) {
			a := searchAs(g, gwAuth.URL(), everything, tok)
			g.Expect(a.names()).To(Equal([]string{"crm_echo"}))
			g.Expect(a.CacheScope).To(Equal("private"))
		}, settle).Should(Succeed())
		// Without a grant filter the same query finds more.
		Expect(len(searchAs(Default, gw.URL(), everything, "").Tools)).To(BeNumerically(">", 3))

		By("search_tools at /mcp/search: the same")
		s := connect(gwAuth.URL()+"/mcp/search", "2026-07-28", nil, bearer(tok))
		Expect(searchTools(Default, s, everything).names()).To(Equal([]string{"crm_echo"}))

		By("call_tool: the granted tool is called, an ungranted one is as unknown")
		r, err := call(s, "call_tool", map[string]any{"name": "crm_echo", "arguments": map[string]any{"text": "x"}})
		Expect(err).NotTo(HaveOccurred())
		Expect(r.IsError).To(BeFalse(), text(r))
		for _, denied := range []string{"crm_headers", "forecast"} {
			_, err = call(s, "call_tool", map[string]any{"name": denied, "arguments": map[string]any{}})
			Expect(err).To(MatchError(ContainSubstring("unknown tool")), denied)
		}
		s25 := connect(gwAuth.URL()+"/mcp/search", "2025-11-25", nil, bearer(tok))
		_, err = call(s25, "call_tool", map[string]any{"name": "crm_headers"})
		Expect(err).To(MatchError(ContainSubstring("unknown tool")))

		By("the catalog: its list, its search and the page of an ungranted tool")
		for _, page := range []string{"/catalog", "/catalog?q=" + url.QueryEscape(everything)} {
			body := pageAs(gwAuth.URL()+page, tok, http.StatusOK)
			Expect(body).To(ContainSubstring(`name=crm_echo"`))
			for _, t := range tbl.Tools {
				if t.Name != "crm_echo" {
					Expect(body).NotTo(ContainSubstring(`name=`+t.Name+`"`), page)
				}
			}
		}
		Expect(pageAs(gwAuth.URL()+"/catalog/tool?name=crm_headers", tok, http.StatusNotFound)).NotTo(ContainSubstring("Shows the request header"))
		Expect(pageAs(gwAuth.URL()+"/catalog/tool?name=crm_echo", tok, http.StatusOK)).To(ContainSubstring("Echoes text count times"))

		By("no token is 401 everywhere search answers")
		for _, path := range []string{"/v1/search?q=echo", "/catalog"} {
			pageAs(gwAuth.URL()+path, "", http.StatusUnauthorized)
		}
		Expect(statusAt(gwAuth.URL()+"/mcp/search", "")).To(Equal(http.StatusUnauthorized))
	})
})

func pageAs(u, tok string, want int) string {
	GinkgoHelper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	Expect(err).NotTo(HaveOccurred())
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	Expect(resp.StatusCode).To(Equal(want), "%s: %s", u, b)
	return string(b)
}

func statusAt(u, tok string) int {
	GinkgoHelper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(`{}`))
	Expect(err).NotTo(HaveOccurred())
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	return resp.StatusCode
}
