package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/test/harness"
)

// saToken creates ServiceAccount agents/name and returns a token of it for
// the gateway's audience.
func saToken(cs *kubernetes.Clientset, name string) string {
	_, err := cs.CoreV1().ServiceAccounts("agents").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	tr, err := cs.CoreV1().ServiceAccounts("agents").CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{tokenAudience}, ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

// e2eAuditLine is what these specs read of a line of --audit-log.
type e2eAuditLine struct {
	RequestID string `json:"requestId"`
	Caller    struct {
		User           string `json:"user"`
		ServiceAccount string `json:"serviceAccount"`
		AuthMode       string `json:"authMode"`
	} `json:"caller"`
	Method   string `json:"method"`
	Tool     string `json:"tool"`
	ToolSet  string `json:"toolSet"`
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
	Outcome  string `json:"outcome"`
}

func readAuditLog(path string) []e2eAuditLine {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	Expect(err).NotTo(HaveOccurred())
	var out []e2eAuditLine
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var l e2eAuditLine
		Expect(json.Unmarshal(sc.Bytes(), &l)).To(Succeed(), sc.Text())
		out = append(out, l)
	}
	return out
}

var _ = Describe("Audit and call limits", func() {
	It("audit every call once, and hold a ToolSet's callsPerMinute across callers and the gateway's per-caller ceiling", func() {
		cs, err := kubernetes.NewForConfig(cp.Config)
		Expect(err).NotTo(HaveOccurred())
		const ns = "limits"
		Expect(cp.CreateNamespace(ctx, ns)).To(Succeed())

		By("publishing a ToolSet that takes 4 calls a minute")
		w := newWorkload(ns, "limited-tools", "lim_", echoTool("lim"))
		DeferCleanup(w.close)
		w.apply(ctx)
		Eventually(func(g Gomega) {
			ts := &v1alpha1.ToolSet{}
			g.Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: w.service}, ts)).To(Succeed())
			ts.Spec.Limits.CallsPerMinute = ptr.To[int32](4)
			g.Expect(cp.Client.Update(ctx, ts)).To(Succeed())
		}, settle).Should(Succeed())
		Eventually(func(g Gomega) {
			t, _, err := harness.ReadTable(ctx, cp.Client, tableNamespace, tableName)
			g.Expect(err).NotTo(HaveOccurred())
			found := false
			for _, tt := range t.Tools {
				if tt.Name == "lim_echo" {
					found = true
					g.Expect(tt.CallsPerMinute).To(Equal(4))
				}
			}
			g.Expect(found).To(BeTrue())
		}, settle, 250*time.Millisecond).Should(Succeed())

		By("granting two agents the namespace's tools, and a third nothing")
		a, b, c := saToken(cs, "audit-a"), saToken(cs, "audit-b"), saToken(cs, "audit-c")
		_, err = cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "call-all"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"toolplane.io"}, Resources: []string{"tools"}, Verbs: []string{"call"}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "call-all"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "call-all"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "agents", Name: "audit-a"},
				{Kind: "ServiceAccount", Namespace: "agents", Name: "audit-b"}},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		By("starting a gateway with an audit log and a ceiling of 3 calls per caller and tool a minute")
		logPath := filepath.Join(workDir, "audit.log")
		g := &harness.Gateway{Bin: gatewayBin, Kubeconfig: cp.Kubeconfig, TableNamespace: tableNamespace,
			Resolve: map[string]string{w.host(): w.addr()},
			Args: []string{"--auth=kubernetes", "--token-audience", tokenAudience, "--audit-log", logPath,
				"--max-calls-per-caller-per-minute", "3"},
			LogPath: filepath.Join(workDir, "gateway-audit.log")}
		Expect(g.Start(ctx)).To(Succeed())
		stopped := false
		DeferCleanup(func() {
			if !stopped {
				Expect(g.Stop(30 * time.Second)).To(Succeed())
			}
		})

		const arg = "e2e-argument-value-5d1"
		callAsAgent := func(tok string) (limited string, err error) {
			s := connect(g.URL()+"/mcp", "2026-07-28", nil, bearer(tok))
			r, err := call(s, "lim_echo", map[string]any{"text": arg})
			if err != nil {
				return "", err
			}
			switch t := text(r); {
			case !r.IsError:
				return "", nil
			case strings.Contains(t, "Rate limited") && strings.Contains(t, "ToolSet limits/limited-tools"):
				return "toolset", nil
			case strings.Contains(t, "Rate limited"):
				return "caller", nil
			default:
				Fail("unexpected error result: " + t)
			}
			return "", nil
		}
		By("the first agent makes 3 calls, and its 4th is over its own ceiling")
		for range 3 {
			Expect(callAsAgent(a)).To(BeEmpty())
		}
		Expect(callAsAgent(a)).To(Equal("caller"))
		By("the second agent is not held to the first one's ceiling, but the ToolSet's 4 a minute are spent after its first call")
		Expect(callAsAgent(b)).To(BeEmpty())
		Expect(callAsAgent(b)).To(Equal("toolset"))
		By("the third agent may not call the tool at all")
		_, err = callAsAgent(c)
		Expect(err).To(MatchError(ContainSubstring("unknown tool")))

		By("every call is in the audit log exactly once, with its caller and decision, and no argument")
		Expect(g.Stop(30 * time.Second)).To(Succeed()) // writes out what is queued
		stopped = true
		raw, err := os.ReadFile(logPath)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(raw)).NotTo(ContainSubstring(arg))
		type row struct{ sa, decision, reason, outcome string }
		var rows []row
		ids := map[string]bool{}
		for _, l := range readAuditLog(logPath) {
			Expect(l.Method).To(Equal("tools/call"))
			Expect(l.Tool).To(Equal("lim_echo"))
			Expect(l.ToolSet).To(Equal("limits/limited-tools"))
			Expect(l.Caller.AuthMode).To(Equal("kubernetes"))
			Expect(l.Caller.User).To(Equal("system:serviceaccount:" + strings.ReplaceAll(l.Caller.ServiceAccount, "/", ":")))
			Expect(ids).NotTo(HaveKey(l.RequestID))
			ids[l.RequestID] = true
			rows = append(rows, row{l.Caller.ServiceAccount, l.Decision, l.Reason, l.Outcome})
		}
		slices.SortFunc(rows, func(x, y row) int { return strings.Compare(x.sa+x.decision+x.reason, y.sa+y.decision+y.reason) })
		Expect(rows).To(Equal([]row{
			{"agents/audit-a", "allowed", "", "ok"},
			{"agents/audit-a", "allowed", "", "ok"},
			{"agents/audit-a", "allowed", "", "ok"},
			{"agents/audit-a", "rate_limited", "caller", "limited"},
			{"agents/audit-b", "allowed", "", "ok"},
			{"agents/audit-b", "rate_limited", "toolset", "limited"},
			{"agents/audit-c", "denied", "not_permitted", "denied"},
		}))
	})
})

// aggregateRoles does what kube-controller-manager's clusterrole
// aggregation controller does, which envtest does not run: it sets the
// rules of each ClusterRole named that has an aggregationRule to the rules
// of every ClusterRole its selectors select.
func aggregateRoles(cs *kubernetes.Clientset, names ...string) {
	for _, name := range names {
		role, err := cs.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(role.AggregationRule).NotTo(BeNil(), "ClusterRole %s aggregates nothing", name)
		var rules []rbacv1.PolicyRule
		for _, sel := range role.AggregationRule.ClusterRoleSelectors {
			s, err := metav1.LabelSelectorAsSelector(&sel)
			Expect(err).NotTo(HaveOccurred())
			list, err := cs.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{LabelSelector: s.String()})
			Expect(err).NotTo(HaveOccurred())
			slices.SortFunc(list.Items, func(x, y rbacv1.ClusterRole) int { return strings.Compare(x.Name, y.Name) })
			for _, r := range list.Items {
				if r.Name != name {
					rules = append(rules, r.Rules...)
				}
			}
		}
		role.Rules = rules
		_, err = cs.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
	}
}

var _ = Describe("The ClusterRoles of config/rbac", func() {
	It("let a namespace's admin, not a cluster admin, create the README's sample Role that grants its tools", func() {
		cs, err := kubernetes.NewForConfig(cp.Config)
		Expect(err).NotTo(HaveOccurred())
		const ns = "team-rbac"
		Expect(cp.CreateNamespace(ctx, ns)).To(Succeed())

		By("binding a user to the built-in admin role in the namespace only")
		const user = "team-admin@example.com"
		_, err = cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team-admin"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "admin"},
			Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		asAdmin := rest.CopyConfig(cp.Config)
		asAdmin.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
		admin, err := kubernetes.NewForConfig(asAdmin)
		Expect(err).NotTo(HaveOccurred())

		sample, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "gateway_agent_rbac.yaml"))
		Expect(err).NotTo(HaveOccurred())
		docs := strings.Split(string(sample), "\n---\n")
		Expect(docs).To(HaveLen(2))
		var role rbacv1.Role
		Expect(yaml.UnmarshalStrict([]byte(docs[0]), &role)).To(Succeed())
		var binding rbacv1.RoleBinding
		Expect(yaml.UnmarshalStrict([]byte(docs[1]), &binding)).To(Succeed())
		role.Namespace, binding.Namespace = ns, ns

		By("without toolplane's ClusterRole, the escalation check refuses the Role")
		aggregateRoles(cs, "edit", "admin")
		_, err = admin.RbacV1().Roles(ns).Create(ctx, role.DeepCopy(), metav1.CreateOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)

		By("with config/rbac's tools-caller-role aggregated into admin, the same admin creates it and binds it")
		raw, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "tools_caller_role.yaml"))
		Expect(err).NotTo(HaveOccurred())
		var caller rbacv1.ClusterRole
		Expect(yaml.UnmarshalStrict(raw, &caller)).To(Succeed())
		Expect(caller.Labels).To(HaveKeyWithValue("rbac.authorization.k8s.io/aggregate-to-admin", "true"))
		Expect(caller.Labels).To(HaveKeyWithValue("rbac.authorization.k8s.io/aggregate-to-edit", "true"))
		Expect(caller.Labels).NotTo(HaveKey("rbac.authorization.k8s.io/aggregate-to-view"))
		_, err = cs.RbacV1().ClusterRoles().Create(ctx, &caller, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() {
			Expect(cs.RbacV1().ClusterRoles().Delete(ctx, caller.Name, metav1.DeleteOptions{})).To(Succeed())
			aggregateRoles(cs, "edit", "admin")
		})
		aggregateRoles(cs, "edit", "admin")
		_, err = admin.RbacV1().Roles(ns).Create(ctx, role.DeepCopy(), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = admin.RbacV1().RoleBindings(ns).Create(ctx, binding.DeepCopy(), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		By("the admin of one namespace still cannot grant another's tools")
		other := role.DeepCopy()
		other.Namespace = "crm"
		_, err = admin.RbacV1().Roles("crm").Create(ctx, other, metav1.CreateOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
	})
})
