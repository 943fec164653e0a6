package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/server"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// orderIn is the argument of order_get: an int64 ID past 2^53, which a
// float64 on the way rounds to a neighbour.
type orderIn struct {
	ID int64 `json:"id"`
}

// bigID is 2^53 + 1: the first integer a float64 cannot hold.
const bigID = "9007199254740993"

// png is the start of a PNG, enough for a block of bytes.
var png = []byte("\x89PNG\r\n\x1a\n0123456789")

// newWorkloadHost makes the host a workload the API server's service proxy
// reaches listens on: the proxy refuses Endpoints on loopback, and a test
// sends nothing past the machine, so it is a network namespace of the
// test's own (testhost_linux_test.go). Without root or ip(8) the specs that
// need it are skipped, and fail where CI=true, whose runners have both.
func newWorkloadHost() *testHost {
	GinkgoHelper()
	if why := testHostUnavailable(); why != "" {
		if os.Getenv("CI") == "true" {
			Fail("CI=true and no test host for the service proxy's specs: " + why)
		}
		Skip("the API server's service proxy refuses loopback, and a test host of our own is out of reach: " + why)
	}
	h, err := newTestHost()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(h.Close)
	return h
}

// newOrderServer serves, on host, order_get, which echoes the ID it bound,
// and order_chart, whose result has a block of every kind.
func newOrderServer(host *testHost) *httptest.Server {
	GinkgoHelper()
	reg := new(toolkit.Registry)
	Expect(reg.Add(toolkit.MustNew("order_get", "Reads an order.", func(_ context.Context, in orderIn) (string, error) {
		return "order " + strconv.FormatInt(in.ID, 10), nil
	}))).To(Succeed())
	Expect(reg.Add(toolkit.MustNew("order_read", "Reads an order as JSON.", func(_ context.Context, in orderIn) (orderIn, error) {
		return in, nil
	}))).To(Succeed())
	Expect(reg.Add(toolkit.MustNew("order_chart", "Charts the orders.", func(context.Context, struct{}) (*spec.CallResult, error) {
		return &spec.CallResult{Content: []spec.Content{
			toolkit.Text("The orders of the week:"),
			toolkit.Image(png, "image/png"),
			toolkit.Resource("file:///orders.csv", "text/csv", "id\n42\n", nil),
		}}, nil
	}))).To(Succeed())
	Expect(reg.Add(toolkit.MustNewDynamic("order_max", "Takes an ID up to 2^53 + 1.",
		json.RawMessage(`{"type":"object","properties":{"id":{"type":"integer","maximum":`+bigID+`}}}`),
		func(context.Context, map[string]any) (any, error) { return "ok", nil }))).To(Succeed())
	h := server.New(reg, &server.Options{Name: "orders"})
	DeferCleanup(h.Close)
	srv := httptest.NewUnstartedServer(h)
	l, err := host.Listen("0")
	Expect(err).NotTo(HaveOccurred())
	srv.Listener = l
	srv.Start()
	DeferCleanup(srv.Close)
	return srv
}

// exposeThroughAPIServer makes the Service the ToolSet names, port 8080,
// and its Endpoints at the Pod, ip on the server's port, as the endpoints
// controller would: what the API server's service proxy reads.
func exposeThroughAPIServer(ctx context.Context, ts *v1alpha1.ToolSet, srv *httptest.Server, ip string) {
	GinkgoHelper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ts.Namespace, Name: ts.Spec.Service.Name},
		// A selector, as the operator wants of a ToolSet's Service: it
		// refuses a selector-less one, whose Endpoints could name anything.
		Spec: corev1.ServiceSpec{Selector: ts.Spec.Selector.MatchLabels, Ports: []corev1.ServicePort{{
			Name: "http", Port: ts.Spec.Service.Port, TargetPort: intstr.FromInt32(portOf(srv)),
		}}},
	}
	Expect(k8sClient.Create(ctx, svc)).To(Succeed())
	//nolint:staticcheck // the service proxy of the API server reads Endpoints
	eps := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Namespace: ts.Namespace, Name: ts.Spec.Service.Name},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: ip, TargetRef: &corev1.ObjectReference{
				Kind: "Pod", Namespace: ts.Namespace, Name: ts.Name + "-0",
			}}},
			Ports: []corev1.EndpointPort{{Name: "http", Port: portOf(srv)}},
		}},
	}
	Expect(k8sClient.Create(ctx, eps)).To(Succeed())
	ready := true
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ts.Namespace, Name: ts.Spec.Service.Name + "-0",
			Labels: map[string]string{discoveryv1.LabelServiceName: ts.Spec.Service.Name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ts.Namespace, Name: ts.Name + "-0"}}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(portOf(srv))}},
	}
	Expect(k8sClient.Create(ctx, slice)).To(Succeed())
}

func ptr[T any](v T) *T { return &v }

var _ = Describe("kubectl toolplane call", Ordered, func() {
	var orders *httptest.Server
	var mcpURL string

	BeforeAll(func(ctx context.Context) {
		host := newWorkloadHost()
		ip := host.IP
		orders = newOrderServer(host)
		mcpURL = orders.URL + spec.MCPPath
		ts := serveToolSetAt(ctx, "orders", "orders-tools", orders, ip)
		exposeThroughAPIServer(ctx, ts, orders, ip)

		// The same server listed over MCP, as any MCP server is: its
		// tools have only an MCP endpoint, called with tools/call.
		mcpTS := serveToolSetAt(ctx, "orders", "orders-mcp", orders, ip, func(ts *v1alpha1.ToolSet) {
			ts.Spec.Protocol = v1alpha1.ProtocolMCP
			ts.Spec.Prefix = "mcp_"
		})
		exposeThroughAPIServer(ctx, mcpTS, orders, ip)
		Eventually(func(g Gomega) {
			got := &v1alpha1.ToolSet{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(mcpTS), got)).To(Succeed())
			g.Expect(got.Status.PublishedTools).To(BeEquivalentTo(4))
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			got := &v1alpha1.ToolSet{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(ts), got)).To(Succeed())
			g.Expect(got.Status.PublishedTools).To(BeEquivalentTo(4))
			out, _, _ := run("tools", "-n", "orders", "-o", "name")
			g.Expect(out).To(ContainSubstring("tool.toolplane.io/order_get\n"))
		}).Should(Succeed())
	})

	It("keeps an integer past 2^53 exact through --gateway", func() {
		out, errOut, code := run("call", "order_get", "--args", `{"id":`+bigID+`}`, "--gateway", mcpURL)
		Expect(code).To(Equal(0), errOut)
		Expect(out).To(Equal("order " + bigID + "\n"))
	})

	It("keeps an integer past 2^53 exact in the structured result through --gateway with -o json", func() {
		out, errOut, code := run("call", "order_read", "--args", `{"id":`+bigID+`}`, "--gateway", mcpURL, "-o", "json")
		Expect(code).To(Equal(0), errOut)
		Expect(out).To(MatchRegexp(`"structuredContent": \{\s*"id": ` + bigID + `\s*\}`))
	})

	It("reaches the tool from outside the cluster through the API server's service proxy, the integer exact", func() {
		Expect(os.Getenv("KUBERNETES_SERVICE_HOST")).To(BeEmpty(), "the suite runs outside a Pod")
		out, errOut, code := run("call", "order_get", "--args", `{"id":`+bigID+`}`)
		Expect(code).To(Equal(0), errOut)
		Expect(out).To(Equal("order " + bigID + "\n"))

		By("a tool served only over MCP, through the service proxy too")
		out, errOut, code = run("call", "mcp_order_get", "--args", `{"id":`+bigID+`}`)
		Expect(code).To(Equal(0), errOut)
		Expect(out).To(Equal("order " + bigID + "\n"))

	})

	It("lists a schema's integer past 2^53 exact with -o json and jsonpath", func() {
		out, errOut, code := run("tools", "-n", "orders", "-o", `jsonpath={.items[?(@.metadata.name=="order_max")].spec.inputSchema.properties.id.maximum}`)
		Expect(code).To(Equal(0), errOut)
		Expect(out).To(Equal(bigID))
		out, _, _ = run("tools", "-n", "orders", "-o", "json")
		Expect(out).To(ContainSubstring(`"maximum": ` + bigID))
	})

	It("reads the arguments from a file, or from stdin with -f -", func() {
		file := filepath.Join(GinkgoT().TempDir(), "args.json")
		Expect(os.WriteFile(file, []byte(`{"id": `+bigID+`}`), 0o600)).To(Succeed())
		out, errOut, code := run("call", "order_get", "-f", file, "--gateway", mcpURL)
		Expect(code).To(Equal(0), errOut)
		Expect(out).To(Equal("order " + bigID + "\n"))

		out, errOut, code = runIn(strings.NewReader(`{"id": 42}`), "call", "order_get", "-f", "-")
		Expect(code).To(Equal(0), errOut)
		Expect(out).To(Equal("order 42\n"))

		_, errOut, code = runIn(strings.NewReader(`[42]`), "call", "order_get", "-f", "-", "--gateway", mcpURL)
		Expect(code).To(Equal(1))
		Expect(errOut).To(Equal("error: the arguments (stdin) must be a JSON object\n"))

		_, errOut, code = run("call", "order_get", "-f", file, "--args", "{}")
		Expect(code).To(Equal(1))
		Expect(errOut).To(ContainSubstring("none of the others can be"))
	})

	It("prints every content block, through the gateway, the invoke endpoint and a tool's MCP endpoint alike, and saves them with --output-dir", func() {
		want := "The orders of the week:\n" +
			"[image image/png, 18 bytes]\n" +
			"[resource file:///orders.csv, text/csv, 6 bytes]\n"
		out, errOut, code := run("call", "order_chart", "--gateway", mcpURL)
		Expect(code).To(Equal(0), errOut)
		Expect(out).To(Equal(want))
		out, errOut, code = run("call", "order_chart")
		Expect(code).To(Equal(0), errOut)
		Expect(out).To(Equal(want))
		out, errOut, code = run("call", "mcp_order_chart")
		Expect(code).To(Equal(0), errOut)
		Expect(out).To(Equal(want))

		dir := filepath.Join(GinkgoT().TempDir(), "out")
		out, errOut, code = run("call", "order_chart", "--gateway", mcpURL, "--output-dir", dir)
		Expect(code).To(Equal(0), errOut)
		Expect(out).To(ContainSubstring("[image image/png, 18 bytes, saved to " + filepath.Join(dir, "content-1.png") + "]\n"))
		Expect(os.ReadFile(filepath.Join(dir, "content-1.png"))).To(Equal(png))
		Expect(os.ReadFile(filepath.Join(dir, "content-2.csv"))).To(Equal([]byte("id\n42\n")))
	})

	It("prints the whole result with -o json or -o yaml, and refuses another format", func() {
		out, errOut, code := run("call", "order_chart", "--gateway", mcpURL, "-o", "yaml")
		Expect(code).To(Equal(0), errOut)
		var res spec.CallResult
		Expect(yaml.Unmarshal([]byte(out), &res)).To(Succeed())
		Expect(res.Content).To(HaveLen(3))
		Expect(res.Content[1].Data).To(Equal(png))
		Expect(res.Content[2].Resource.URI).To(Equal("file:///orders.csv"))

		_, errOut, code = run("call", "order_chart", "--gateway", mcpURL, "-o", "wide")
		Expect(code).To(Equal(1))
		Expect(errOut).To(Equal("error: unknown output format \"wide\": want json or yaml\n"))
	})

	It("says why a call failed as kubectl does, without the libraries' chain", func() {
		_, errOut, code := run("call", "order_get", "--gateway", "http://127.0.0.1:1/mcp")
		Expect(code).To(Equal(1))
		Expect(errOut).To(MatchRegexp(`^error: calling order_get at http://127\.0\.0\.1:1/mcp: dial tcp 127\.0\.0\.1:1: connect: connection refused\n$`))

		_, errOut, code = run("call", "order_get", "--gateway", "http://agent:s3cret@127.0.0.1:1/mcp")
		Expect(code).To(Equal(1))
		Expect(errOut).NotTo(ContainSubstring("s3cret"))
		Expect(errOut).To(HavePrefix("error: calling order_get at http://agent:xxxxx@127.0.0.1:1/mcp: "))

		_, errOut, code = run("call", "order_nobody")
		Expect(code).To(Equal(1))
		Expect(errOut).To(Equal("error: tool \"order_nobody\" not found in the tool table\n"))

		By("an API server that is not there is named as kubectl names it, without client-go's chain")
		_, errOut, code = run("tools", "--server", "https://127.0.0.1:1")
		Expect(code).To(Equal(1))
		Expect(errOut).To(Equal("error: the connection to the server 127.0.0.1:1 was refused - did you specify the right host or port?\n"))
	})
})
