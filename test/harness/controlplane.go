package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/toolplane/toolplane/api/v1alpha1"
)

// ControlPlane is a running kube-apiserver and etcd with the CRDs installed,
// and an admin kubeconfig on disk for the manager binary.
type ControlPlane struct {
	// Config reaches the API server as an admin.
	Config *rest.Config
	// Client is an uncached client with the ToolSet types registered.
	Client client.Client
	// Scheme knows the core and ToolSet types.
	Scheme *runtime.Scheme
	// Kubeconfig is the path of an admin kubeconfig.
	Kubeconfig string

	env *envtest.Environment
}

// StartControlPlane starts envtest from KUBEBUILDER_ASSETS with the CRDs of
// crdDir, and writes an admin kubeconfig into workDir.
func StartControlPlane(crdDir, workDir string) (*ControlPlane, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, errors.New("KUBEBUILDER_ASSETS is not set: run `make envtest` and point it at bin/k8s/<version>")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{crdDir},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting the control plane: %w", err)
	}
	cp := &ControlPlane{env: env}
	if err := cp.init(cfg, workDir); err != nil {
		return nil, errors.Join(err, env.Stop())
	}
	return cp, nil
}

func (cp *ControlPlane) init(cfg *rest.Config, workDir string) error {
	user, err := cp.env.AddUser(envtest.User{Name: "toolplane-harness", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		return fmt.Errorf("adding the admin user: %w", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return err
	}
	cp.Kubeconfig = filepath.Join(workDir, "kubeconfig")
	if err := os.WriteFile(cp.Kubeconfig, kubeconfig, 0o600); err != nil {
		return err
	}
	cp.Config = user.Config()
	cp.Scheme = runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(cp.Scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(cp.Scheme); err != nil {
		return err
	}
	cp.Client, err = client.New(cp.Config, client.Options{Scheme: cp.Scheme})
	return err
}

// Stop stops the API server and etcd.
func (cp *ControlPlane) Stop() error { return cp.env.Stop() }

// CreateNamespace creates a namespace; one that exists already is fine.
func (cp *ControlPlane) CreateNamespace(ctx context.Context, name string) error {
	err := cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// writeVerbs are the verbs of apiserver_request_total that change state.
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "APPLY": true, "DELETE": true, "DELETECOLLECTION": true}

// bodyVerbs are the verbs of apiserver_request_body_size_bytes that change
// state; that metric names them as the API server's handlers do.
var bodyVerbs = map[string]bool{"create": true, "update": true, "patch": true, "apply": true, "delete": true, "deletecollection": true}

// Writes returns the API server's count of writes so far, by resource
// ("toolsets", "configmaps", "events", ...), read from its own
// apiserver_request_total. Subtract two readings to count the writes of a
// window. Leases are left out: a leader renews its lease every few seconds
// whatever else it does.
func (cp *ControlPlane) Writes(ctx context.Context) (map[string]float64, error) {
	fams, err := cp.Metrics(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	fam := fams["apiserver_request_total"]
	if fam == nil {
		return nil, errors.New("the API server exposes no apiserver_request_total")
	}
	for _, m := range fam.GetMetric() {
		l := labels(m)
		if !writeVerbs[l["verb"]] || l["resource"] == "leases" {
			continue
		}
		out[l["resource"]] += m.GetCounter().GetValue()
	}
	return out, nil
}

// WriteBytes returns the API server's count of request body bytes of writes
// so far, by resource, read from its own apiserver_request_body_size_bytes:
// what clients sent, in their encoding (JSON or protobuf, whole objects for
// creates and updates, the patch for a patch). Leases are left out, as in
// [ControlPlane.Writes].
func (cp *ControlPlane) WriteBytes(ctx context.Context) (map[string]float64, error) {
	fams, err := cp.Metrics(ctx)
	if err != nil {
		return nil, err
	}
	fam := fams["apiserver_request_body_size_bytes"]
	if fam == nil {
		return nil, errors.New("the API server exposes no apiserver_request_body_size_bytes")
	}
	out := map[string]float64{}
	for _, m := range fam.GetMetric() {
		l := labels(m)
		if !bodyVerbs[l["verb"]] || l["resource"] == "leases" {
			continue
		}
		out[l["resource"]] += m.GetHistogram().GetSampleSum()
	}
	return out, nil
}

// Metrics reads the API server's own metrics.
func (cp *ControlPlane) Metrics(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return nil, err
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	return ParseMetrics(string(raw))
}

// ParseMetrics parses the Prometheus text exposition format.
func ParseMetrics(text string) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("parsing metrics: %w", err)
	}
	return fams, nil
}

func labels(m *dto.Metric) map[string]string {
	out := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// Sum adds up the counters of a family whose labels include match.
func Sum(fams map[string]*dto.MetricFamily, name string, match map[string]string) float64 {
	var n float64
	fam := fams[name]
	if fam == nil {
		return 0
	}
	for _, m := range fam.GetMetric() {
		l := labels(m)
		ok := true
		for k, v := range match {
			if l[k] != v {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		switch {
		case m.Counter != nil:
			n += m.GetCounter().GetValue()
		case m.Gauge != nil:
			n += m.GetGauge().GetValue()
		case m.Untyped != nil:
			n += m.GetUntyped().GetValue()
		}
	}
	return n
}
