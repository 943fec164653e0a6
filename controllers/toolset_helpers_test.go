package controllers

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/server"
	"github.com/toolplane/toolplane/toolkit/spec"
)

const testMaxResponseBytes = 64 << 10

// toolSeries returns the toolplane_toolset_tools series of one ToolSet, by
// state, as the metrics endpoint would serve them.
func toolSeries(g Gomega, namespace, name string) map[string]float64 {
	ch := make(chan prometheus.Metric)
	go func() {
		toolSetTools.Collect(ch)
		close(ch)
	}()
	out := map[string]float64{}
	for m := range ch {
		var pb dto.Metric
		g.Expect(m.Write(&pb)).To(Succeed())
		labels := map[string]string{}
		for _, l := range pb.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["namespace"] == namespace && labels["name"] == name {
			out[labels["state"]] = pb.GetGauge().GetValue()
		}
	}
	return out
}

// tableEntries returns the entries of the published tool table that a
// ToolSet owns, as the API server stores the table now.
func tableEntries(ctx context.Context, g Gomega, key types.NamespacedName) []spec.TableTool {
	t, _, err := storedTable(ctx, tableNamespace)
	g.Expect(err).NotTo(HaveOccurred())
	var out []spec.TableTool
	for _, tt := range t.Tools {
		if tt.ToolSet == (spec.ObjectReference{Namespace: key.Namespace, Name: key.Name}) {
			out = append(out, tt)
		}
	}
	return out
}

// workload is a workload on loopback: by default a real toolkit server
// (ETag, If-None-Match and 304 included), or one that serves a hand-written
// document, for tools that toolkit refuses to serve, or any handler a spec
// sets, for a broken workload. It counts what the operator asks of it.
type workload struct {
	srv *httptest.Server
	reg *toolkit.Registry
	// toolkit serves reg; nil for a hand-written document.
	toolkit http.Handler

	mu      sync.Mutex
	doc     spec.Document
	handler http.HandlerFunc // replaces the spec endpoint when set
	token   string           // required as a bearer token when set
	auth    []string
	// times are when each request came.
	times []time.Time

	hits        atomic.Int64
	notModified atomic.Int64
	inflight    atomic.Int64
}

// newWorkload starts a toolkit server of dynamic tools with the names,
// descriptions and input schemas of tools.
func newWorkload(tools ...spec.Tool) *workload {
	GinkgoHelper()
	w := &workload{reg: new(toolkit.Registry)}
	h := server.New(w.reg, &server.Options{Name: "test-tools"})
	DeferCleanup(h.Close)
	w.toolkit = h
	w.setTools(tools...)
	return w.start()
}

// newHandWrittenWorkload serves a document of tools as given, valid or not.
func newHandWrittenWorkload(tools ...spec.Tool) *workload {
	GinkgoHelper()
	w := &workload{}
	w.setTools(tools...)
	return w.start()
}

func (w *workload) start() *workload {
	w.srv = httptest.NewServer(http.HandlerFunc(w.serve))
	DeferCleanup(w.srv.Close)
	return w
}

// newTLSWorkload is newWorkload over https, with httptest's certificate.
func newTLSWorkload(tools ...spec.Tool) *workload {
	GinkgoHelper()
	w := &workload{reg: new(toolkit.Registry)}
	h := server.New(w.reg, &server.Options{Name: "test-tools"})
	DeferCleanup(h.Close)
	w.toolkit = h
	w.setTools(tools...)
	w.srv = httptest.NewTLSServer(http.HandlerFunc(w.serve))
	DeferCleanup(w.srv.Close)
	return w
}

func (w *workload) serve(rw http.ResponseWriter, r *http.Request) {
	w.inflight.Add(1)
	defer w.inflight.Add(-1)
	w.hits.Add(1)
	w.mu.Lock()
	w.auth = append(w.auth, r.Header.Get("Authorization"))
	w.times = append(w.times, time.Now())
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
	if w.toolkit != nil {
		sw := &statusWriter{ResponseWriter: rw}
		w.toolkit.ServeHTTP(sw, r)
		if sw.status == http.StatusNotModified {
			w.notModified.Add(1)
		}
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

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// setTools replaces the tools the workload serves.
func (w *workload) setTools(tools ...spec.Tool) {
	GinkgoHelper()
	tools = slices.Clone(tools)
	spec.SortTools(tools)
	if w.reg != nil {
		var old []string
		for _, t := range w.reg.Tools() {
			old = append(old, t.Name())
		}
		w.reg.Remove(old...)
		for _, t := range tools {
			Expect(w.reg.Add(toolkit.MustNewDynamic(t.Name, t.Description, t.InputSchema,
				func(context.Context, map[string]any) (any, error) { return "ok", nil }))).To(Succeed())
		}
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.doc = spec.Document{SchemaVersion: spec.SchemaVersion, Revision: spec.Revision(tools), Server: spec.Server{Name: "test"}, Tools: tools}
}

// hitTimes returns when each request came, in order.
func (w *workload) hitTimes() []time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.times)
}

// revision is the revision of the document the workload serves now.
func (w *workload) revision() string {
	if w.reg != nil {
		return spec.Revision(w.reg.Specs())
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.doc.Revision
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
