package controllers

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/test/specreport"
)

// The suite runs against a real kube-apiserver and etcd, built by
// `make envtest` and found through KUBEBUILDER_ASSETS, with the manager
// running the ToolSet reconciler.
// tableNamespace is where the suite's manager publishes the tool table.
const tableNamespace = "toolplane-system"

// testScrapesPerNamespace is the suite's bound on one namespace's scrapes in
// flight: half of its manager-wide bound of 8.
const testScrapesPerNamespace = 4

// testCeilings are the suite manager's admin ceilings.
var testCeilings = Ceilings{MaxTimeout: 30 * time.Second, MaxToolsPerToolSet: testMaxToolsPerToolSet}

// testMaxToolsPerToolSet is the suite's ceiling of tools per ToolSet; no
// spec but the one on budgets comes near it.
const testMaxToolsPerToolSet = 40

var (
	cfg       *rest.Config
	k8sClient client.Client
	testEnv   *envtest.Environment
	scheme    = runtime.NewScheme()
	publisher *TablePublisher
	// toolSetReconciler is the manager's ToolSet reconciler.
	toolSetReconciler *ToolSetReconciler
	// managerLog holds everything the manager logged, at every verbosity,
	// so that specs can assert what never appears in it.
	managerLog  = &syncBuffer{}
	stopManager context.CancelFunc
	// statusPatches records the manager's status patches of ToolSets.
	statusPatches = &patchRecorder{}
)

// patchRecorder records the PATCH requests to a ToolSet's status that pass
// through it: what each sent, and each answer.
type patchRecorder struct {
	mu   sync.Mutex
	seen []recordedPatch
}

type recordedPatch struct {
	path        string // the request's URL path
	body        []byte
	contentType string // of the answer
	answer      []byte
}

func (p *patchRecorder) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodPatch || !strings.Contains(req.URL.Path, "/toolsets/") || !strings.HasSuffix(req.URL.Path, "/status") {
			return rt.RoundTrip(req)
		}
		var body []byte
		if req.Body != nil {
			var err error
			if body, err = io.ReadAll(req.Body); err != nil {
				return nil, err
			}
			req = req.Clone(req.Context())
			req.Body = io.NopCloser(bytes.NewReader(body))
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return resp, err
		}
		answer, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return nil, err
		}
		resp.Body = io.NopCloser(bytes.NewReader(answer))
		p.mu.Lock()
		p.seen = append(p.seen, recordedPatch{path: req.URL.Path, body: body, contentType: resp.Header.Get("Content-Type"), answer: answer})
		p.mu.Unlock()
		return resp, nil
	})
}

// of returns the patches recorded of ts's status.
func (p *patchRecorder) of(ts *v1alpha1.ToolSet) []recordedPatch {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []recordedPatch
	for _, r := range p.seen {
		if strings.HasSuffix(r.path, "/namespaces/"+ts.Namespace+"/toolsets/"+ts.Name+"/status") {
			out = append(out, r)
		}
	}
	return out
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	specreport.RunSpecs(t, "Controllers Suite")
}

var _ = BeforeSuite(func() {
	// Scrapes run every 5s at the least (the API's minimum interval), so
	// waits on a later scrape need room.
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	logf.SetLogger(zap.New(zap.WriteTo(io.MultiWriter(GinkgoWriter, managerLog)), zap.UseDevMode(true)))
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(v1alpha1.AddToScheme(scheme)).To(Succeed())

	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	var err error
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred(), "starting the control plane; run `make envtest` and set KUBEBUILDER_ASSETS")
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	ctx := context.Background()
	Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tableNamespace}})).To(Succeed())
	// The manager's requests go through statusPatches, which records its
	// status patches of ToolSets.
	mgrConfig := rest.CopyConfig(cfg)
	mgrConfig.Wrap(statusPatches.wrap)
	mgr, err := ctrl.NewManager(mgrConfig, ctrl.Options{
		Scheme:  scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {Namespaces: map[string]cache.Config{tableNamespace: {}}},
			&corev1.Pod{}:       {Transform: TrimPodForCache},
		}},
	})
	Expect(err).NotTo(HaveOccurred())
	// The operator's own publisher, writing the table that the reconciler's
	// specs read back.
	publisher = &TablePublisher{
		Namespace: tableNamespace,
		Name:      "toolplane-tools",
		Debounce:  10 * time.Millisecond,
		MaxDelay:  100 * time.Millisecond,
		// As the manager does: no hand-over before the policies are known.
		WaitForPolicies: true,
	}
	Expect(publisher.SetupWithManager(mgr)).To(Succeed())
	Expect((&ToolNamePolicyReconciler{Publisher: publisher}).SetupWithManager(mgr)).To(Succeed())
	toolSetReconciler = &ToolSetReconciler{
		Publisher:                        publisher,
		MaxConcurrentScrapes:             8,
		MaxConcurrentScrapesPerNamespace: testScrapesPerNamespace,
		MaxResponseBytes:                 testMaxResponseBytes,
		Ceilings:                         testCeilings,
	}
	Expect(toolSetReconciler.SetupWithManager(mgr)).To(Succeed())

	ctx, cancel := context.WithCancel(ctx)
	stopManager = cancel
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
})

var _ = AfterSuite(func() {
	if stopManager != nil {
		stopManager()
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// newNamespace creates a namespace of its own for one spec.
func newNamespace(ctx context.Context) string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "spec-"}}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	// envtest runs no namespace controller, so a spec's ToolSets would
	// outlive it, and their workloads, which the spec stops: they would go
	// on changing the shared table (held, then dropped) while later specs
	// watch it for writes.
	DeferCleanup(func(ctx context.Context) {
		Expect(client.IgnoreNotFound(k8sClient.DeleteAllOf(ctx, &v1alpha1.ToolSet{}, client.InNamespace(ns.Name)))).To(Succeed())
	})
	return ns.Name
}

// syncBuffer is a bytes.Buffer safe for the manager's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
