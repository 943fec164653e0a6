package install

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/toolplane/toolplane/test/specreport"
)

// eventuallyTimeout bounds every wait on the API server.
const eventuallyTimeout = 30 * time.Second

// The suite runs against a real kube-apiserver and etcd, built by
// `make envtest` and found through KUBEBUILDER_ASSETS.
var (
	// repoRoot is the repository's root directory, absolute.
	repoRoot string
	// helmBin is the helm binary, from the HELM environment variable.
	helmBin string
	// scratchDir holds helm's cache, configuration and data (away from the
	// user's), and the binaries the suite builds.
	scratchDir string

	testEnv *envtest.Environment
	cfg     *rest.Config
	dyn     dynamic.Interface
	kube    kubernetes.Interface
	mapper  meta.RESTMapper
	// serverVersion is the API server's version, which helm template and
	// helm lint are told (--kube-version), since they cannot ask.
	serverVersion string
)

func TestInstall(t *testing.T) {
	RegisterFailHandler(Fail)
	specreport.RunSpecs(t, "Install Suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))

	var err error
	repoRoot, err = filepath.Abs(filepath.Join("..", ".."))
	Expect(err).NotTo(HaveOccurred())

	helmBin = os.Getenv("HELM")
	Expect(helmBin).NotTo(BeEmpty(),
		"HELM is not set: run `make test`, or `make helm` and then HELM=$PWD/bin/helm go test ./test/install")
	_, err = os.Stat(helmBin)
	Expect(err).NotTo(HaveOccurred(), "HELM=%s does not exist: run `make helm`", helmBin)

	scratchDir, err = os.MkdirTemp("", "toolplane-install-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, scratchDir)

	testEnv = &envtest.Environment{
		CRDDirectoryPaths: []string{
			filepath.Join(repoRoot, "config", "crd", "bases"),
			// The chart's optional ServiceMonitor needs its CRD to be
			// validated at all.
			filepath.Join("testdata", "servicemonitor-crd.yaml"),
			filepath.Join("testdata", "prometheusrule-crd.yaml"),
		},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred(), "starting the control plane; run `make envtest` and set KUBEBUILDER_ASSETS")

	dyn, err = dynamic.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	kube, err = kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	// envtest has installed and established the CRDs by now, so one
	// discovery pass maps every kind the manifests use.
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	v, err := dc.ServerVersion()
	Expect(err).NotTo(HaveOccurred())
	serverVersion = v.GitVersion
	groups, err := restmapper.GetAPIGroupResources(dc)
	Expect(err).NotTo(HaveOccurred())
	mapper = restmapper.NewDiscoveryRESTMapper(groups)
})

var _ = AfterSuite(func() {
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})
