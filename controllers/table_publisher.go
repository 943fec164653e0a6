package controllers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/controllers/ownership"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// Defaults of a [TablePublisher].
const (
	DefaultTableNamespace = "toolplane-system"
	DefaultTableName      = "toolplane-tools"
	// DefaultRestoreTimeout bounds how long entries read back from the
	// table at start are kept for ToolSets that have not offered yet. It
	// leaves every ToolSet a first scrape, at the default 5s timeout, behind
	// a full queue of other scrapes.
	DefaultRestoreTimeout = 2 * time.Minute
	// DefaultTableDebounce is the quiet time that ends a burst of changes.
	DefaultTableDebounce = 200 * time.Millisecond
	// DefaultTableMaxDelay bounds how long a burst can hold back a write.
	DefaultTableMaxDelay = 2 * time.Second
	// DefaultTablePaceBytes is the stored size of a table written at most
	// once a DefaultTableMaxDelay under a stream of changes: about 512 KiB
	// of the table's ConfigMaps a second, at 5,000 ToolSets of 10 tools.
	DefaultTablePaceBytes = 1 << 20
	// DefaultShutdownFlushTimeout bounds the write of a burst still pending
	// when the manager stops, within the default terminationGracePeriod.
	DefaultShutdownFlushTimeout = 5 * time.Second
)

// TableManagedByLabel marks every ConfigMap of the table, so that leftover
// parts are told apart from ConfigMaps that merely share the name pattern.
const (
	TableManagedByLabel = "app.kubernetes.io/managed-by"
	tableManagedBy      = "toolplane"
)

// ErrInvalidOffer means an [Offer] cannot be recorded: it names no ToolSet,
// or offers a name twice.
var ErrInvalidOffer = errors.New("controllers: invalid offer")

// TablePublisher is the [Publisher] of the operator: it keeps the claims of
// every ToolSet and the ownership ledger, which changes only as
// [ownership.Decide] says (the rule, the policies and the budget at once),
// and writes the ledger's entries as the tool table to ConfigMaps. The
// verdicts an offer returns are final: a name Owned is in the next table,
// and a name the budget denies is not owned at all.
//
// Ownership is sticky: the owner keeps a name for as long as it offers it
// (stale tools included) and no policy forbids it; other claimants are told
// the owner. When the owner lets go, by dropping the name, offering nothing
// or being withdrawn, the earliest-created remaining permitted claimant takes
// the name, ties broken by namespace/name (see [ownership.Rule]).
//
// The published table is the only durable state. At start the publisher
// reads it back: each entry's ToolSet, if it still exists, owns the name
// again and its entry is kept until it offers (or retains it), is withdrawn,
// or RestoreTimeout passes after the caches have synced. A name without an
// owner (its owner is gone or let it go, or the old leader never wrote it) is
// not handed to whoever is reconciled first: it stays Pending until every
// ToolSet that existed at start has been heard from (or the timeout passes),
// and then goes by the rule. So a restart
// or a leader failover moves no owner except by the rule, and never
// publishes a smaller table than the one it found. Offer, Retain and
// Withdraw wait until that read is done.
//
// It is a [manager.Runnable] that runs on the leader only. Set the exported
// fields before the manager starts; zero values take the defaults.
type TablePublisher struct {
	// Client writes the table's ConfigMaps, only in Namespace.
	Client client.Client
	// APIReader reads the table and lists ToolSets, uncached so that the
	// publisher compares against what is stored now. Client if nil.
	APIReader client.Reader
	// Namespace and Name locate the table: ConfigMap Name, with further
	// parts Name-1, Name-2, … when it is split (see [spec.EncodeTable]).
	Namespace string
	Name      string
	// RestoreTimeout bounds how long, from when the caches have synced,
	// restored entries are kept for ToolSets that have not offered since
	// start, and names read back wait for every ToolSet to be heard from.
	RestoreTimeout time.Duration
	// CacheSynced waits until the caches the ToolSet reconciler reads have
	// synced and reports whether they did before ctx was done. The restore
	// window starts then. SetupWithManager sets it from the manager's cache;
	// nil means at once.
	CacheSynced func(ctx context.Context) bool
	// WatchNamespaces, if not empty, are the only namespaces whose ToolSets
	// count: the read-back lists ToolSets there alone (the operator may have
	// no right to list them elsewhere), and entries of ToolSets elsewhere are
	// dropped from the table as if those ToolSets were gone.
	WatchNamespaces []string
	// WaitForPolicies holds every hand-over of a name until the first
	// SetPolicies call, so that a name a policy reserves is never handed to
	// a namespace the policy forbids while the policies are not yet known.
	// Whoever sets it must call SetPolicies once the policies are known,
	// even when there are none.
	WaitForPolicies bool
	// Debounce and MaxDelay coalesce bursts: the table is written once no
	// change came for Debounce, and at most MaxDelay after the first change;
	// and, while changes keep coming, not sooner after the last write than
	// MaxDelay times the table's stored size over PaceBytes (at most
	// MaxDelay). No change waits longer than MaxDelay; a stream of them is
	// written once a MaxDelay at most when the table is PaceBytes or more,
	// so that the API server takes about PaceBytes of the table a MaxDelay
	// however the changes fall, and a small table's as they come.
	Debounce time.Duration
	MaxDelay time.Duration
	// PaceBytes is DefaultTablePaceBytes if zero.
	PaceBytes int
	// ShutdownFlushTimeout bounds the write, when the manager stops, of a
	// burst still pending (DefaultShutdownFlushTimeout if zero), so that a
	// graceful stop publishes what the ToolSets were told. Writes carry the
	// resourceVersion they were computed from, so a replica that lost the
	// lease meanwhile fails them rather than overwrite the new leader's.
	ShutdownFlushTimeout time.Duration
	// Budget caps the tools of each namespace and the table's bytes, inside
	// the ownership rule (ownership.Decide), when a ToolSet offers: a claim
	// past it is Denied (OverBudget) and its name passes to the next
	// permitted claimant, if any. The table's JSON is capped at what
	// readers accept (spec.MaxTableEntriesBytes) whatever it says, and at
	// what the encoder lays out, and its gzipped bytes at what the part
	// ConfigMaps hold (see table_publisher_budget.go).
	Budget ownership.Budget
	// MaxTableParts bounds the ConfigMaps of the table, the base included
	// (2 to spec.MaxTableParts; zero for spec.MaxTableParts): set it to the
	// parts the agents' projected volumes mount. Tools that would not fit
	// are Denied (OverBudget).
	MaxTableParts int
	// Recorder records the table's write failures as events on its
	// ConfigMap; SetupWithManager sets it.
	Recorder events.EventRecorder
	// PartGracePeriod is how long a chunk of a split table is kept after
	// the index stopped naming it, for readers of the previous index
	// (DefaultTablePartGracePeriod if zero).
	PartGracePeriod time.Duration
	// Informers, if set, delivers the events of the table's ConfigMaps: a
	// ConfigMap of the table deleted or changed by anyone but the publisher
	// makes it write the table again at once, so that a part deleted from
	// outside is repaired without waiting for a change of tools.
	// SetupWithManager sets it to the manager's cache.
	Informers informerSource

	// ownWrites holds, by ConfigMap name, the resourceVersion of the
	// publisher's last write of it ("" for a delete): its own writes'
	// events trigger nothing.
	ownWrites sync.Map

	initOnce sync.Once
	tables   tableStore
	loaded   chan struct{}
	kick     chan struct{}
	changed  chan event.TypedGenericEvent[*v1alpha1.ToolSet]
	notify   chan struct{}

	// writeFailing is set while writes of the table fail; only the flush
	// loop uses it.
	writeFailing bool
	// writeDue is set from a change that asks for a write until a flush
	// with none asked after it ends; writeFailed while the last write
	// failed. WriteUnderway reads them.
	writeDue, writeFailed atomic.Bool

	mu sync.Mutex
	// now stamps the ledger's records; time.Now if nil.
	now func() time.Time
	// encodedCeiling, when positive, bounds the compressed weight of the
	// table: set when a table did not fit its ConfigMaps, lowered until one
	// does, cleared once the table fits without it (see tighten).
	encodedCeiling int64
	// layoutCeiling, when positive, bounds the table's JSON at what the
	// encoder lays out in the segments its index names: set when a table's
	// JSON did not lay out, cleared once the claims fit under it (see
	// tightenLayout); layoutParts are the ConfigMaps it was learnt with.
	layoutCeiling int64
	layoutParts   int
	// claims are the ToolSets that offer at least one name.
	claims map[types.NamespacedName]*claim
	// index keeps the claims by name and the ledger, which records the
	// owner of every owned name (published or about to be), as the rule
	// and the budget decide them (see ownership.Index); ledger is its
	// ledger, read under p.mu.
	index  *ownership.Index
	ledger ownership.Ledger
	// policiesSet: SetPolicies was called at least once.
	policiesSet bool
	// window is the restore window (see ownership.Window): while it is
	// open, restored entries are kept for the ToolSets not heard from since
	// start and a name without an owner is handed out only once they all
	// have spoken; while it holds writes, the table could not be read back
	// and nothing is written until then.
	window  ownership.Window
	pending map[types.NamespacedName]struct{}
	// decidedFully: the last decision was made with Decide over every
	// claim, and changed offers wait until decideAfter; deferred are those
	// waiting, by ToolSet, and batched is closed once they are decided
	// (see table_publisher_batch.go).
	decidedFully bool
	decideAfter  time.Time
	deferred     map[types.NamespacedName]*deferredOffer
	batched      chan struct{}
	// inTable is the table readers see: for every name of the table last
	// stored (or read back at start), its entry, which names the ToolSet
	// and its UID (see storedOwnerOf). A verdict Owned is Published in
	// status only once its name is in it under the ToolSet (see Written),
	// and every ToolSet whose names in it change is told through Changed.
	// The entries are the claims' own (or, for a ToolSet gone at start, a
	// copy of the entry read back), which nothing modifies: a pointer is a
	// sixth of the two names and the UID, 2.7 to 5.4 MB less at 50,000
	// names.
	inTable map[string]*spec.TableTool
	// unwritten are the ToolSets that Written told of a name they own that
	// the table readers see lacks: the write that adds one tells them.
	unwritten map[types.NamespacedName]struct{}
	// synced is set once the caches have synced after start; the restore
	// window runs from then.
	synced atomic.Bool
	// parts, if positive, overrides MaxTableParts: the specs lower it to
	// reach a full table with few tools.
	parts atomic.Int32
	// gauges, if set, replace the registered gauges of the table: a spec's
	// own (see tableGauges).
	gauges *tableGauges
}

var (
	_ Publisher                      = (*TablePublisher)(nil)
	_ manager.Runnable               = (*TablePublisher)(nil)
	_ manager.LeaderElectionRunnable = (*TablePublisher)(nil)
)

func (p *TablePublisher) init() {
	p.initOnce.Do(func() {
		p.loaded = make(chan struct{})
		p.kick = make(chan struct{}, 1)
		p.notify = make(chan struct{}, 1)
		p.changed = make(chan event.TypedGenericEvent[*v1alpha1.ToolSet])
		p.claims = make(map[types.NamespacedName]*claim)
		p.index = ownership.NewIndex()
		p.index.Budget, p.index.Hold, p.index.Now = p.budget, p.holds, p.clock
		p.index.Weigh = func(ts types.NamespacedName, i int) int64 { return p.claims[ts].encodedWeight(i) }
		p.ledger = p.index.Ledger()
		p.pending = make(map[types.NamespacedName]struct{})
		p.inTable = make(map[string]*spec.TableTool)
		p.unwritten = make(map[types.NamespacedName]struct{})
	})
}

func (p *TablePublisher) namespace() string { return orDefault(p.Namespace, DefaultTableNamespace) }
func (p *TablePublisher) name() string      { return orDefault(p.Name, DefaultTableName) }

func (p *TablePublisher) reader() client.Reader {
	if p.APIReader != nil {
		return p.APIReader
	}
	return p.Client
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// NeedLeaderElection reports that only the leader publishes.
func (p *TablePublisher) NeedLeaderElection() bool { return true }

// SetupWithManager adds the publisher to mgr.
func (p *TablePublisher) SetupWithManager(mgr ctrl.Manager) error {
	if p.Client == nil {
		p.Client = mgr.GetClient()
	}
	if p.Recorder == nil {
		p.Recorder = mgr.GetEventRecorder("toolplane-table")
	}
	if p.APIReader == nil {
		p.APIReader = mgr.GetAPIReader()
	}
	if p.Informers == nil {
		p.Informers = mgr.GetCache()
	}
	if p.CacheSynced == nil {
		c := mgr.GetCache()
		p.CacheSynced = func(ctx context.Context) bool {
			// The informers the ToolSet reconciler watches through; getting
			// one starts it and waits for it to sync.
			for _, obj := range []client.Object{&v1alpha1.ToolSet{}, &corev1.Pod{}} {
				if _, err := c.GetInformer(ctx, obj); err != nil {
					return false
				}
			}
			return c.WaitForCacheSync(ctx)
		}
	}
	return mgr.Add(p)
}

// waitSynced waits for CacheSynced, if set, and reports whether the caches
// synced before ctx was done.
func (p *TablePublisher) waitSynced(ctx context.Context) bool {
	if p.CacheSynced == nil {
		return true
	}
	return p.CacheSynced(ctx)
}

// Changed implements [Publisher]. The channel is never closed.
func (p *TablePublisher) Changed() <-chan event.TypedGenericEvent[*v1alpha1.ToolSet] {
	p.init()
	return p.changed
}

// WriteUnderway reports whether a write of the table is due or in flight,
// the last one having not failed: a status that awaits the write of a new
// name may wait for it (see holdForWrite) rather than say AwaitingWrite
// first. A write held by the restore window, or failing, is not under way.
func (p *TablePublisher) WriteUnderway() bool {
	return p.writeDue.Load() && !p.writeFailed.Load()
}

// ReadyzCheck is the manager's readiness check. A replica that leads (once
// elected is closed; at once without leader election) is ready when the
// publisher has read the table back and the caches have synced, so that a
// leader still restoring the table is never reported ready. A standby replica
// is ready at once: only the leader publishes, a standby serves nothing, and
// holding it not-ready would stall a rolling update of several replicas.
func (p *TablePublisher) ReadyzCheck(elected <-chan struct{}) healthz.Checker {
	return func(*http.Request) error {
		select {
		case <-elected:
		default:
			return nil
		}
		p.init()
		select {
		case <-p.loaded:
		default:
			return errors.New("the tool table has not been read back yet")
		}
		if !p.synced.Load() {
			return errors.New("the caches have not synced yet")
		}
		return nil
	}
}

// waitLoaded blocks until the table has been read back at start.
func (p *TablePublisher) waitLoaded(ctx context.Context) error {
	p.init()
	select {
	case <-p.loaded:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the tool table to be read back: %w", ctx.Err())
	}
}

// Start implements [manager.Runnable]: it reads the table back, then writes
// it whenever it changes, until ctx is done.
func (p *TablePublisher) Start(ctx context.Context) error {
	p.init()
	log := ctrl.LoggerFrom(ctx).WithName("table-publisher").WithValues("namespace", p.namespace(), "name", p.name())
	ctx = ctrl.LoggerInto(ctx, log)
	if p.tables == nil {
		grace := orDefault(p.PartGracePeriod, DefaultTablePartGracePeriod)
		store := &configMapTable{
			client: p.Client, reader: p.reader(), namespace: p.namespace(), name: p.name(),
			grace: grace, collectDelay: grace / 2,
		}
		store.maxParts = p.maxParts
		store.wrote = func(name, rv string) { p.ownWrites.Store(name, rv) }
		store.stored = p.stored
		store.gauges = p.gauges
		p.tables = store
	}

	// Reading back is retried until it succeeds: answering offers from an
	// empty state would hand out names that the table gives to others.
	backoff := workqueue.NewTypedItemExponentialFailureRateLimiter[string](500*time.Millisecond, 30*time.Second)
	for {
		err := p.load(ctx)
		if err == nil {
			break
		}
		log.Error(err, "Reading back the tool table failed; retrying")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff.When("load")):
		}
	}
	close(p.loaded)

	go p.pumpChanged(ctx)
	if err := p.watchTable(ctx); err != nil {
		// The table is still written on every change; only repairs wait.
		log.Error(err, "Watching the ConfigMaps of the tool table failed; a part deleted from outside is written again at the next change")
	}

	// The restore window runs from when the caches have synced: before, no
	// ToolSet can be reconciled, so waiting then would eat into the window.
	synced := make(chan struct{})
	go func() {
		if p.waitSynced(ctx) {
			close(synced)
		}
	}()
	var restoreTimer *time.Timer
	var restoreC <-chan time.Time
	defer func() {
		if restoreTimer != nil {
			restoreTimer.Stop()
		}
	}()
	flushTimer := time.NewTimer(0)
	<-flushTimer.C
	defer flushTimer.Stop()
	var burstStart time.Time // zero: no write pending
	var lastWrite time.Time  // the end of the last write
	var pace time.Duration   // the least time from lastWrite to the next
	var retryAt time.Time    // after a failed write, when its backoff ends
	debounce, maxDelay := orDefault(p.Debounce, DefaultTableDebounce), orDefault(p.MaxDelay, DefaultTableMaxDelay)
	for {
		select {
		case <-ctx.Done():
			p.flushPending(ctx, burstStart)
			return nil
		case <-synced:
			synced = nil
			p.synced.Store(true)
			p.pruneAwaiting(ctx)
			restoreTimer = time.NewTimer(orDefault(p.RestoreTimeout, DefaultRestoreTimeout))
			restoreC = restoreTimer.C
		case <-restoreC:
			p.endRestore(ctx)
		case <-p.kick:
			p.writeDue.Store(true)
			now := time.Now()
			if burstStart.IsZero() {
				burstStart = now
			}
			// Quiet for debounce ends a burst, but not within pace of the
			// last write: under a stream of changes (bench-scale's churn
			// finds 16 a second at 5,000 ToolSets) a gap of debounce came
			// every second or so, in no pattern, and each write of a large
			// table rewrites most of its parts. A change that came after
			// the last write waits no longer than maxDelay all the same.
			wait := debounce
			if paced := lastWrite.Add(pace).Sub(now); paced > wait {
				wait = paced
			}
			wait = min(wait, burstStart.Add(maxDelay).Sub(now))
			// After a failed write, no change brings the retry forward:
			// the burst's deadline had passed, and each change of a
			// tenant's tools retried at once, against an API server
			// failing them (32 tries in 2s in the spec).
			if backoffLeft := retryAt.Sub(now); backoffLeft > wait {
				wait = backoffLeft
			}
			flushTimer.Reset(wait)
		case <-flushTimer.C:
			wait, err := p.flush(ctx)
			if err != nil && ctx.Err() != nil {
				p.flushPending(ctx, time.Now())
				return nil
			}
			p.wroteTable(err)
			p.writeFailed.Store(err != nil)
			// A change during the flush kicked again: its write is due.
			p.writeDue.Store(err == nil && len(p.kick) > 0)
			if err != nil {
				log.Error(err, "Writing the tool table failed; retrying")
				d := backoff.When("flush")
				retryAt = time.Now().Add(d)
				flushTimer.Reset(d)
				continue
			}
			backoff.Forget("flush")
			burstStart, lastWrite, retryAt = time.Time{}, time.Now(), time.Time{}
			pace = time.Duration(float64(maxDelay) * min(1, float64(p.tables.storedBytes())/float64(orDefault(p.PaceBytes, DefaultTablePaceBytes))))
			if wait > 0 {
				flushTimer.Reset(wait)
			}
		}
	}
}

// flushPending writes, within ShutdownFlushTimeout, a burst of changes
// still pending when ctx ended: what the ToolSets were told is published.
func (p *TablePublisher) flushPending(ctx context.Context, burstStart time.Time) {
	select {
	case <-p.kick:
	default:
		if burstStart.IsZero() {
			return
		}
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), orDefault(p.ShutdownFlushTimeout, DefaultShutdownFlushTimeout))
	defer cancel()
	_, err := p.flush(wctx)
	p.wroteTable(err)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Writing the tool table's pending changes on shutdown failed; the next leader writes them")
		return
	}
	ctrl.LoggerFrom(ctx).Info("Wrote the tool table's pending changes on shutdown")
}

// pumpChanged delivers pending Changed events without ever blocking an offer
// on a slow reader.
func (p *TablePublisher) pumpChanged(ctx context.Context) {
	for {
		p.mu.Lock()
		batch := slices.SortedFunc(maps.Keys(p.pending), compareNamespacedName)
		clear(p.pending)
		p.mu.Unlock()
		for _, ts := range batch {
			ev := event.TypedGenericEvent[*v1alpha1.ToolSet]{Object: &v1alpha1.ToolSet{
				ObjectMeta: metav1.ObjectMeta{Namespace: ts.Namespace, Name: ts.Name},
			}}
			select {
			case p.changed <- ev:
			case <-ctx.Done():
				return
			}
		}
		select {
		case <-p.notify:
		case <-ctx.Done():
			return
		}
	}
}

// load reads the published table back into ownership and the ToolSets'
// entries.
func (p *TablePublisher) load(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx)
	table, err := p.tables.read(ctx)
	unreadable := false
	if errors.Is(err, errTableUnreadable) {
		// A write cut short by an older operator, which rewrote parts in
		// place, can leave parts of two revisions. Readers keep their last
		// good table, so the publisher holds its first write until every
		// ToolSet has offered rather than publish less.
		log.Error(err, "The stored tool table cannot be read back; holding writes until every ToolSet has offered")
		unreadable, err = true, nil
	}
	if err != nil {
		return err
	}

	exists, err := p.listToolSets(ctx)
	if err != nil {
		return err
	}
	p.restore(ctx, table, unreadable, exists)
	return nil
}

// toolSetIdentity is what tells one ToolSet object from another of its name.
type toolSetIdentity struct {
	created metav1.Time
	uid     types.UID
}

// listToolSets lists the ToolSets that count, in every namespace or in
// WatchNamespaces, with their creation times and UIDs.
func (p *TablePublisher) listToolSets(ctx context.Context) (map[types.NamespacedName]toolSetIdentity, error) {
	namespaces := p.WatchNamespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	exists := make(map[types.NamespacedName]toolSetIdentity)
	for _, ns := range namespaces {
		var list v1alpha1.ToolSetList
		if err := p.reader().List(ctx, &list, client.InNamespace(ns)); err != nil {
			return nil, fmt.Errorf("listing ToolSets: %w", err)
		}
		for _, ts := range list.Items {
			exists[types.NamespacedName{Namespace: ts.Namespace, Name: ts.Name}] = toolSetIdentity{created: ts.CreationTimestamp, uid: ts.UID}
		}
	}
	return exists, nil
}

// table returns the table as the publisher would write it now, sorted, and
// false while writes are held: the entries of every name in the ledger.
// The budget was applied when the ledger was decided, so every verdict
// Owned is in it and no other.
func (p *TablePublisher) table() (*spec.Table, bool) {
	owned, records, ok := p.tableTools()
	if !ok {
		return nil, false
	}
	tools := make([]spec.TableTool, len(owned))
	for i, t := range owned {
		tools[i] = *t
	}
	return &spec.Table{Tools: tools, Records: records}, true
}

// tableTools is table's tools, sorted, by reference, and their ledger
// records in the same order: the tools are the claims' tools, which are
// never modified, so they may be read once p.mu is released. A write
// encodes them where they are rather than copy the table. They are sorted
// after p.mu is released: at 50,000 names the sort is most of the work,
// and every offer waits for p.mu.
func (p *TablePublisher) tableTools() ([]*spec.TableTool, []spec.TableRecord, bool) {
	var owned ownedEntries
	if !func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.window.HoldsWrites() {
			return false
		}
		owned.tools = make([]*spec.TableTool, 0, len(p.ledger))
		owned.records = make([]spec.TableRecord, 0, len(p.ledger))
		for name, rec := range p.ledger {
			if t, ok := findTool(p.claims[rec.Owner].toolsOrNil(), name); ok {
				// The ledger's records go beside the table, so that a
				// restart keeps since when and why each owner holds its
				// names.
				owned.tools = append(owned.tools, t)
				owned.records = append(owned.records, spec.TableRecord{Since: rec.Since, Why: string(rec.Why)})
			}
		}
		return true
	}() {
		return nil, nil, false
	}
	sort.Sort(owned)
	return owned.tools, owned.records, true
}

// ownedEntries sorts the table's entries by name, and their records with
// them, in place. Names in the ledger are unique.
type ownedEntries struct {
	tools   []*spec.TableTool
	records []spec.TableRecord
}

func (o ownedEntries) Len() int           { return len(o.tools) }
func (o ownedEntries) Less(i, j int) bool { return o.tools[i].Name < o.tools[j].Name }
func (o ownedEntries) Swap(i, j int) {
	o.tools[i], o.tools[j] = o.tools[j], o.tools[i]
	o.records[i], o.records[j] = o.records[j], o.records[i]
}

// maxTableTrims bounds how often one flush lowers the compressed ceiling
// of a table that does not fit its ConfigMaps: each lowers it by a sixth
// at least, so the last keeps a fifth of the first's weight.
const maxTableTrims = 10

// flush writes the table if it differs from what is stored, and finishes
// what the store left for after the grace period. A positive wait asks for
// another flush after it. A table too large for its ConfigMaps, whatever is
// stored, is not retried as it is: the budget denies the tools of the
// namespace that weighs most compressed until it fits, so that one tenant's
// incompressible tools never stop the table for everyone.
func (p *TablePublisher) flush(ctx context.Context) (wait time.Duration, err error) {
	for trims := 0; ; trims++ {
		tools, records, ok := p.tableTools()
		if !ok {
			return 0, nil
		}
		wait, err = p.tables.writeTools(ctx, tools, records)
		if !overCapacity(err) || trims == maxTableTrims {
			if err == nil {
				p.relax()
			}
			return wait, err
		}
		if le := (*spec.TableLayoutError)(nil); errors.As(err, &le) {
			ctrl.LoggerFrom(ctx).Info("The tool table's JSON does not lay out in its segments; denying the tools of the namespace that weighs most", "tools", len(tools), "reason", err.Error())
			p.tightenLayout(le)
			continue
		}
		ctrl.LoggerFrom(ctx).Info("The tool table does not fit its ConfigMaps; denying the tools that weigh most compressed", "tools", len(tools), "reason", err.Error())
		p.tighten()
	}
}
