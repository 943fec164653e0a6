package controllers

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// The endpoints the operator publishes name a ToolSet's Service by its
// cluster DNS name, <name>.<namespace>.svc.<domain>, which the gateway (and
// any agent) dials. The name says "namespace ns" only if the Service routes
// to Pods of ns: an ExternalName Service is a CNAME to any host (another
// namespace's Service included), and a Service without a selector routes
// to whatever addresses its owner writes into its EndpointSlices. Through
// either, a tenant would make the gateway, which other namespaces'
// NetworkPolicies admit, call into a namespace the caller was never
// authorized for (a confused deputy). So the reconciler reads the Service,
// and for such a one publishes the tools without endpoints, with
// ReasonServiceRefused on Ready.
//
// The operator refuses these Services rather than publishing addresses it
// resolved itself: Pod addresses change with every rollout, so the table
// would be rewritten for each, and a Service name is what TLS certificates,
// mesh routes and NetworkPolicies are written for. A Service that does not
// exist (yet) is not refused: its name resolves to nothing, and its
// creation, or any change of its type or selector, reconciles the ToolSets
// that name it.

// serviceNameIndex indexes each ToolSet by the name of its spec.service.
const serviceNameIndex = "toolplane.io/service-name"

func serviceNameIndexValues(obj client.Object) []string {
	ts, ok := obj.(*v1alpha1.ToolSet)
	if !ok || ts.Spec.Service == nil {
		return nil
	}
	return []string{ts.Spec.Service.Name}
}

// toolSetsForService maps a Service to the ToolSets of its namespace that
// name it.
func (r *ToolSetReconciler) toolSetsForService(ctx context.Context, obj client.Object) []reconcile.Request {
	r.serviceEvents.bump(obj.GetNamespace())
	var list v1alpha1.ToolSetList
	if err := r.Client.List(ctx, &list, client.InNamespace(obj.GetNamespace()),
		client.MatchingFields{serviceNameIndex: obj.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: list.Items[i].Name}})
	}
	return reqs
}

// serviceRoutingChanged passes the Service events that can change whether
// it is refused: its creation and deletion, and a change of its type,
// external name or selector.
var serviceRoutingChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Service)
		n, ok2 := e.ObjectNew.(*corev1.Service)
		return !ok1 || !ok2 || serviceRefusal(o) != serviceRefusal(n)
	},
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// serviceRefusal says why svc is not a Service the operator publishes
// endpoints for, or "" when it is one.
func serviceRefusal(svc *corev1.Service) string {
	switch {
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		return fmt.Sprintf("Service %s is of type ExternalName (%s), an alias for a host that need not be in namespace %s",
			svc.Name, truncate(svc.Spec.ExternalName, 253), svc.Namespace)
	case len(svc.Spec.Selector) == 0:
		return fmt.Sprintf("Service %s has no selector: its addresses are whatever its EndpointSlices say, not Pods of namespace %s", svc.Name, svc.Namespace)
	}
	return ""
}

// serviceVerdict returns cachedService's answer for the ToolSet's
// Service: the refusal of its last round while no Service event of its
// namespace that can change a refusal came since (see serviceEvents) and
// its spec is the same, else cachedService afresh. Most rounds are steady
// ones, and their Service is the same. An event is counted before the
// ToolSets it concerns are enqueued, and after the cache has it, so the
// round it brings reads the Service again, as the cache now has it. An
// unsure answer is not remembered: the caller settles it with the API
// server (heardService), and the next round asks the cache again.
func (r *ToolSetReconciler) serviceVerdict(ctx context.Context, ts *v1alpha1.ToolSet, mem *toolSetMemory) (refused string, unsure bool, err error) {
	version := r.serviceEvents.version(ts.Namespace)
	last := &mem.service
	if last.checked && last.version == version && last.generation == ts.Generation {
		return last.refused, false, nil
	}
	refused, unsure, err = r.cachedService(ctx, ts, mem)
	if err != nil {
		return "", false, err
	}
	last.checked = !unsure
	if !unsure {
		last.version, last.generation, last.refused = version, ts.Generation, refused
	}
	return refused, unsure, nil
}

// checkService reads the ToolSet's Service and returns why its endpoints
// are refused, or "". Only an error reading it is an error.
func (r *ToolSetReconciler) checkService(ctx context.Context, ts *v1alpha1.ToolSet, mem *toolSetMemory) (string, error) {
	refusal, unsure, err := r.cachedService(ctx, ts, mem)
	if err != nil || !unsure {
		return refusal, err
	}
	return mem.heardService(r.readService(ctx, types.NamespacedName{Namespace: ts.Namespace, Name: ts.Spec.Service.Name}))
}

// cachedService is checkService from the cache alone. unsure means the
// cache does not have the Service and the API server has not said it is
// missing since it was last found: only the API server's answer
// (readService, then heardService) tells.
//
// The cache may not have seen a Service created just before the ToolSet:
// the API server is asked, so that an alias is never published with
// endpoints for the moment the cache lags. Once the API server has said it
// is missing, a Service created since reaches the cache through its watch,
// which enqueues the ToolSet: only the first reconcile of a ToolSet whose
// Service is missing costs this read, not every round.
func (r *ToolSetReconciler) cachedService(ctx context.Context, ts *v1alpha1.ToolSet, mem *toolSetMemory) (refusal string, unsure bool, err error) {
	if ts.Spec.Service == nil {
		return "", false, nil
	}
	svc := &corev1.Service{}
	// Only read: the cached object itself will do.
	err = r.Client.Get(ctx, types.NamespacedName{Namespace: ts.Namespace, Name: ts.Spec.Service.Name}, svc, client.UnsafeDisableDeepCopy)
	switch {
	case apierrors.IsNotFound(err):
		return "", mem.serviceMissing != ts.Spec.Service.Name, nil
	case err != nil:
		return "", false, fmt.Errorf("reading Service %s: %w", ts.Spec.Service.Name, err)
	}
	// Found: should it go again, the API server is asked again.
	mem.serviceMissing = ""
	return serviceRefusal(svc), false, nil
}

// serviceRead is what the API server said of a ToolSet's Service: svc, or
// neither svc nor err if it does not exist.
type serviceRead struct {
	name string
	svc  *corev1.Service
	err  error
}

// maxServiceReads bounds the reads of a round's Service in flight off the
// reconcile workers (backgroundServiceRead). Each new ToolSet whose Service
// the cache does not hold costs one; unbounded, a burst of new ToolSets
// (5,000 in make bench-scale, their Services missing) put some 470 GETs in
// flight at once beside the status writes, each with its goroutines and
// buffers. The reads a worker makes itself are bounded by the workers, and
// never wait behind the background's: a tenant's burst must not hold up
// another namespace's reconcile.
const maxServiceReads = 8

// backgroundServiceRead is readService for a round's scrapes, off the
// workers (see roundServiceRead): it takes one of maxServiceReads slots
// first. A round that ends while it waits gets its context's error, as a
// failed read.
func (r *ToolSetReconciler) backgroundServiceRead(ctx context.Context, key types.NamespacedName) serviceRead {
	r.init()
	if err := r.serviceReads.Acquire(ctx, 1); err != nil {
		return serviceRead{name: key.Name, err: err}
	}
	defer r.serviceReads.Release(1)
	return r.readService(ctx, key)
}

// roundServiceRead reads the Service key for a round (see
// backgroundServiceRead) and runs work, the round's scrapes, which need
// scrapes of their budget. The read runs beside work, on a goroutine of its
// own, if one of the maxServiceReads slots is free and no read waits for
// one; else first, on this goroutine, and work after it, so that a burst of
// new ToolSets whose Services the cache lacks queues one goroutine a round,
// not two, each waiting on the small stack it started with rather than one
// the scrapes grew (at 5,000 such ToolSets, 1,547 reads waited for a slot
// at once, each on a goroutine beside its round's, with 26 MB of stacks in
// all). A round that has waited until only scrapes of ctx's time is left
// stops waiting, scrapes, and then waits for its read, as every round did
// before.
func (r *ToolSetReconciler) roundServiceRead(ctx context.Context, key types.NamespacedName, scrapes time.Duration, work func()) serviceRead {
	r.init()
	if !r.serviceReads.TryAcquire(1) {
		waitCtx := ctx
		if deadline, ok := ctx.Deadline(); ok {
			var cancel context.CancelFunc
			waitCtx, cancel = context.WithDeadline(ctx, deadline.Add(-scrapes))
			defer cancel()
		}
		if err := r.serviceReads.Acquire(waitCtx, 1); err != nil {
			work()
			return r.backgroundServiceRead(ctx, key)
		}
		read := r.readService(ctx, key)
		r.serviceReads.Release(1)
		work()
		return read
	}
	var read serviceRead
	var wg sync.WaitGroup
	wg.Go(func() {
		defer r.serviceReads.Release(1)
		read = r.readService(ctx, key)
	})
	work()
	wg.Wait()
	return read
}

// readService asks the API server for the Service key, past the cache. It
// may run off the reconcile, beside the scrapes of a round (see Reconcile
// and backgroundServiceRead).
func (r *ToolSetReconciler) readService(ctx context.Context, key types.NamespacedName) serviceRead {
	read := serviceRead{name: key.Name, svc: &corev1.Service{}}
	read.err = r.APIReader.Get(ctx, key, read.svc)
	if apierrors.IsNotFound(read.err) {
		read.svc, read.err = nil, nil
	}
	return read
}

// heardService is checkService's verdict from the API server's answer, and
// remembers a Service it said is missing.
func (m *toolSetMemory) heardService(read serviceRead) (string, error) {
	switch {
	case read.err != nil:
		return "", fmt.Errorf("reading Service %s: %w", read.name, read.err)
	case read.svc == nil:
		m.serviceMissing = read.name
		return "", nil
	}
	m.serviceMissing = ""
	return serviceRefusal(read.svc), nil
}

// withoutEndpoints returns tools with no endpoints: they keep their names
// (and their owner), and no agent or gateway can call them.
func withoutEndpoints(tools []spec.TableTool) []spec.TableTool {
	out := make([]spec.TableTool, len(tools))
	for i, t := range tools {
		t.Endpoints = nil
		out[i] = t
	}
	return out
}

// setServiceRefused makes Ready say why the tools have no endpoints, and
// Reconciling and Stalled follow it.
func setServiceRefused(ts *v1alpha1.ToolSet, why string) {
	meta.SetStatusCondition(&ts.Status.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonServiceRefused,
		Message:            truncate("spec.service: "+why+"; the tools are published without endpoints", 1024),
		ObservedGeneration: ts.Generation,
	})
	setProgress(ts)
}

// TrimServiceForCache is a cache transform that keeps of a Service only
// what checkService reads: identity, type, external name and selector. The
// manager caches every Service of the watched namespaces, and whole ones
// (annotations, ports, status, managed fields) would make that cache many
// times larger. Nothing in the manager may write a Service read from it.
func TrimServiceForCache(obj any) (any, error) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return obj, nil
	}
	return &corev1.Service{
		TypeMeta: svc.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: svc.Name, Namespace: svc.Namespace, UID: svc.UID, ResourceVersion: svc.ResourceVersion,
			DeletionTimestamp: svc.DeletionTimestamp,
		},
		Spec: corev1.ServiceSpec{Type: svc.Spec.Type, ExternalName: svc.Spec.ExternalName, Selector: maps.Clone(svc.Spec.Selector)},
	}, nil
}
