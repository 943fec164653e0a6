package install

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/toolplane/toolplane/test/harness"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// commands caches the binaries built from cmd/, by name.
var commands sync.Map

// buildCommand builds ./cmd/<name> once per suite and returns its path.
func buildCommand(ctx context.Context, name string) string {
	GinkgoHelper()
	if path, ok := commands.Load(name); ok {
		return path.(string)
	}
	path := filepath.Join(scratchDir, "bin", name)
	build := exec.CommandContext(ctx, "go", "build", "-o", path, "./cmd/"+name)
	build.Dir = repoRoot
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "go build ./cmd/%s:\n%s", name, out)
	commands.Store(name, path)
	return path
}

// start runs a binary until the spec ends, then stops it with SIGTERM, as
// the kubelet would, and waits for it. Its output goes to the spec's log,
// and each line of its standard error also to lines, if not nil.
func start(path string, args []string, lines chan<- string) {
	GinkgoHelper()
	cmd := exec.Command(path, args...)
	cmd.Stdout = GinkgoWriter
	stderr, err := cmd.StderrPipe()
	Expect(err).NotTo(HaveOccurred())
	Expect(cmd.Start()).To(Succeed())
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			fmt.Fprintf(GinkgoWriter, "%s: %s\n", filepath.Base(path), sc.Text())
			if lines != nil {
				select {
				case lines <- sc.Text():
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	DeferCleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(eventuallyTimeout):
			_ = cmd.Process.Kill()
		}
		_ = cmd.Wait()
	})
}

// The envtest API server has no kubelet, so the operator runs as a process
// with the chart's arguments, authenticated as the chart's ServiceAccount
// and so held to the chart's RBAC, and the sample workload runs as a
// process whose Pod is created by hand with the loopback address.
var _ = Describe("An install from the chart", Ordered, func() {
	const release, operatorNS = "e2e", "e2e-system"
	var (
		m         manifests
		samplesNS string
	)

	BeforeAll(func(ctx context.Context) {
		m = helmTemplate(release, operatorNS)
		var objects manifests
		for _, kind := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
			objects = append(objects, m.ofKind(kind)...)
		}
		ensureNamespaces(ctx, operatorNS)
		Expect(apply(ctx, objects, "", false)).To(Succeed())

		ns, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-samples-"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		samplesNS = ns.Name
	})

	It("publishes the samples' tools with nothing but the chart's RBAC", func(ctx context.Context) {
		By("running example-tools as the sample Deployment does")
		samples := readManifestDir("config/samples")
		d := fromUnstructured[appsv1.Deployment](samples.named("Deployment", "example-tools"))
		container := d.Spec.Template.Spec.Containers[0]
		lines := make(chan string, 64)
		// The kubelet expands $(POD_NAMESPACE) from the downward API.
		args := make([]string, len(container.Args))
		for i, a := range container.Args {
			args[i] = strings.ReplaceAll(a, "$(POD_NAMESPACE)", samplesNS)
		}
		// The last --addr wins: the sample's own port may be taken here.
		start(buildCommand(ctx, filepath.Base(container.Command[0])), append(args, "--addr=127.0.0.1:0"), lines)
		var port int
		Eventually(lines).WithTimeout(eventuallyTimeout).Should(Receive(Satisfy(func(line string) bool {
			var entry struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &entry) != nil || entry.Msg != "Serving tools" {
				return false
			}
			_, p, err := net.SplitHostPort(entry.Addr)
			if err != nil {
				return false
			}
			_, err = fmt.Sscan(p, &port)
			return err == nil
		})))

		By("checking its readiness probe answers")
		probe := container.ReadinessProbe.HTTPGet
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, probe.Path))
		Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusOK))

		By("creating a ready Pod from the sample's template, the ToolSet and the Service")
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: samplesNS, Name: "example-tools-0", Labels: d.Spec.Template.Labels},
			Spec:       *d.Spec.Template.Spec.DeepCopy(),
		}
		for i := range pod.Spec.Containers[0].Ports {
			if pod.Spec.Containers[0].Ports[i].Name == "http" {
				pod.Spec.Containers[0].Ports[i].ContainerPort = int32(port)
			}
		}
		pod, err = kube.CoreV1().Pods(samplesNS).Create(ctx, pod, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		pod.Status = corev1.PodStatus{
			Phase:      corev1.PodRunning,
			PodIP:      "127.0.0.1",
			PodIPs:     []corev1.PodIP{{IP: "127.0.0.1"}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}},
		}
		_, err = kube.CoreV1().Pods(samplesNS).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(apply(ctx, append(samples.ofKind("ToolSet"), samples.ofKind("Service")...), samplesNS, false)).To(Succeed())

		By("running the manager with the chart's arguments, as the chart's ServiceAccount")
		manager := runChartManager(ctx, m)
		resp, err = http.Get("http://" + manager.ProbeAddr + "/healthz")
		Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusOK))

		By("reading the tool table, as the README says")
		table := &spec.Table{}
		Eventually(func(g Gomega, ctx context.Context) {
			cm, err := kube.CoreV1().ConfigMaps(operatorNS).Get(ctx, "toolplane-tools", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(json.Unmarshal([]byte(cm.Data[spec.TableKey]), table)).To(Succeed())
			g.Expect(table.Tools).To(HaveLen(11))
		}).WithContext(ctx).WithTimeout(2 * eventuallyTimeout).Should(Succeed())
		var names []string
		for _, t := range table.Tools {
			names = append(names, t.Name)
			Expect(t.ToolSet.Namespace).To(Equal(samplesNS))
			Expect(t.ToolSet.Name).To(Equal("example-tools"))
			Expect(t.Endpoints).NotTo(BeNil())
			Expect(t.Endpoints.Invoke).To(Equal(fmt.Sprintf("http://example-tools.%s.svc.cluster.local:8080/tools/%s", samplesNS, t.SourceName)))
		}
		// The README and the sample's comments list these.
		Expect(names).To(ConsistOf("typed_echo", "query_customer", "get_weather", "evaluate_transaction_risk",
			"search_orders", "create_ticket", "delete_ticket", "add", "system_insight", "build_report", "whoami"))

		By("serving the table through the gateway, run with the chart's arguments as the chart's gateway ServiceAccount")
		gw := runChartGateway(ctx, m)
		Eventually(func(ctx context.Context) []string {
			var got []string
			for _, t := range gatewayTable(ctx, gw).Tools {
				got = append(got, t.Name)
			}
			return got
		}).WithContext(ctx).WithTimeout(eventuallyTimeout).Should(ConsistOf(names))

		By("holding leadership through a Lease in the table namespace")
		leases, err := kube.CoordinationV1().Leases(operatorNS).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(leases.Items).To(ContainElement(HaveField("ObjectMeta.Name", "toolplane-manager.toolplane.io")))
	})
})

// runChartManager runs the manager binary as a rendering's Deployment would:
// with its arguments, authenticated as its ServiceAccount and so held to its
// RBAC (which the caller has applied). Only the metrics and probe addresses
// are the harness's free loopback ones, since the chart's ports may be taken
// on this machine. The manager stops when the spec ends.
func runChartManager(ctx context.Context, m manifests) *harness.Manager {
	GinkgoHelper()
	sa := m.ofKind("ServiceAccount").manager()[0]
	user, err := testEnv.AddUser(envtest.User{
		Name:   fmt.Sprintf("system:serviceaccount:%s:%s", sa.GetNamespace(), sa.GetName()),
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + sa.GetNamespace()},
	}, nil)
	Expect(err).NotTo(HaveOccurred())
	kubeconfig, err := user.KubeConfig()
	Expect(err).NotTo(HaveOccurred())
	kubeconfigPath := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
	Expect(os.WriteFile(kubeconfigPath, kubeconfig, 0o600)).To(Succeed())
	md := fromUnstructured[appsv1.Deployment](m.ofKind("Deployment").manager()[0])
	args, ok := managerContainer(md)
	Expect(ok).To(BeTrue())
	args = slices.DeleteFunc(slices.Clone(args), func(a string) bool {
		return strings.HasPrefix(a, "--metrics-bind-address=") || strings.HasPrefix(a, "--health-probe-bind-address=")
	})
	tableNamespace := flagValue(args, "--table-namespace")
	Expect(tableNamespace).NotTo(BeEmpty(), "the manager runs with no --table-namespace")
	manager := &harness.Manager{
		Bin:            buildCommand(ctx, "manager"),
		Kubeconfig:     kubeconfigPath,
		TableNamespace: tableNamespace,
		Args:           args,
		LogPath:        filepath.Join(GinkgoT().TempDir(), "manager.log"),
	}
	printLogOnFailure("manager", manager.LogPath)
	// Start returns once /readyz answers.
	Expect(manager.Start(ctx)).To(Succeed())
	DeferCleanup(func() {
		// The kubelet kills the Pod this long after SIGTERM.
		Expect(manager.Stop(time.Duration(*md.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second)).To(Succeed())
	})
	return manager
}

// flagValue is the value of the first --name=value in args, or "".
func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// printLogOnFailure prints the log of a process the spec ran, if the spec
// fails.
func printLogOnFailure(what, path string) {
	DeferCleanup(func() {
		if CurrentSpecReport().Failed() {
			log, _ := os.ReadFile(path)
			fmt.Fprintf(GinkgoWriter, "%s log:\n%s", what, log)
		}
	})
}
