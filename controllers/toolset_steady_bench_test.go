package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/test/harness"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// BenchmarkSteadyRound measures one steady round of one ToolSet, as make
// bench-scale's steady state makes it every interval: the whole Reconcile,
// its Pod's conditional GET answered 304 by a loopback workload
// (harness.Workload, as bench-scale's), the offer of the same tools, the
// status recomputed and found equal to what is stored, no write. The
// objects come from an in-memory reader that answers as the informer
// cache does (a deep copy on Get, NotFound for what it lacks); the work
// queue and the controller around Reconcile are left out. cpu-ns/op is
// the process's CPU per round, the workload's share of it included.
//
//   - no-service: spec.service names a Service that does not exist, as in
//     bench-scale;
//
//   - service: the Service exists.
//
//     go test ./controllers -run '^$' -bench BenchmarkSteadyRound -benchmem -count 6
func BenchmarkSteadyRound(b *testing.B) {
	for _, withService := range []bool{false, true} {
		name := "no-service"
		if withService {
			name = "service"
		}
		b.Run(name, func(b *testing.B) { benchSteadyRound(b, withService) })
	}
}

func benchSteadyRound(b *testing.B, withService bool) {
	const tools = 10
	wl := harness.NewWorkload("bench-0000", harness.Tools("set0000_tool", tools))
	path := "/sets/0000" + spec.DefaultPath
	mux := http.NewServeMux()
	mux.Handle(path, wl)
	srv := httptest.NewServer(mux)
	b.Cleanup(srv.Close)
	_, p, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(p)

	ts := harness.NewToolSet("bench-00", "set-0000", "set-0000", path, 30*time.Second)
	ts.UID, ts.Generation, ts.ResourceVersion = "ts-uid", 1, "1"
	// What the CRD's defaults add.
	ts.Spec.Protocol, ts.Spec.Scheme = v1alpha1.ProtocolToolkit, "http"
	ts.Spec.Timeout = &metav1.Duration{Duration: 5 * time.Second}
	ts.Spec.Limits = v1alpha1.Limits{MaxTools: 256, MaxSchemaBytes: 65536}
	ts.CreationTimestamp = metav1.NewTime(time.Now().Truncate(time.Second))
	now := metav1.NewTime(time.Now())
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ts.Namespace, Name: "set-0000-0", UID: "pod-uid",
			Labels: map[string]string{"app": "set-0000"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "tools", Image: "example.invalid/tools:1",
			Ports: []corev1.ContainerPort{{Name: harness.PortName, ContainerPort: int32(port)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1", PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}},
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			}},
	}
	c := &steadyCache{toolSet: ts, pods: []corev1.Pod{*pod}}
	if withService {
		c.service = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ts.Namespace, Name: ts.Spec.Service.Name},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "set-0000"}}}
	}

	pub := &TablePublisher{}
	pub.init()
	close(pub.loaded)
	r := &ToolSetReconciler{Client: c, APIReader: c, Publisher: pub, Recorder: &events.FakeRecorder{}}
	b.Cleanup(func() {
		if r.stop != nil {
			r.stop()
		}
		forgetTools(client.ObjectKeyFromObject(ts))
	})
	ctx := ctrl.LoggerInto(context.Background(), logr.Discard())
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ts)}
	reconcileOnce := func() {
		if _, err := r.Reconcile(ctx, req); err != nil {
			b.Fatal(err)
		}
	}

	// Converge: the first round scrapes in the background and enqueues the
	// ToolSet when it ends (its reconcile holds no worker), and the
	// reconcile that follows offers the tools; once the table has them (as
	// its write would tell the publisher), a round makes them Published.
	reconcileOnce()
	r.init()
	select {
	case <-r.runs.wake:
	case <-time.After(10 * time.Second):
		b.Fatal("the first round never ended")
	}
	reconcileOnce()
	pub.mu.Lock()
	claim := pub.claims[req.NamespacedName]
	pub.mu.Unlock()
	if claim == nil {
		b.Fatalf("the first round offered nothing: %+v", c.toolSet.Status)
	}
	claimed := claim.tools
	stored := make([]*spec.TableTool, len(claimed))
	for i := range claimed {
		stored[i] = &claimed[i]
	}
	pub.stored(stored)
	for range 3 {
		reconcileOnce()
	}
	if st := c.toolSet.Status; st.PublishedTools != tools {
		b.Fatalf("after converging: %d tools published, want %d: %+v", st.PublishedTools, tools, st)
	}

	scrapes, patches := wl.Scrapes(), c.patches
	b.ReportAllocs()
	done := harness.CPUPerOp(b)
	for b.Loop() {
		reconcileOnce()
	}
	done()
	if c.patches != patches {
		b.Fatalf("%d status writes in steady state, want none", c.patches-patches)
	}
	if got := wl.Scrapes() - scrapes; got != b.N {
		b.Fatalf("%d scrapes in %d rounds", got, b.N)
	}
}

// steadyCache is a client that answers reads as the manager's informer
// cache does, of one ToolSet, its Pods and maybe its Service, and takes
// status patches as written and seen by the cache at once.
type steadyCache struct {
	client.Client
	toolSet *v1alpha1.ToolSet
	pods    []corev1.Pod
	service *corev1.Service
	patches int
}

func (c *steadyCache) Get(_ context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	var o client.GetOptions
	o.ApplyOptions(opts)
	// As the cache does: the object itself, or a deep copy with its kind.
	unsafe := o.UnsafeDisableDeepCopy != nil && *o.UnsafeDisableDeepCopy
	switch o := obj.(type) {
	case *v1alpha1.ToolSet:
		if key == client.ObjectKeyFromObject(c.toolSet) {
			if unsafe {
				*o = *c.toolSet
				return nil
			}
			c.toolSet.DeepCopyInto(o)
			o.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("ToolSet"))
			return nil
		}
		return apierrors.NewNotFound(schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "ToolSet"}, key.Name)
	case *corev1.Service:
		if c.service != nil && key == client.ObjectKeyFromObject(c.service) {
			if unsafe {
				*o = *c.service
				return nil
			}
			c.service.DeepCopyInto(o)
			o.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Service"))
			return nil
		}
		return apierrors.NewNotFound(schema.GroupResource{Resource: "Service"}, key.Name)
	}
	return fmt.Errorf("steadyCache: Get of %T", obj)
}

func (c *steadyCache) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	pl, ok := list.(*corev1.PodList)
	if !ok {
		return fmt.Errorf("steadyCache: List of %T", list)
	}
	var lo client.ListOptions
	lo.ApplyOptions(opts)
	for _, p := range c.pods {
		if (lo.Namespace == "" || p.Namespace == lo.Namespace) && (lo.LabelSelector == nil || lo.LabelSelector.Matches(labels.Set(p.Labels))) {
			pl.Items = append(pl.Items, p)
		}
	}
	return nil
}

func (c *steadyCache) Status() client.SubResourceWriter { return steadyStatusWriter{c} }

type steadyStatusWriter struct{ c *steadyCache }

func (s steadyStatusWriter) Create(context.Context, client.Object, client.Object, ...client.SubResourceCreateOption) error {
	return fmt.Errorf("steadyCache: status create")
}

func (s steadyStatusWriter) Update(context.Context, client.Object, ...client.SubResourceUpdateOption) error {
	return fmt.Errorf("steadyCache: status update")
}

func (s steadyStatusWriter) Patch(_ context.Context, obj client.Object, patch client.Patch, _ ...client.SubResourcePatchOption) error {
	next, err := patchedStatus(s.c.toolSet, obj, patch)
	if err != nil {
		return fmt.Errorf("steadyCache: %w", err)
	}
	s.c.patches++
	// The cache replaces the object it holds, never changes it: readers
	// may hold the old one.
	s.c.toolSet = next
	return nil
}

// patchedStatus is what an API server makes of cur with a patch of its
// status sent as obj (the object's metadata, as patchStatus sends it):
// cur with the patch applied to its status and the next resourceVersion,
// which obj gets too. cur is not changed.
func patchedStatus(cur *v1alpha1.ToolSet, obj client.Object, patch client.Patch) (*v1alpha1.ToolSet, error) {
	if _, ok := obj.(*metav1.PartialObjectMetadata); !ok || patch.Type() != types.MergePatchType {
		return nil, fmt.Errorf("status patch (%s) of %T", patch.Type(), obj)
	}
	data, err := patch.Data(obj)
	if err != nil {
		return nil, err
	}
	stored, err := json.Marshal(cur)
	if err != nil {
		return nil, err
	}
	patched, err := jsonpatch.MergePatch(stored, data)
	if err != nil {
		return nil, err
	}
	next := &v1alpha1.ToolSet{}
	if err := json.Unmarshal(patched, next); err != nil {
		return nil, err
	}
	// A status patch changes the status alone.
	status := next.Status
	next = cur.DeepCopy()
	next.Status = status
	rv, _ := strconv.Atoi(cur.ResourceVersion)
	next.ResourceVersion = strconv.Itoa(rv + 1)
	obj.SetResourceVersion(next.ResourceVersion)
	return next, nil
}

func (s steadyStatusWriter) Apply(context.Context, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
	return fmt.Errorf("steadyCache: status apply")
}
