package controllers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/internal/credentials"
	"github.com/toolplane/toolplane/toolkit/spec"
)

const (
	defaultInterval = 30 * time.Second
	defaultTimeout  = 5 * time.Second
	// staleIntervals is how many intervals the last good tools are held
	// through an outage before they are dropped.
	staleIntervals = 3
	// defaultMaxConcurrentReconciles lets a ToolSet whose Pods hang wait out
	// its timeout without holding up the others.
	defaultMaxConcurrentReconciles = 8
)

// ToolSetReconciler scrapes the Pods of every ToolSet, validates, filters
// and prefixes their tools, offers them to the Publisher and reports what
// became of each tool in the ToolSet's status.
type ToolSetReconciler struct {
	// Client reads ToolSets and Pods from the cache and writes status.
	Client client.Client
	// APIReader reads Secrets and CA ConfigMaps one at a time, uncached, so
	// that the operator never holds them in memory between scrapes.
	APIReader client.Reader
	// Recorder emits events on transitions.
	Recorder events.EventRecorder
	// Publisher owns the names and the tool table.
	Publisher Publisher

	// MaxConcurrentScrapes bounds the scrapes in flight across every
	// ToolSet. Zero means DefaultMaxConcurrentScrapes.
	MaxConcurrentScrapes int
	// MaxResponseBytes bounds the spec document read from one Pod. Zero
	// means DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// MaxConcurrentScrapesPerNamespace bounds the scrapes in flight for the
	// ToolSets of one namespace, so that no namespace takes every slot. Zero
	// means DefaultMaxConcurrentScrapesPerNamespace.
	MaxConcurrentScrapesPerNamespace int
	// MaxIdleScrapeConnections bounds the scrape connections kept open
	// between rounds across every ToolSet; past it, scrapes of Pods that
	// hold none connect anew each round (see connPool). Zero means DefaultMaxIdleScrapeConnections; negative
	// keeps none.
	MaxIdleScrapeConnections int
	// ScrapeMemoryBudget bounds the bytes the scrapes in flight hold
	// together: what they read and what it decodes to. Zero means
	// DefaultScrapeMemoryBudget.
	ScrapeMemoryBudget int64
	// MaxConcurrentReconciles is the number of ToolSets reconciled at once.
	// Zero means 8. Scrapes run off the workers (see ScrapeWait), and
	// MaxConcurrentScrapes, not this, bounds the load on the Pods.
	MaxConcurrentReconciles int
	// ScrapeWait is the longest a reconcile waits for its ToolSet's scrapes
	// before it hands its worker back; the scrapes go on in the background
	// and enqueue the ToolSet when they end. The first round of a new
	// ToolSet does not wait at all (see Reconcile). Zero means
	// DefaultScrapeWait.
	ScrapeWait time.Duration
	// AwaitWrite is how long a status whose news is a name awaiting the
	// table's write is held back for that write, so that the status is
	// written once, Published (see holdForWrite). Zero means
	// DefaultAwaitWrite; negative holds none back.
	AwaitWrite time.Duration
	// Ceilings cap what any ToolSet may ask for.
	Ceilings Ceilings
	// ClusterDomain is the cluster's DNS domain, in the fully qualified
	// Service names of the endpoints published. Empty means
	// DefaultClusterDomain.
	ClusterDomain string

	initOnce sync.Once
	scraper  *scraper
	runs     *scrapeRuns
	stop     context.CancelFunc
	mu       sync.Mutex
	memory   map[types.NamespacedName]*toolSetMemory
	// serviceReads bounds the reads in flight of the rounds' Services
	// (roundServiceRead, backgroundServiceRead).
	serviceReads *semaphore.Weighted
	// podEvents counts the Pod events of each namespace, for podsOf.
	podEvents podEventCounts
	// podCache, when set, is the cache Client reads, whose Pod informer's
	// store (podStore) readyPods reads in place of Client once the first
	// reconcile finds it.
	podCache     crcache.Cache
	podStoreOnce sync.Once
	podStore     *podStore
	// serviceEvents counts the Service events of each namespace that can
	// change a refusal (those serviceRoutingChanged passes), for
	// serviceVerdict.
	serviceEvents podEventCounts
	// restatus marks why ToolSets were enqueued (toolset_restatus.go).
	restatus restatusMarks
	// holds are the statuses held back for the table's write
	// (toolset_await.go).
	holds writeHolds
}

// toolSetTypeMeta is the kind a ToolSet read from the cache with a deep copy
// has.
var toolSetTypeMeta = metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "ToolSet"}

// init builds the scraper and the memory from the exported fields, once.
func (r *ToolSetReconciler) init() {
	r.initOnce.Do(func() {
		r.scraper = newScraper(r.MaxConcurrentScrapes, r.MaxResponseBytes)
		if r.ScrapeMemoryBudget > 0 {
			r.scraper.budget = newScrapeBudget(r.ScrapeMemoryBudget)
		}
		if r.MaxConcurrentScrapesPerNamespace > 0 {
			r.scraper.perNamespace = int64(r.MaxConcurrentScrapesPerNamespace)
		}
		if r.MaxIdleScrapeConnections != 0 {
			r.scraper.idle = max(r.MaxIdleScrapeConnections, 0)
		}
		var ctx context.Context
		ctx, r.stop = context.WithCancel(context.Background())
		r.runs = newScrapeRuns(ctx, r.ScrapeWait)
		r.serviceReads = semaphore.NewWeighted(maxServiceReads)
		r.memory = map[types.NamespacedName]*toolSetMemory{}
		r.restatus.events = make(chan event.TypedGenericEvent[*v1alpha1.ToolSet], 64)
	})
}

// toolSetMemory is what the reconciler keeps of a ToolSet between rounds.
// Reconciles of one ToolSet never overlap, so only the map needs the lock.
type toolSetMemory struct {
	// uid is the UID of the ToolSet object remembered: one deleted and
	// created again under the name starts with no memory (no held tools,
	// no baseline, no written status).
	uid types.UID
	// pods holds each Pod's last document, by UID, for conditional GETs.
	pods podDocs
	// holdState is what is held through an outage (see nextHold).
	holdState
	// interval is the ToolSet's interval under the ceilings, as of the
	// last round.
	interval time.Duration
	// clamped says what of the spec the ceilings changed.
	clamped []string
	// recalled is set once the held tools were looked up in the table.
	recalled bool
	// baseline is the last published version of each tool this ToolSet
	// owns, sorted by published name: what a change is classified against.
	// It is read from the table once after a restart (baselineLoaded). It
	// is mostly the very slice that was offered, shared: never modify it.
	baseline       []spec.TableTool
	baselineLoaded bool
	// written is the last status this reconciler wrote.
	written writtenStatus
	// toolsRecorded is set once the tool gauges were set from the status.
	toolsRecorded bool
	// last is the last full round, which an ownership change elsewhere
	// recomputes the status from without a scrape (toolset_restatus.go).
	last *lastRound
	// podList is the last list of the ToolSet's ready Pods (podsOf).
	podList podList
	// selector is the ToolSet's Pod selector, parsed for generation
	// (selectorOf).
	selector struct {
		generation int64
		sel        labels.Selector
	}
	// serviceMissing is the name of the ToolSet's Service when the API
	// server said it does not exist and the cache has not seen it since
	// (checkService).
	serviceMissing string
	// service is the last refusal checkService returned, and what it was
	// checked under (serviceVerdict).
	service struct {
		checked    bool
		version    uint64
		generation int64
		refused    string
	}
	// assembled is the last round's assembly, and what it was made from.
	assembled struct {
		generation int64
		docs       []*spec.Document
		blind      int
		a          assembly
	}
}

// writtenStatus is what a ToolSet's last status write was made over: the
// resourceVersion of the object read and patched, the one stale version
// the cache may still show, as it moves forward only. A reconcile that
// reads it must not patch and announce the same transitions again: it
// waits for the cache (lags, retry), and past maxCacheLagRetries reads the
// object from the API server. A write made over that object, while the
// cache still lags, leaves two versions stale, and so on (stale, at most
// maxStale). The status written is not kept: a copy of every ToolSet's,
// held until its next round, was 9.5 MB of the heap after convergence at
// 5,000 ToolSets.
type writtenStatus struct {
	stale []string
	// lagged counts the reconciles that found the cache behind the write.
	lagged int
}

// maxStale bounds the versions remembered while the cache lags.
const maxStale = 16

// cacheLagRetry is how soon a reconcile that found the cache behind this
// reconciler's last status write looks again; it doubles with every
// reconcile that finds it behind still, up to maxCacheLagRetries. The
// cache is most often a few milliseconds behind.
const (
	cacheLagRetry      = 100 * time.Millisecond
	maxCacheLagRetries = 5
)

// lags reports whether ts is a version of the object that predates the
// last status write; otherwise the cache has caught up and the memory is
// dropped.
func (w *writtenStatus) lags(ts *v1alpha1.ToolSet) bool {
	if len(w.stale) == 0 {
		return false
	}
	if slices.Contains(w.stale, ts.ResourceVersion) {
		return true
	}
	*w = writtenStatus{}
	return false
}

// retry returns how long to wait for a cache that lags, or false once it
// has lagged for maxCacheLagRetries reconciles (3.1 s): then the object is
// read from the API server, as it is for every later reconcile until the
// cache catches up.
func (w *writtenStatus) retry() (time.Duration, bool) {
	if w.lagged >= maxCacheLagRetries {
		return 0, false
	}
	d := cacheLagRetry << w.lagged
	w.lagged++
	return d, true
}

// wrote records that ts's status was written over the object at
// resourceVersion from. The memory is empty unless the write was made over
// an object read past a cache that lags (lags and retry): then what was
// stale stays so, and so does the count.
func (w *writtenStatus) wrote(from string, ts *v1alpha1.ToolSet) {
	if ts.ResourceVersion == from {
		// A patch that changed nothing leaves the version as it was.
		return
	}
	if len(w.stale) >= maxStale {
		w.stale = slices.Delete(w.stale, 0, 1)
	}
	w.stale = append(w.stale, from)
}

// assemble is assemble, reusing the last round's result when the spec and
// every Pod's document are the very same: a round of 304s costs no schema
// compilation.
func (m *toolSetMemory) assemble(ts *v1alpha1.ToolSet, docs []*spec.Document, blind int, bounds toolBounds, clusterDomain string) assembly {
	last := &m.assembled
	if last.docs != nil && last.generation == ts.Generation && last.blind == blind && slices.Equal(last.docs, docs) {
		return last.a
	}
	a := assembleWithin(ts, docs, blind, bounds, clusterDomain)
	if len(a.tools) > 0 && slices.EqualFunc(a.tools, last.a.tools, func(x, y spec.TableTool) bool { return sameEntry(&x, &y) }) {
		// The same tools from documents scraped again: the last round's
		// slice stands, so that the baseline, the publisher's claim and
		// this memory hold one copy (a second one cost some 2.7 KiB a
		// ToolSet), and the offer repeats (claim.repeats).
		a.tools = last.a.tools
	}
	last.generation, last.docs, last.blind, last.a = ts.Generation, slices.Clone(docs), blind, a
	return a
}

// SetupWithManager registers the reconciler and its watches.
func (r *ToolSetReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Publisher == nil {
		return errors.New("the ToolSet reconciler needs a Publisher")
	}
	if r.Client == nil {
		r.Client = mgr.GetClient()
		// The client reads the manager's cache: the Pod informer's own
		// objects can be read in place.
		r.podCache = mgr.GetCache()
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("toolplane-toolset")
	}
	if r.MaxConcurrentReconciles <= 0 {
		r.MaxConcurrentReconciles = defaultMaxConcurrentReconciles
	}
	r.init()
	if err := indexInNamespace(context.Background(), mgr.GetCache(), &v1alpha1.ToolSet{}, podSelectorIndex, selectorIndexValues); err != nil {
		return fmt.Errorf("indexing ToolSets by Pod selector: %w", err)
	}
	if err := indexInNamespace(context.Background(), mgr.GetCache(), &v1alpha1.ToolSet{}, serviceNameIndex, serviceNameIndexValues); err != nil {
		return fmt.Errorf("indexing ToolSets by Service: %w", err)
	}
	// The publisher's ownership changes reach the work queue marked, so
	// that they cost no scrape.
	if err := mgr.Add(manager.RunnableFunc(r.relayChanged)); err != nil {
		return err
	}
	// Scrapes in the background end when the manager stops.
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		r.stop()
		return nil
	})); err != nil {
		return err
	}

	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.ToolSet{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Pod{},
			handler.EnqueueRequestsFromMapFunc(r.scrapeFor(r.toolSetsForPod)),
			builder.WithPredicates(podScrapeChanged)).
		Watches(&corev1.Service{},
			handler.EnqueueRequestsFromMapFunc(r.toolSetsForService),
			builder.WithPredicates(serviceRoutingChanged)).
		WatchesRawSource(source.Channel(r.restatus.events, &handler.TypedEnqueueRequestForObject[*v1alpha1.ToolSet]{})).
		WatchesRawSource(source.Channel(r.runs.wake, &handler.TypedEnqueueRequestForObject[*v1alpha1.ToolSet]{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.MaxConcurrentReconciles}).
		Named("toolset").
		Complete(r)
}

// Reconcile scrapes one ToolSet's Pods and brings its offer and status up
// to date.
func (r *ToolSetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	r.init()
	// The cached object itself, not a copy: it stands as before, what the
	// status is compared with and patched from, and is only read. ts, the
	// one copy, is what the round changes.
	cached := &v1alpha1.ToolSet{}
	if err := r.Client.Get(ctx, req.NamespacedName, cached, client.UnsafeDisableDeepCopy); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, r.withdraw(ctx, req.NamespacedName)
		}
		return ctrl.Result{}, err
	}
	if !cached.DeletionTimestamp.IsZero() {
		// Deleted, and held by someone else's finalizer: its tools leave the
		// table at once, as if it were gone. Its owner asked for it to go,
		// its workload is most likely going with it, and nothing would
		// scrape it again or ever end a hold of its tools (it may stay for
		// as long as the finalizer's controller is down); the names pass to
		// the next claimant by the rule. The reconciler has no finalizer of
		// its own, so the status is left as it was.
		return ctrl.Result{}, r.withdraw(ctx, req.NamespacedName)
	}
	mem := r.memoryOf(req.NamespacedName, cached.UID)
	if mem.written.lags(cached) {
		// Status and events are computed against what is stored: the cache
		// has not seen this reconciler's last status write yet.
		if wait, ok := mem.written.retry(); ok {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		// Behind for seconds (a watch broken, a relist): the API server
		// has the object as it is.
		fresh := &v1alpha1.ToolSet{}
		if err := r.APIReader.Get(ctx, req.NamespacedName, fresh); err != nil {
			if apierrors.IsNotFound(err) {
				return ctrl.Result{}, r.withdraw(ctx, req.NamespacedName)
			}
			return ctrl.Result{}, err
		}
		if !fresh.DeletionTimestamp.IsZero() {
			return ctrl.Result{}, r.withdraw(ctx, req.NamespacedName)
		}
		if fresh.UID != cached.UID {
			// Deleted and created again: the new object's round waits
			// for the cache to show it.
			return ctrl.Result{RequeueAfter: cacheLagRetry << maxCacheLagRetries}, nil
		}
		cached = fresh
	}
	ts := cached.DeepCopy()
	// A read that skips the deep copy sets no kind, as one that copies
	// does.
	ts.TypeMeta = toolSetTypeMeta
	before := cached
	var contracts *contractRound
	defer func() {
		var err error
		changed := !statusEqual(&before.Status, &ts.Status)
		if changed {
			err = r.patchStatus(ctx, before, ts)
		}
		if err == nil {
			if changed {
				mem.written.wrote(before.ResourceVersion, ts)
			}
			// The gauges follow the status: set when it changes, and once
			// after the manager starts.
			if changed || !mem.toolsRecorded {
				recordTools(req.NamespacedName, ts.Status.Tools)
				mem.toolsRecorded = true
			}
			r.commitContracts(ts, mem, contracts)
		}
		retErr = errors.Join(retErr, err)
	}()

	selector, err := mem.selectorOf(ts)
	if err != nil {
		// Label keys and values are left to this check: the API server
		// refuses only the operators and values it can check cheaply.
		err = fmt.Errorf("spec.selector: %w", err)
	} else {
		err = validateSpec(&ts.Spec)
	}
	if err != nil {
		// No scrape can fix the spec: wait for the user to change it. What
		// the ToolSet claimed before stands, across restarts too.
		verdicts, retainErr := r.Publisher.Retain(ctx, req.NamespacedName)
		if retainErr != nil {
			return ctrl.Result{}, fmt.Errorf("retaining the tools of a ToolSet whose spec is invalid: %w", retainErr)
		}
		setInvalidSpec(ts, err)
		setRetained(ts, shownVerdicts(verdicts, r.Publisher.Written(req.NamespacedName)))
		return ctrl.Result{}, reconcile.TerminalError(err)
	}

	pods, key, err := r.podsOf(ctx, ts, selector, mem)
	if err != nil {
		return ctrl.Result{}, err
	}
	// A Service that may route outside the namespace gets no endpoints.
	serviceRefused, serviceUnsure, err := r.serviceVerdict(ctx, ts, mem)
	if err != nil {
		return ctrl.Result{}, err
	}
	creds, credErr := credentials.Load(ctx, r.APIReader, ts, ts.Spec.Scheme == "https")
	if credErr != nil && !errors.Is(credErr, credentials.ErrInvalid) {
		return ctrl.Result{}, credErr
	}
	// The first round of a new ToolSet, which has no status yet, holds no
	// worker: the status that brings its names waits for the table's write
	// anyway (holdForWrite), so its scrapes, and the API server's word on a
	// Service the cache lacks, run in the background, and the round
	// enqueues the ToolSet when it ends. When many ToolSets are created at
	// once, the workers then wait on status writes, not on Pods and reads.
	firstRound := mem.last == nil && credErr == nil && len(before.Status.Conditions) == 0
	if serviceUnsure && !firstRound {
		if serviceRefused, err = mem.heardService(r.readService(ctx, types.NamespacedName{Namespace: ts.Namespace, Name: ts.Spec.Service.Name})); err != nil {
			return ctrl.Result{}, err
		}
		serviceUnsure = false
	}

	eff := r.Ceilings.effectiveOf(ts)
	interval := eff.interval
	mem.interval, mem.clamped = interval, eff.clamped
	if last := r.restatusable(req.NamespacedName, mem, key, serviceRefused, time.Now()); last != nil {
		// Only ownership changed, through another ToolSet: the last round
		// stands until its next scrape, and its offer gets the verdicts
		// anew, so the status follows the table at once.
		verdicts, err := r.Publisher.Offer(ctx, last.offer)
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("offering tools to the publisher: %w", err)
		}
		verdicts = shownVerdicts(verdicts, r.Publisher.Written(req.NamespacedName))
		r.setStatus(ts, last.rd, last.a, last.offer.Tools, verdicts, last.held, mem)
		if serviceRefused != "" {
			setServiceRefused(ts, serviceRefused)
		}
		if contracts, err = r.checkContracts(ctx, ts, before.Status.Tools, last.offer.Tools, len(last.rd.docs) > 0, mem, time.Now()); err != nil {
			return ctrl.Result{}, err
		}
		if r.holdForWrite(req.NamespacedName, before, ts, time.Now()) {
			ts.Status, contracts = *before.Status.DeepCopy(), nil
		}
		return ctrl.Result{RequeueAfter: time.Until(last.due)}, nil
	}
	var results []podResult
	if credErr == nil {
		target := scrapeTarget{toolSet: req.NamespacedName, namespace: ts.Namespace, spec: &ts.Spec,
			timeout: eff.timeout, interval: interval, creds: creds}
		last := mem.pods
		// The scrapes run off this worker: a ToolSet whose Pods hang holds
		// it for ScrapeWait at most (a first round, not at all), and the
		// round enqueues it when it ends.
		// Waiting for slots is bounded by the interval, the scrapes by the
		// timeout.
		var (
			retry time.Duration
			ok    bool
			run   runResults
		)
		var service types.NamespacedName // the Service the round reads, if any
		if serviceUnsure {
			service = types.NamespacedName{Namespace: ts.Namespace, Name: ts.Spec.Service.Name}
		}
		// Taken here, on the worker, where no withdraw of the ToolSet runs
		// beside it: a round still waiting when its ToolSet is deleted must
		// not take it again after withdraw forgot it.
		client := r.scraper.clientFor(target)
		run, retry, ok = r.runs.results(ctx, req.NamespacedName, key, interval+eff.timeout, firstRound,
			func(ctx context.Context) runResults {
				var out runResults
				scrape := func() { out.pods = r.scraper.scrapeAllWith(ctx, client, target, pods, last) }
				if service.Name == "" {
					scrape()
					return out
				}
				read := r.roundServiceRead(ctx, service, eff.timeout, scrape)
				out.service = &read
				return out
			})
		if err := ctx.Err(); err != nil {
			// The manager is stopping: what was scraped is not the truth.
			return ctrl.Result{}, err
		}
		if !ok {
			// Nothing new to report yet: the status stands until the round
			// ends.
			return ctrl.Result{RequeueAfter: retry}, nil
		}
		results = run.pods
		if serviceUnsure {
			// The round read the Service if the reconcile that started it
			// was unsure of it too; else it is read now.
			read := run.service
			if read == nil || read.name != ts.Spec.Service.Name {
				now := r.readService(ctx, types.NamespacedName{Namespace: ts.Namespace, Name: ts.Spec.Service.Name})
				read = &now
			}
			if serviceRefused, err = mem.heardService(*read); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	rd := newRound(pods, results, credErr, mem.pods)
	mem.remember(results)
	// Built only when written: the values of a line not written still
	// cost their allocations.
	if log := ctrl.LoggerFrom(ctx).V(1); log.Enabled() {
		for _, res := range results {
			if res.err != nil {
				log.Info("Scrape failed", "pod", klog.KObj(res.pod), "reason", scrapeReason(res.err), "error", res.err.Error())
			}
		}
		log.Info("Scraped pods", "selected", len(pods), "scraped", len(rd.docs), "failed", len(rd.failures))
	}

	now := time.Now()
	var (
		a       assembly
		offered []spec.TableTool
		held    bool
		requeue time.Duration
	)
	if len(rd.docs) > 0 {
		// The schema limit is the ToolSet's, lowered to the ceiling.
		view := *ts
		view.Spec.Limits = eff.limits
		// A ready Pod whose scrape failed still takes traffic: it counts
		// with the last document it served, or, if it never served one,
		// as serving none of the tools.
		a = mem.assemble(&view, append(slices.Clone(rd.docs), rd.lastKnown...), rd.blind, eff.bounds, r.ClusterDomain)
	} else if err := r.recall(ctx, ts, mem); err != nil {
		// An outage: the tools to hold may be in the table, after a restart.
		return ctrl.Result{}, err
	}
	// Hold the last good tools through an outage for a bounded grace
	// period, then drop them.
	var hold holdOutcome
	mem.holdState, hold = nextHold(mem.holdState, holdObservation{scraped: len(rd.docs) > 0, tools: a.tools, revision: a.revision}, now, interval)
	offered, held, requeue = hold.offer, hold.held, hold.requeue

	if serviceRefused != "" && len(offered) > 0 {
		offered = withoutEndpoints(offered)
	}
	offer := Offer{ToolSet: req.NamespacedName, Created: ts.CreationTimestamp, UID: ts.UID, Tools: offered,
		Denied: overToolSetBudget(offered, eff.maxTools)}
	verdicts, err := r.Publisher.Offer(ctx, offer)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("offering tools to the publisher: %w", err)
	}
	mem.last = &lastRound{key: key, at: now, due: now.Add(requeue), serviceRefused: serviceRefused,
		offer: offer, rd: rd, a: a, held: held}
	verdicts = shownVerdicts(verdicts, r.Publisher.Written(req.NamespacedName))
	r.setStatus(ts, rd, a, offered, verdicts, held, mem)
	if serviceRefused != "" {
		setServiceRefused(ts, serviceRefused)
	}
	if contracts, err = r.checkContracts(ctx, ts, before.Status.Tools, offered, len(rd.docs) > 0, mem, now); err != nil {
		return ctrl.Result{}, err
	}
	if r.holdForWrite(req.NamespacedName, before, ts, now) {
		// The table's write that makes the new names Published is due: it
		// tells the ToolSet, and the status is written once. What the
		// contracts found is committed with that status.
		ts.Status, contracts = *before.Status.DeepCopy(), nil
	}
	if _, missing := errors.AsType[*credentials.MissingReference](credErr); missing {
		// Nothing watches Secrets: look again soon (toolset_references.go).
		requeue = min(requeue, referenceRetry(r.Ceilings))
	}
	return ctrl.Result{RequeueAfter: requeueAfter(time.Now(), requeue)}, nil
}

// requeueGrid is how many steps of a requeue's grid fit in the requeue:
// a requeue of 30s ends on a whole second.
const requeueGrid = 30

// requeueAfter is when to look at a ToolSet again, d from now: brought
// forward at random by up to a tenth of d less a step, then to the last
// step before it of a grid of d/30 (a second for 30s) that every ToolSet
// of that interval shares. So the rounds of a steady fleet come due in
// batches, one every step, rather than one by one: the work queue wakes
// once a step and the workers take the batch on warm processors, where a
// round due on its own paid for waking an idle one, and its scrape's and
// the transport's goroutines with it (BenchmarkSteadyFleet). The random
// share spreads the ToolSets over the steps; a round comes at most a tenth
// of d early, as the API says of spec.interval, and never late.
func requeueAfter(now time.Time, d time.Duration) time.Duration {
	grid := d / requeueGrid
	if grid < time.Millisecond {
		return jitter(d)
	}
	early := time.Duration(rand.Float64() * float64(time.Duration(intervalJitter*float64(d))-grid))
	if at := now.Add(d - early).Truncate(grid); at.After(now) {
		return at.Sub(now)
	}
	return jitter(d)
}

// intervalJitter is the largest share of an interval by which a requeue
// comes early.
const intervalJitter = 0.1

// jitter shortens d by up to a tenth, at random, so that ToolSets created
// together do not scrape in lockstep for ever. It never lengthens d: a
// change on a Pod is seen within one interval.
func jitter(d time.Duration) time.Duration {
	return d - time.Duration(rand.Float64()*intervalJitter*float64(d))
}

// publishedLister is a Publisher that can tell which tools of a ToolSet
// are in the table now, as TablePublisher can right after a restart.
type publishedLister interface {
	Published(ctx context.Context, toolSet types.NamespacedName) ([]spec.TableTool, error)
}

// recall, once per ToolSet after the operator starts, takes the tools to
// hold through an outage from the table, so that an outage spanning a
// restart holds the tools for its grace period instead of dropping them at
// once. The outage began when the Stale condition last turned True, if it
// is True.
func (r *ToolSetReconciler) recall(ctx context.Context, ts *v1alpha1.ToolSet, mem *toolSetMemory) error {
	if mem.recalled {
		return nil
	}
	mem.recalled = true
	pl, ok := r.Publisher.(publishedLister)
	if !ok || len(mem.held) > 0 {
		return nil
	}
	held, err := pl.Published(ctx, client.ObjectKeyFromObject(ts))
	if err != nil {
		return fmt.Errorf("reading the published tools: %w", err)
	}
	if len(held) == 0 {
		return nil
	}
	mem.held, mem.heldRevision = held, ts.Status.Revision
	if stale := meta.FindStatusCondition(ts.Status.Conditions, v1alpha1.ConditionStale); stale != nil && stale.Status == metav1.ConditionTrue {
		mem.outageSince = stale.LastTransitionTime.Time
	}
	return nil
}

// withdraw releases the names of a ToolSet that is gone. The reconciler
// uses no finalizer: a deleted ToolSet is noticed by its NotFound, and the
// publisher rebuilds ownership from the ToolSets that exist.
func (r *ToolSetReconciler) withdraw(ctx context.Context, key types.NamespacedName) error {
	if err := r.Publisher.Withdraw(ctx, key); err != nil {
		return fmt.Errorf("withdrawing the tools of %s: %w", key, err)
	}
	r.mu.Lock()
	delete(r.memory, key)
	r.mu.Unlock()
	r.runs.forget(key)
	r.scraper.forget(key)
	r.holds.release(key)
	forgetTools(key)
	ctrl.LoggerFrom(ctx).V(1).Info("Withdrew tools of deleted ToolSet")
	return nil
}

// memoryOf returns what the reconciler remembers of the ToolSet object
// key names now, uid: a fresh memory for a new object under an old name.
func (r *ToolSetReconciler) memoryOf(key types.NamespacedName, uid types.UID) *toolSetMemory {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.memory[key]
	if m != nil && m.uid != uid {
		// A round of the old object must not stand for the new one's.
		r.runs.forget(key)
		r.scraper.forget(key)
	}
	if m == nil || m.uid != uid {
		m = &toolSetMemory{uid: uid}
		r.memory[key] = m
	}
	return m
}

// remember keeps each scraped Pod's document for the next conditional GET.
// A Pod that failed keeps its previous document; a Pod that is gone is
// forgotten.
func (m *toolSetMemory) remember(results []podResult) {
	if m.remembers(results) {
		// The steady state: every Pod served what it served before. The
		// slice is only ever replaced, never changed, so it may stand.
		return
	}
	next := make(podDocs, 0, len(results))
	for _, res := range results {
		if res.err == nil {
			next = append(next, podDoc{uid: res.pod.UID, url: res.url, doc: res.doc, from: res.from})
		} else if prev, ok := m.pods.get(res.pod.UID); ok {
			next = append(next, prev)
		}
	}
	// A Pod is listed once, so no two share a UID.
	slices.SortFunc(next, func(a, b podDoc) int { return comparePodUID(a, b.uid) })
	m.pods = next
}

// remembers reports whether the memory of each Pod's document is what
// remember would make of results: every Pod scraped, each with the URL and
// document remembered, and no other Pod remembered.
func (m *toolSetMemory) remembers(results []podResult) bool {
	if len(results) != len(m.pods) {
		return false
	}
	for _, res := range results {
		if res.err != nil {
			return false
		}
		if prev, ok := m.pods.get(res.pod.UID); !ok || prev.url != res.url || prev.doc != res.doc || prev.from != res.from {
			return false
		}
	}
	return true
}

// podsOf returns the ready Pods of ts, and the runKey of a round that
// scrapes them: those of its last round while no Pod event of its
// namespace that can change what is scraped came since (see podEvents) and
// its spec is the same, else readyPods afresh. An event is counted before
// the ToolSets it concerns are enqueued, so the round it brings lists the
// Pods again.
func (r *ToolSetReconciler) podsOf(ctx context.Context, ts *v1alpha1.ToolSet, sel labels.Selector, mem *toolSetMemory) ([]*corev1.Pod, string, error) {
	version := r.podEvents.version(ts.Namespace)
	last := &mem.podList
	if last.listed && last.version == version && last.generation == ts.Generation {
		return last.pods, last.key, nil
	}
	pods, err := r.readyPods(ctx, ts.Namespace, sel)
	if err != nil {
		return nil, "", err
	}
	*last = podList{listed: true, version: version, generation: ts.Generation, pods: pods, key: runKey(ts.Generation, pods)}
	return pods, last.key, nil
}

// podList is the last list of a ToolSet's ready Pods, and what it was
// listed under.
type podList struct {
	listed     bool
	version    uint64
	generation int64
	pods       []*corev1.Pod
	// key is runKey of generation and pods.
	key string
}

// selectorOf returns the ToolSet's Pod selector, parsed once per
// generation of its spec.
func (m *toolSetMemory) selectorOf(ts *v1alpha1.ToolSet) (labels.Selector, error) {
	last := &m.selector
	if last.sel != nil && last.generation == ts.Generation {
		return last.sel, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(&ts.Spec.Selector)
	if err != nil {
		return nil, err
	}
	last.generation, last.sel = ts.Generation, sel
	return sel, nil
}

// podEventCounts counts, by namespace, the Pod events that can change what
// is scraped: those podScrapeChanged passes.
type podEventCounts struct {
	mu     sync.Mutex
	counts map[string]uint64
}

func (c *podEventCounts) bump(ns string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[string]uint64{}
	}
	c.counts[ns]++
}

func (c *podEventCounts) version(ns string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[ns]
}

// readyPods lists the Running and Ready Pods with an IP that the selector
// matches in the ToolSet's own namespace, sorted by name. They are read from
// the cache without a deep copy: nothing may change them.
func (r *ToolSetReconciler) readyPods(ctx context.Context, ns string, sel labels.Selector) ([]*corev1.Pod, error) {
	r.podStoreOnce.Do(func() {
		if r.podCache == nil {
			return
		}
		// The controller watches Pods: the informer exists and has synced.
		store, err := podStoreOf(ctx, r.podCache)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Reading Pods from the cache's store; listing them instead")
		}
		r.podStore = store
	})
	if r.podStore != nil {
		return r.podStore.ready(ns, sel)
	}
	var list corev1.PodList
	if err := r.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel},
		client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	var pods []*corev1.Pod
	for i := range list.Items {
		if p := &list.Items[i]; podScrapable(p) {
			pods = append(pods, p)
		}
	}
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods, nil
}

func podScrapable(p *corev1.Pod) bool {
	return p.DeletionTimestamp.IsZero() && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && podReady(p)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podSelectorIndex indexes each ToolSet by the labels a Pod must carry to
// match its selector (see selectorIndexValues), so that a Pod event looks at
// the few ToolSets that could select it instead of copying every ToolSet of
// its namespace.
const podSelectorIndex = "toolplane.io/pod-selector"

// anyPodLabel indexes a ToolSet whose selector names no label a Pod must
// carry with a given value: every Pod of its namespace is a candidate.
const anyPodLabel = "*"

// selectorIndexValues returns the index values of a ToolSet: "key=value" for
// the first of its matchLabels, else one for each value of its first In
// expression, else anyPodLabel. Any Pod the selector matches carries a label
// among them.
func selectorIndexValues(obj client.Object) []string {
	ts, ok := obj.(*v1alpha1.ToolSet)
	if !ok {
		return nil
	}
	sel := ts.Spec.Selector
	if len(sel.MatchLabels) > 0 {
		k := slices.Min(slices.Collect(maps.Keys(sel.MatchLabels)))
		return []string{k + "=" + sel.MatchLabels[k]}
	}
	for _, e := range sel.MatchExpressions {
		if e.Operator == metav1.LabelSelectorOpIn && len(e.Values) > 0 {
			values := make([]string, 0, len(e.Values))
			for _, v := range e.Values {
				values = append(values, e.Key+"="+v)
			}
			return values
		}
	}
	return []string{anyPodLabel}
}

// toolSetsForPod maps a Pod to the ToolSets of its namespace whose selector
// matches it. It reads the cache through podSelectorIndex without copying:
// nothing here may change what it lists.
func (r *ToolSetReconciler) toolSetsForPod(ctx context.Context, obj client.Object) []reconcile.Request {
	r.podEvents.bump(obj.GetNamespace())
	podLabels := obj.GetLabels()
	keys := make([]string, 0, len(podLabels)+1)
	for k, v := range podLabels {
		keys = append(keys, k+"="+v)
	}
	keys = append(keys, anyPodLabel)
	seen := map[types.NamespacedName]bool{}
	var reqs []reconcile.Request
	for _, key := range keys {
		var list v1alpha1.ToolSetList
		if err := r.Client.List(ctx, &list, client.InNamespace(obj.GetNamespace()),
			client.MatchingFields{podSelectorIndex: key}, client.UnsafeDisableDeepCopy); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Failed to list ToolSets for a Pod", "pod", client.ObjectKeyFromObject(obj))
			return nil
		}
		for i := range list.Items {
			ts := &list.Items[i]
			name := client.ObjectKeyFromObject(ts)
			if seen[name] {
				continue
			}
			seen[name] = true
			sel, err := metav1.LabelSelectorAsSelector(&ts.Spec.Selector)
			if err != nil || !sel.Matches(labels.Set(podLabels)) {
				continue
			}
			reqs = append(reqs, reconcile.Request{NamespacedName: name})
		}
	}
	return reqs
}

// podScrapeChanged passes the Pod updates that change what is scraped:
// readiness, address, labels, ports or deletion. Status heartbeats and the
// like do not cost a scrape.
var podScrapeChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, okO := e.ObjectOld.(*corev1.Pod)
		n, okN := e.ObjectNew.(*corev1.Pod)
		if !okO || !okN {
			return true
		}
		return podScrapable(o) != podScrapable(n) ||
			o.Status.PodIP != n.Status.PodIP ||
			!labels.Equals(o.Labels, n.Labels) ||
			!slices.EqualFunc(o.Spec.Containers, n.Spec.Containers, func(a, b corev1.Container) bool {
				return slices.Equal(a.Ports, b.Ports)
			})
	},
}
