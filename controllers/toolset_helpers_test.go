package controllers

import (
	"cmp"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/toolkit/spec"
)

const testMaxResponseBytes = 64 << 10

// memPublisher is the tests' Publisher: first claimant wins, and a released
// name goes to the earliest-created remaining claimant.
type memPublisher struct {
	mu      sync.Mutex
	offers  map[types.NamespacedName]Offer
	owners  map[string]types.NamespacedName
	changed chan event.TypedGenericEvent[*v1alpha1.ToolSet]
}

func newMemPublisher() *memPublisher {
	return &memPublisher{
		offers:  map[types.NamespacedName]Offer{},
		owners:  map[string]types.NamespacedName{},
		changed: make(chan event.TypedGenericEvent[*v1alpha1.ToolSet], 1024),
	}
}

func (p *memPublisher) Offer(_ context.Context, o Offer) (map[string]types.NamespacedName, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.offers[o.ToolSet] = o
	p.settle(o.ToolSet)
	owners := map[string]types.NamespacedName{}
	for _, t := range o.Tools {
		owners[t.Name] = p.owners[t.Name]
	}
	return owners, nil
}

func (p *memPublisher) Withdraw(_ context.Context, ts types.NamespacedName) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.offers, ts)
	p.settle(ts)
	return nil
}

func (p *memPublisher) Changed() <-chan event.TypedGenericEvent[*v1alpha1.ToolSet] { return p.changed }

// settle drops owners that no longer offer their names, gives every free
// name to its earliest claimant and tells the other claimants whose names
// moved; the caller learns its own from the returned owners.
func (p *memPublisher) settle(caller types.NamespacedName) {
	claimants := map[string][]Offer{}
	for _, o := range p.offers {
		for _, t := range o.Tools {
			claimants[t.Name] = append(claimants[t.Name], o)
		}
	}
	touched := map[types.NamespacedName]bool{}
	for name, owner := range p.owners {
		if !slices.ContainsFunc(claimants[name], func(o Offer) bool { return o.ToolSet == owner }) {
			delete(p.owners, name)
		}
	}
	for name, cs := range claimants {
		if _, owned := p.owners[name]; owned {
			continue
		}
		first := slices.MinFunc(cs, func(a, b Offer) int {
			return cmp.Or(a.Created.Compare(b.Created.Time), strings.Compare(a.ToolSet.String(), b.ToolSet.String()))
		})
		p.owners[name] = first.ToolSet
		for _, c := range cs {
			if c.ToolSet != caller {
				touched[c.ToolSet] = true
			}
		}
	}
	for key := range touched {
		p.changed <- event.TypedGenericEvent[*v1alpha1.ToolSet]{Object: &v1alpha1.ToolSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}
	}
}

// offered returns what a ToolSet offers now.
func (p *memPublisher) offered(ts types.NamespacedName) []spec.TableTool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.offers[ts].Tools
}

// workload is a workload serving a spec document on loopback, as a toolkit
// server does: ETag, If-None-Match and 304 included.
type workload struct {
	srv *httptest.Server

	mu      sync.Mutex
	doc     spec.Document
	handler http.HandlerFunc // replaces the spec endpoint when set
	token   string           // required as a bearer token when set
	auth    []string

	hits        atomic.Int64
	notModified atomic.Int64
	inflight    atomic.Int64
}

func newWorkload(tools ...spec.Tool) *workload {
	GinkgoHelper()
	w := &workload{}
	w.setTools(tools...)
	w.srv = httptest.NewServer(http.HandlerFunc(w.serve))
	DeferCleanup(w.srv.Close)
	return w
}

func (w *workload) serve(rw http.ResponseWriter, r *http.Request) {
	w.inflight.Add(1)
	defer w.inflight.Add(-1)
	w.hits.Add(1)
	w.mu.Lock()
	w.auth = append(w.auth, r.Header.Get("Authorization"))
	doc, h, token := w.doc, w.handler, w.token
	w.mu.Unlock()
	if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
		http.Error(rw, "unauthorized", http.StatusUnauthorized)
		return
	}
	if h != nil {
		h(rw, r)
		return
	}
	if r.URL.Path != spec.DefaultPath {
		http.NotFound(rw, r)
		return
	}
	etag := spec.ETag(doc.Revision)
	rw.Header().Set("ETag", etag)
	if r.Header.Get("If-None-Match") == etag {
		w.notModified.Add(1)
		rw.WriteHeader(http.StatusNotModified)
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(doc)
}

func (w *workload) setTools(tools ...spec.Tool) {
	tools = slices.Clone(tools)
	spec.SortTools(tools)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.doc = spec.Document{SchemaVersion: spec.SchemaVersion, Revision: spec.Revision(tools), Server: spec.Server{Name: "test"}, Tools: tools}
}

func (w *workload) setHandler(h http.HandlerFunc) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.handler = h
}

func (w *workload) requireToken(token string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.token = token
}

func (w *workload) authHeaders() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.auth)
}

func (w *workload) port() int32 {
	_, p, _ := net.SplitHostPort(w.srv.Listener.Addr().String())
	n, _ := strconv.Atoi(p)
	return int32(n)
}

// tool is a valid tool with an object input schema.
func tool(name string) spec.Tool {
	return spec.Tool{
		Name:        name,
		Description: "The " + name + " tool.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`),
	}
}

// createReadyPod creates a Pod that looks Running and Ready at 127.0.0.1,
// with its container port "http" on port: what a kubelet would report.
func createReadyPod(ctx context.Context, ns, name string, labels map[string]string, port int32) *corev1.Pod {
	GinkgoHelper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "tools", Image: "example.invalid/tools",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: port}},
		}}},
	}
	Expect(k8sClient.Create(ctx, pod)).To(Succeed())
	setPodReady(ctx, pod, true)
	return pod
}

func setPodReady(ctx context.Context, pod *corev1.Pod, ready bool) {
	GinkgoHelper()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	pod.Status = corev1.PodStatus{
		Phase:  corev1.PodRunning,
		PodIP:  "127.0.0.1",
		PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}},
		Conditions: []corev1.PodCondition{{
			Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now(),
		}},
	}
	Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())
}
