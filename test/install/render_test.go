package install

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// chartDir is the chart under test, relative to the repository root.
const chartDir = "charts/toolplane"

// fieldManager names the test's server-side applies.
const fieldManager = "toolplane-install-test"

// manifests are the objects of one rendering, in order.
type manifests []*unstructured.Unstructured

// decodeManifests reads a multi-document YAML stream as kubectl does: empty
// documents are skipped, and a document without apiVersion or kind is an
// error.
func decodeManifests(data []byte) (manifests, error) {
	var out manifests
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, err
		}
		if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			return nil, fmt.Errorf("decoding %.80q: %w", doc, err)
		}
		out = append(out, u)
	}
}

// helm runs the helm binary on the chart directory's repository, isolated
// from the user's helm configuration, and returns its combined output.
func helm(args ...string) (string, error) {
	home := filepath.Join(scratchDir, "home")
	// Without a cluster, helm template and lint assume Kubernetes 1.20,
	// which the chart's kubeVersion refuses; tell them the real one.
	if len(args) > 0 && (args[0] == "template" || args[0] == "lint") && !slices.Contains(args, "--kube-version") {
		args = append(slices.Clone(args), "--kube-version", serverVersion)
	}
	cmd := exec.Command(helmBin, args...)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
		// helm template never needs a cluster; make sure it cannot reach one.
		"KUBECONFIG="+filepath.Join(home, "no-kubeconfig"),
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// helmTemplate renders the chart for release into namespace, with extra
// helm template arguments such as -f or --set.
func helmTemplate(release, namespace string, args ...string) manifests {
	GinkgoHelper()
	out, err := helm(append([]string{"template", release, chartDir, "--namespace", namespace}, args...)...)
	Expect(err).NotTo(HaveOccurred(), "helm template:\n%s", out)
	m, err := decodeManifests([]byte(out))
	Expect(err).NotTo(HaveOccurred())
	return m
}

// kustomizeBuild renders a kustomization, like `kubectl kustomize dir`.
func kustomizeBuild(dir string) manifests {
	GinkgoHelper()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(repoRoot, dir))
	Expect(err).NotTo(HaveOccurred(), "kustomize build %s", dir)
	data, err := res.AsYaml()
	Expect(err).NotTo(HaveOccurred())
	m, err := decodeManifests(data)
	Expect(err).NotTo(HaveOccurred())
	return m
}

// readManifestDir reads every manifest in dir as `kubectl apply -f dir`
// does: the .yaml, .yml and .json files, in name order.
func readManifestDir(dir string) manifests {
	GinkgoHelper()
	entries, err := os.ReadDir(filepath.Join(repoRoot, dir))
	Expect(err).NotTo(HaveOccurred())
	var out manifests
	for _, e := range entries {
		if e.IsDir() || !slices.Contains([]string{".yaml", ".yml", ".json"}, filepath.Ext(e.Name())) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(repoRoot, dir, e.Name()))
		Expect(err).NotTo(HaveOccurred())
		m, err := decodeManifests(data)
		Expect(err).NotTo(HaveOccurred(), "%s/%s is not a list of Kubernetes objects", dir, e.Name())
		out = append(out, m...)
	}
	return out
}

// readManifestFile reads the objects of one file, relative to the
// repository root.
func readManifestFile(path string) manifests {
	GinkgoHelper()
	data, err := os.ReadFile(filepath.Join(repoRoot, path))
	Expect(err).NotTo(HaveOccurred())
	m, err := decodeManifests(data)
	Expect(err).NotTo(HaveOccurred())
	return m
}

// ofKind returns the objects of one kind.
func (m manifests) ofKind(kind string) manifests {
	var out manifests
	for _, u := range m {
		if u.GetKind() == kind {
			out = append(out, u)
		}
	}
	return out
}

// named returns the one object of kind and name, failing if there is none.
// manager leaves out the gateway's objects (component gateway).
func (m manifests) manager() manifests {
	var out manifests
	for _, u := range m {
		if u.GetLabels()["app.kubernetes.io/component"] != "gateway" {
			out = append(out, u)
		}
	}
	return out
}

// gateway keeps only the gateway's objects.
func (m manifests) gateway() manifests {
	var out manifests
	for _, u := range m {
		if u.GetLabels()["app.kubernetes.io/component"] == "gateway" {
			out = append(out, u)
		}
	}
	return out
}

// withoutTaskKey leaves out the gateway's task key Secret, which every
// rendering with the gateway has, for the specs about the other Secrets.
func (m manifests) withoutTaskKey() manifests {
	var out manifests
	for _, u := range m {
		if u.GetKind() != "Secret" || !strings.HasSuffix(u.GetName(), "-task-key") {
			out = append(out, u)
		}
	}
	return out
}

func (m manifests) named(kind, name string) *unstructured.Unstructured {
	GinkgoHelper()
	for _, u := range m.ofKind(kind) {
		if u.GetName() == name {
			return u
		}
	}
	Fail(fmt.Sprintf("no %s %q among the rendered objects", kind, name))
	return nil
}

// namespaces lists the namespaces the objects are in, and the Namespaces
// among them.
func (m manifests) namespaces() []string {
	var out []string
	for _, u := range m {
		ns := u.GetNamespace()
		if u.GetKind() == "Namespace" {
			ns = u.GetName()
		}
		if ns != "" && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out
}

// fromUnstructured converts a rendered object into its typed form.
func fromUnstructured[T any](u *unstructured.Unstructured) *T {
	GinkgoHelper()
	obj := new(T)
	Expect(runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, obj, true)).
		To(Succeed(), "%s %s", u.GetKind(), u.GetName())
	return obj
}

// ensureNamespaces creates namespaces for real: a dry-run of an object in a
// namespace that does not exist fails, as it would in a cluster.
func ensureNamespaces(ctx context.Context, names ...string) {
	GinkgoHelper()
	for _, name := range names {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
	}
}

// apply server-side applies every object, as `kubectl apply --server-side
// --force-conflicts` does, with strict field validation, so that an unknown
// or duplicate field is an error. Namespaced objects without a namespace
// go into defaultNamespace; if that is empty, such an object is an error,
// because `helm template | kubectl apply` would put it wherever the user's
// context points. It returns every object's error, not just the first.
func apply(ctx context.Context, m manifests, defaultNamespace string, dryRun bool) error {
	opts := metav1.PatchOptions{
		FieldManager:    fieldManager,
		Force:           ptr.To(true),
		FieldValidation: metav1.FieldValidationStrict,
	}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	var errs []error
	for _, u := range m {
		ref := fmt.Sprintf("%s %s", u.GetKind(), u.GetName())
		gvk := u.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ref, err))
			continue
		}
		var ri = dyn.Resource(mapping.Resource)
		data, err := u.MarshalJSON()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ref, err))
			continue
		}
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := u.GetNamespace()
			if ns == "" {
				ns = defaultNamespace
			}
			if ns == "" {
				errs = append(errs, fmt.Errorf("%s: a namespaced object without a namespace", ref))
				continue
			}
			_, err = ri.Namespace(ns).Patch(ctx, u.GetName(), types.ApplyPatchType, data, opts)
		} else {
			_, err = ri.Patch(ctx, u.GetName(), types.ApplyPatchType, data, opts)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ref, err))
		}
	}
	return errors.Join(errs...)
}

// dryRun applies the objects with a server-side dry-run, after creating
// their namespaces.
func dryRun(ctx context.Context, m manifests, defaultNamespace string) error {
	GinkgoHelper()
	ensureNamespaces(ctx, m.namespaces()...)
	return apply(ctx, m, defaultNamespace, true)
}
