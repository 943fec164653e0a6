package attacks

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/test/harness"
	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/server"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// callThrough calls tool through the gateway as a well-behaved client, and
// returns the result's text, or the error.
func callThrough(g *harness.Gateway, tool string) (string, error) {
	c, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	hc := harness.ClientFrom(wellBehaved, 2)
	defer hc.CloseIdleConnections()
	client := mcp.NewClient(&mcp.Implementation{Name: "well-behaved", Version: "1.0.0"}, nil)
	cs, err := client.Connect(c, &mcp.StreamableClientTransport{Endpoint: g.URL() + "/mcp", HTTPClient: hc, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		return "", err
	}
	defer cs.Close()
	res, err := cs.CallTool(c, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
	if err != nil {
		return "", err
	}
	if res.IsError || len(res.Content) == 0 {
		return "", fmt.Errorf("error result %+v", res.Content)
	}
	if t, ok := res.Content[0].(*mcp.TextContent); ok {
		return t.Text, nil
	}
	return "", fmt.Errorf("content %T", res.Content[0])
}

var _ = Describe("Routing", func() {
	It("does not make the gateway a confused deputy: an ExternalName Service aliasing another namespace's Service gets no endpoint, and the victim's tool is still called in its own namespace", func() {
		crm, evil := newNamespace("routing-crm"), newNamespace("routing-evil")
		_, table := startManager("routing", crm, evil)

		By("the victim: crm-tools of crm, behind a Service that selects its Pods")
		reg := &toolkit.Registry{}
		Expect(reg.Add(toolkit.MustNew("secret", "Returns crm's data.", func(context.Context, struct{}) (string, error) {
			return "crm's data", nil
		}))).To(Succeed())
		h := server.New(reg, &server.Options{Name: "crm-tools", AllowAnyHostOnLoopback: true})
		DeferCleanup(h.Close)
		victimPort := serve(h)
		Expect(harnessPod(crm, "crm-tools-0", "crm-tools", victimPort)).To(Succeed())
		Expect(cp.Client.Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: crm, Name: "crm-tools"},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "crm-tools"},
				Ports: []corev1.ServicePort{{Port: 8080, TargetPort: intstr.FromString(harness.PortName)}}},
		})).To(Succeed())
		Expect(cp.Client.Create(ctx, harness.NewToolSet(crm, "crm-tools", "crm-tools", spec.DefaultPath, 5*time.Second))).To(Succeed())

		By("the attacker: a ToolSet of evil whose Service is an alias for crm-tools.crm")
		// Its own Pod serves a tool of the victim's source name, published
		// as evil_secret: through the alias, a call of it is a call of
		// crm's secret, authorized only against evil's names.
		decoy := harness.NewWorkload("evil", []spec.Tool{{Name: "secret", InputSchema: json.RawMessage(`{"type":"object"}`)}})
		Expect(harnessPod(evil, "alias-0", "alias", serve(decoy))).To(Succeed())
		Expect(cp.Client.Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: evil, Name: "alias"},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "crm-tools." + crm + ".svc.cluster.local"},
		})).To(Succeed())
		alias := harness.NewToolSet(evil, "alias", "alias", spec.DefaultPath, 5*time.Second)
		alias.Spec.Prefix = "evil_"
		Expect(cp.Client.Create(ctx, alias)).To(Succeed())

		Eventually(func(g Gomega) {
			t, _, err := harness.ReadTable(ctx, cp.Client, table, tableName)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(t.Tools).To(HaveLen(2))
		}).WithTimeout(settle).Should(Succeed())

		By("a gateway, whose dialer stands in for cluster DNS: the alias's name, too, would reach crm")
		resolve := map[string]string{}
		for _, host := range []string{"crm-tools." + crm, "alias." + evil} {
			for _, name := range []string{host + ".svc", host + ".svc.cluster.local"} {
				resolve[net.JoinHostPort(name, "8080")] = net.JoinHostPort("127.0.0.1", strconv.Itoa(victimPort))
			}
		}
		g := &harness.Gateway{Bin: gatewayBin, Kubeconfig: cp.Kubeconfig, TableNamespace: table, Resolve: resolve,
			Args: []string{"--table-name", tableName}, Env: []string{chartGoMemLimit}, LogPath: filepath.Join(workDir, "routing-gateway.log")}
		Expect(g.Start(ctx)).To(Succeed())
		DeferCleanup(func() { _ = g.Stop(30 * time.Second) })

		Eventually(func() (string, error) { return callThrough(g, "secret") }).WithTimeout(settle).Should(Equal("crm's data"),
			"the victim's own tool is called in its own namespace")
		text, err := callThrough(g, "evil_secret")
		Expect(err).To(HaveOccurred(), "the alias's tool is routed, and answered %q", text)

		By("the alias's ToolSet saying why")
		Eventually(func(g Gomega) {
			ts := &v1alpha1.ToolSet{}
			g.Expect(cp.Client.Get(ctx, keyOf(evil, "alias"), ts)).To(Succeed())
			g.Expect(ts.Status.Conditions).To(ContainElement(And(
				HaveField("Type", v1alpha1.ConditionReady), HaveField("Reason", v1alpha1.ReasonServiceRefused))))
			t, _, err := harness.ReadTable(ctx, cp.Client, table, tableName)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(t.Tools).To(HaveLen(2))
			for _, tt := range t.Tools {
				if tt.ToolSet.Namespace == evil {
					g.Expect(tt.Endpoints).To(BeNil(), "the alias's tool has no endpoint")
				} else {
					g.Expect(tt.Endpoints.Invoke).To(HavePrefix("http://crm-tools." + crm + ".svc.cluster.local:8080/"))
				}
			}
		}).WithTimeout(settle).Should(Succeed())
	})
})
