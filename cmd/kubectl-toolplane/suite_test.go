package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/controllers"
	"github.com/toolplane/toolplane/test/specreport"
	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/server"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// The suite runs the operator (the ToolSet reconciler and the table
// publisher) against a real kube-apiserver and etcd, with workloads on
// loopback, and runs the plugin against what it publishes: in process for
// most specs, and as a real kubectl plugin through kubectl for one.

const tableNamespace = "toolplane-system"

var (
	testEnv    *envtest.Environment
	cfg        *rest.Config
	k8sClient  client.Client
	kubeconfig string
	stopMgr    context.CancelFunc
	// builtPluginDir holds the plugin binary the kubectl specs run.
	builtPluginDir string
)

func TestPlugin(t *testing.T) {
	RegisterFailHandler(Fail)
	specreport.RunSpecs(t, "kubectl-toolplane Suite")
}

var _ = BeforeSuite(func() {
	SetDefaultEventuallyTimeout(60 * time.Second)
	SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))

	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	var err error
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred(), "starting the control plane; run `make envtest` and set KUBEBUILDER_ASSETS")
	// The call specs write EndpointSlices, as the endpoints controller
	// would, for the API server's service proxy; the plugin reads none.
	Expect(discoveryv1.AddToScheme(scheme)).To(Succeed())
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	kubeconfig = filepath.Join(GinkgoT().TempDir(), "kubeconfig")
	Expect(os.WriteFile(kubeconfig, testEnv.KubeConfig, 0o600)).To(Succeed())

	ctx := context.Background()
	Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tableNamespace}})).To(Succeed())
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {Namespaces: map[string]cache.Config{tableNamespace: {}}},
			&corev1.Pod{}:       {Transform: controllers.TrimPodForCache},
		}},
	})
	Expect(err).NotTo(HaveOccurred())
	publisher := &controllers.TablePublisher{Namespace: tableNamespace, Name: "toolplane-tools", Debounce: 10 * time.Millisecond, MaxDelay: 100 * time.Millisecond}
	Expect(publisher.SetupWithManager(mgr)).To(Succeed())
	Expect((&controllers.ToolSetReconciler{Publisher: publisher}).SetupWithManager(mgr)).To(Succeed())
	mctx, cancel := context.WithCancel(ctx)
	stopMgr = cancel
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(mctx)).To(Succeed())
	}()
})

var _ = AfterSuite(func() {
	if builtPluginDir != "" {
		Expect(os.RemoveAll(builtPluginDir)).To(Succeed())
	}
	if stopMgr != nil {
		stopMgr()
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// run runs the plugin in process, as `kubectl toolplane args...`, and
// returns what it printed and its exit code.
func run(args ...string) (stdout, stderr string, code int) {
	GinkgoHelper()
	return runIn(strings.NewReader(""), args...)
}

// runIn is run with stdin.
func runIn(stdin io.Reader, args ...string) (stdout, stderr string, code int) {
	GinkgoHelper()
	var out, errOut bytes.Buffer
	root := newRootCommand(&out, &errOut)
	root.SetIn(stdin)
	root.SetArgs(append([]string{"--kubeconfig", kubeconfig}, args...))
	err := root.ExecuteContext(context.Background())
	if err != nil {
		code = printError(&errOut, err)
	}
	GinkgoWriter.Printf("$ kubectl toolplane %v  (exit %d)\n%s%s", args, code, out.String(), errOut.String())
	return out.String(), errOut.String(), code
}

// docServer serves a spec document as written, valid or not, as a
// workload's spec endpoint.
type docServer struct {
	srv *httptest.Server
	mu  sync.Mutex
	doc spec.Document
}

func newDocServer(tools ...spec.Tool) *docServer {
	GinkgoHelper()
	d := &docServer{}
	d.set(tools...)
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != spec.DefaultPath {
			http.NotFound(w, r)
			return
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(d.doc)
	}))
	DeferCleanup(d.srv.Close)
	return d
}

func (d *docServer) set(tools ...spec.Tool) {
	spec.SortTools(tools)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.doc = spec.Document{SchemaVersion: spec.SchemaVersion, Revision: spec.Revision(tools), Server: spec.Server{Name: "test"}, Tools: tools}
}

// newToolkitServer serves tools with the toolkit, MCP included; each
// answers "ok <name>".
func newToolkitServer(tools ...spec.Tool) *httptest.Server {
	GinkgoHelper()
	reg := new(toolkit.Registry)
	for _, t := range tools {
		name := t.Name
		Expect(reg.Add(toolkit.MustNewDynamic(t.Name, t.Description, t.InputSchema,
			func(_ context.Context, args map[string]any) (any, error) {
				return "ok " + name + " " + string(must(json.Marshal(args))), nil
			}))).To(Succeed())
	}
	h := server.New(reg, &server.Options{Name: "plugin-test"})
	DeferCleanup(h.Close)
	srv := httptest.NewServer(h)
	DeferCleanup(srv.Close)
	return srv
}

func must[T any](v T, err error) T {
	Expect(err).NotTo(HaveOccurred())
	return v
}

func portOf(srv *httptest.Server) int32 {
	_, p, _ := net.SplitHostPort(srv.Listener.Addr().String())
	n, _ := strconv.Atoi(p)
	return int32(n)
}

// serveToolSet creates a namespace if needed, a Ready Pod at 127.0.0.1 on
// the server's port, and a ToolSet named name that selects it.
func serveToolSet(ctx context.Context, ns, name string, srv *httptest.Server) *v1alpha1.ToolSet {
	GinkgoHelper()
	return serveToolSetAt(ctx, ns, name, srv, "127.0.0.1")
}

// serveToolSetAt is serveToolSet with the Pod at podIP, and the ToolSet
// changed by each of edit before it is created.
func serveToolSetAt(ctx context.Context, ns, name string, srv *httptest.Server, podIP string, edit ...func(*v1alpha1.ToolSet)) *v1alpha1.ToolSet {
	GinkgoHelper()
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if err := k8sClient.Create(ctx, nsObj); err != nil {
		Expect(client.IgnoreAlreadyExists(err)).To(Succeed())
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-0", Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "tools", Image: "example.invalid/tools",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: portOf(srv)}},
		}}},
	}
	Expect(k8sClient.Create(ctx, pod)).To(Succeed())
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: podIP, PodIPs: []corev1.PodIP{{IP: podIP}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}},
	}
	Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())
	ts := &v1alpha1.ToolSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.ToolSetSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Port:     intstr.FromString("http"),
			Service:  &v1alpha1.ServiceReference{Name: name, Port: 8080},
			Interval: &metav1.Duration{Duration: 5 * time.Second},
			Timeout:  &metav1.Duration{Duration: 2 * time.Second},
		},
	}
	for _, e := range edit {
		e(ts)
	}
	Expect(k8sClient.Create(ctx, ts)).To(Succeed())
	return ts
}

// buildPlugin builds the plugin binary into dir, as `make build` does.
func buildPlugin(dir string) string {
	GinkgoHelper()
	bin := filepath.Join(dir, "kubectl-toolplane")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Stdout, cmd.Stderr = GinkgoWriter, GinkgoWriter
	Expect(cmd.Run()).To(Succeed())
	return bin
}
