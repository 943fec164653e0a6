package controllers

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/pprof"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/test/harness"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// BenchmarkSteadyFleet measures steady rounds as the manager makes them,
// which BenchmarkSteadyRound's hot loop does not: a fleet of ToolSets in
// bench-scale's shape (50 a namespace, their Pods on 4 loopback servers),
// each rescraped once per interval through controller-runtime's
// controller (its priority queue, RequeueAfter, 8 workers) and the
// background round, with the process otherwise idle between rounds, so
// that every round pays for waking the queue, the worker, the scrape's
// goroutines and the servers' own. 1,000 ToolSets of 5s (the shortest
// interval a ToolSet gets) make 200 rounds a second, about bench-scale's
// rate at 5,000 ToolSets of 30s.
// cpu-ns/op is the process's CPU per round (the servers' included), over
// b.N rounds after every ToolSet is Published and the fleet at rest; no
// status may be written. STEADY_FLEET_CPU_PROFILE=FILE writes a CPU
// profile of those rounds.
//
//	go test ./controllers -run '^$' -bench BenchmarkSteadyFleet -benchmem -count 6
func BenchmarkSteadyFleet(b *testing.B) {
	const (
		toolSets     = 1000
		perNamespace = 50
		servers      = 4
		tools        = 10
		interval     = 5 * time.Second
	)
	muxes := make([]*http.ServeMux, servers)
	ports := make([]int, servers)
	for i := range muxes {
		muxes[i] = http.NewServeMux()
		srv := httptest.NewServer(muxes[i])
		b.Cleanup(srv.Close)
		_, p, _ := net.SplitHostPort(srv.Listener.Addr().String())
		ports[i], _ = strconv.Atoi(p)
	}
	c := &fleetCache{toolSets: map[types.NamespacedName]*v1alpha1.ToolSet{}}
	workloads := make([]*harness.Workload, toolSets)
	now := metav1.NewTime(time.Now())
	for i := range toolSets {
		set := fmt.Sprintf("%04d", i)
		path := "/sets/" + set + spec.DefaultPath
		workloads[i] = harness.NewWorkload("bench-"+set, harness.Tools("set"+set+"_tool", tools))
		muxes[i%servers].Handle(path, workloads[i])
		ns := fmt.Sprintf("bench-%02d", i/perNamespace)
		ts := harness.NewToolSet(ns, "set-"+set, "set-"+set, path, interval)
		ts.UID, ts.Generation, ts.ResourceVersion = types.UID("ts-uid-"+set), 1, "1"
		ts.Spec.Protocol, ts.Spec.Scheme = v1alpha1.ProtocolToolkit, "http"
		ts.Spec.Timeout = &metav1.Duration{Duration: 4 * time.Second}
		ts.Spec.Limits = v1alpha1.Limits{MaxTools: 256, MaxSchemaBytes: 65536}
		ts.CreationTimestamp = metav1.NewTime(time.Now().Truncate(time.Second))
		c.toolSets[client.ObjectKeyFromObject(ts)] = ts
		c.pods = append(c.pods, corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "set-" + set + "-0", UID: types.UID("pod-uid-" + set),
				Labels: map[string]string{"app": "set-" + set}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "tools", Image: "example.invalid/tools:1",
				Ports: []corev1.ContainerPort{{Name: harness.PortName, ContainerPort: int32(ports[i%servers])}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1", PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}},
				Conditions: []corev1.PodCondition{
					{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
					{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
				}},
		})
	}

	pub := &TablePublisher{}
	pub.init()
	close(pub.loaded)
	r := &ToolSetReconciler{Client: c, APIReader: c, Publisher: pub, Recorder: &events.FakeRecorder{},
		Ceilings: Ceilings{MinInterval: interval}, MaxConcurrentReconciles: defaultMaxConcurrentReconciles}
	r.init()
	ctx, cancel := context.WithCancel(ctrl.LoggerInto(context.Background(), logr.Discard()))
	var wg sync.WaitGroup
	b.Cleanup(func() {
		cancel()
		wg.Wait()
		r.stop()
		for key := range c.toolSets {
			forgetTools(key)
		}
	})
	// As SetupWithManager wires it, less the informers' watches: nothing
	// changes in steady state.
	ctl, err := controller.NewTypedUnmanaged("toolset-fleet", controller.TypedOptions[reconcile.Request]{
		Reconciler: r, MaxConcurrentReconciles: r.MaxConcurrentReconciles,
		SkipNameValidation: ptr.To(true), Logger: logr.Discard(),
	})
	if err != nil {
		b.Fatal(err)
	}
	seed := make(chan event.TypedGenericEvent[*v1alpha1.ToolSet], toolSets)
	for _, ts := range c.toolSets {
		seed <- event.TypedGenericEvent[*v1alpha1.ToolSet]{Object: ts}
	}
	for _, ch := range []<-chan event.TypedGenericEvent[*v1alpha1.ToolSet]{seed, r.restatus.events, r.runs.wake} {
		if err := ctl.Watch(source.Channel(ch, &handler.TypedEnqueueRequestForObject[*v1alpha1.ToolSet]{})); err != nil {
			b.Fatal(err)
		}
	}
	wg.Go(func() { _ = r.relayChanged(ctx) })
	wg.Go(func() { _ = ctl.Start(ctx) })

	// Converge: every ToolSet offers, the table takes every claim (as its
	// write would tell the publisher), and every status says Published.
	deadline := time.Now().Add(60 * time.Second)
	for {
		pub.mu.Lock()
		claims := len(pub.claims)
		pub.mu.Unlock()
		if claims == toolSets {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d ToolSets offered", claims, toolSets)
		}
		time.Sleep(50 * time.Millisecond)
	}
	pub.mu.Lock()
	var stored []*spec.TableTool
	for _, claim := range pub.claims {
		for i := range claim.tools {
			stored = append(stored, &claim.tools[i])
		}
	}
	pub.mu.Unlock()
	pub.stored(stored)
	for c.published(tools) < toolSets {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d ToolSets Published", c.published(tools), toolSets)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// At rest: one more interval, then rounds are counted as the servers
	// answer them.
	time.Sleep(interval + interval/2)
	scraped := func() int {
		n := 0
		for _, w := range workloads {
			n += w.Scrapes()
		}
		return n
	}
	patches := c.patchCount()
	start := scraped()
	if path := os.Getenv("STEADY_FLEET_CPU_PROFILE"); path != "" {
		// The steady rounds only, not the convergence before them.
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		defer func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		}()
	}
	b.ReportAllocs()
	b.ResetTimer()
	done := harness.CPUPerOp(b)
	for scraped()-start < b.N {
		time.Sleep(5 * time.Millisecond)
	}
	done()
	b.StopTimer()
	if n := c.patchCount() - patches; n != 0 {
		b.Fatalf("%d status writes in steady state, want none", n)
	}
}

// fleetCache is steadyCache for many ToolSets, safe for the controller's
// workers: it answers reads as the informer cache does and takes status
// patches as written and seen by the cache at once.
type fleetCache struct {
	client.Client
	mu       sync.Mutex
	toolSets map[types.NamespacedName]*v1alpha1.ToolSet
	pods     []corev1.Pod
	patches  int
}

func (c *fleetCache) published(tools int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, ts := range c.toolSets {
		if int(ts.Status.PublishedTools) == tools {
			n++
		}
	}
	return n
}

func (c *fleetCache) patchCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.patches
}

func (c *fleetCache) Get(_ context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	var o client.GetOptions
	o.ApplyOptions(opts)
	unsafe := o.UnsafeDisableDeepCopy != nil && *o.UnsafeDisableDeepCopy
	switch o := obj.(type) {
	case *v1alpha1.ToolSet:
		c.mu.Lock()
		ts := c.toolSets[key]
		c.mu.Unlock()
		if ts == nil {
			return apierrors.NewNotFound(schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "ToolSet"}, key.Name)
		}
		if unsafe {
			*o = *ts
			return nil
		}
		ts.DeepCopyInto(o)
		o.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("ToolSet"))
		return nil
	case *corev1.Service:
		return apierrors.NewNotFound(schema.GroupResource{Resource: "Service"}, key.Name)
	}
	return fmt.Errorf("fleetCache: Get of %T", obj)
}

func (c *fleetCache) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	pl, ok := list.(*corev1.PodList)
	if !ok {
		return fmt.Errorf("fleetCache: List of %T", list)
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

func (c *fleetCache) Status() client.SubResourceWriter {
	return fleetStatusWriter{steadyStatusWriter{}, c}
}

type fleetStatusWriter struct {
	steadyStatusWriter
	c *fleetCache
}

func (s fleetStatusWriter) Patch(_ context.Context, obj client.Object, patch client.Patch, _ ...client.SubResourcePatchOption) error {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	key := client.ObjectKeyFromObject(obj)
	next, err := patchedStatus(s.c.toolSets[key], obj, patch)
	if err != nil {
		return fmt.Errorf("fleetCache: %w", err)
	}
	s.c.patches++
	s.c.toolSets[key] = next
	return nil
}
