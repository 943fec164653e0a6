package controllers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/toolplane/toolplane/api/v1alpha1"
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

// TablePublisher is the [Publisher] of the operator: it decides which
// ToolSet owns each published name and writes the tool table to ConfigMaps.
//
// Ownership is sticky: the owner keeps a name for as long as it offers it
// (stale tools included); other claimants are told the owner. When the owner
// lets go, by dropping the name, offering nothing or being withdrawn, the
// earliest-created remaining claimant takes the name, ties broken by
// namespace/name.
//
// The published table is the only durable state. At start the publisher
// reads it back: each entry's ToolSet, if it still exists, owns the name
// again and its entry is kept until it offers, is withdrawn, or
// RestoreTimeout passes. So a restart or a leader failover moves no owner and
// never publishes a smaller table than the one it found. Offer and Withdraw
// wait until that read is done.
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
	// RestoreTimeout bounds how long restored entries are kept for ToolSets
	// that have not offered since start.
	RestoreTimeout time.Duration
	// Debounce and MaxDelay coalesce bursts: the table is written once no
	// change came for Debounce, and at most MaxDelay after the first change.
	Debounce time.Duration
	MaxDelay time.Duration
	// PartGracePeriod is how long a chunk of a split table is kept after
	// the index stopped naming it, for readers of the previous index
	// (DefaultTablePartGracePeriod if zero).
	PartGracePeriod time.Duration

	initOnce sync.Once
	tables   tableStore
	loaded   chan struct{}
	kick     chan struct{}
	changed  chan event.TypedGenericEvent[*v1alpha1.ToolSet]
	notify   chan struct{}

	mu sync.Mutex
	// claims are the ToolSets that offer at least one name.
	claims map[types.NamespacedName]*claim
	// claimants index claims by name; owners holds the owner of every name
	// that has a claimant.
	claimants map[string]map[types.NamespacedName]struct{}
	owners    map[string]types.NamespacedName
	// awaiting are the ToolSets whose restored entries are kept until they
	// offer. While holdWrites, the table could not be read back and nothing
	// is written until they all have offered.
	awaiting   map[types.NamespacedName]struct{}
	restoring  bool
	holdWrites bool
	conflicts  int
	pending    map[types.NamespacedName]struct{}
}

// claim is what one ToolSet offers.
type claim struct {
	created metav1.Time
	tools   map[string]spec.TableTool
	// restored: the tools were read back from the table, and the ToolSet
	// has not offered since start.
	restored bool
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
		p.claimants = make(map[string]map[types.NamespacedName]struct{})
		p.owners = make(map[string]types.NamespacedName)
		p.awaiting = make(map[types.NamespacedName]struct{})
		p.pending = make(map[types.NamespacedName]struct{})
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
	if p.APIReader == nil {
		p.APIReader = mgr.GetAPIReader()
	}
	return mgr.Add(p)
}

// Changed implements [Publisher]. The channel is never closed.
func (p *TablePublisher) Changed() <-chan event.TypedGenericEvent[*v1alpha1.ToolSet] {
	p.init()
	return p.changed
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

// Offer implements [Publisher]. It blocks until the table has been read back
// after start, or ctx is done.
func (p *TablePublisher) Offer(ctx context.Context, o Offer) (map[string]types.NamespacedName, error) {
	if o.ToolSet.Name == "" || o.ToolSet.Namespace == "" {
		return nil, fmt.Errorf("%w: no ToolSet", ErrInvalidOffer)
	}
	tools := make(map[string]spec.TableTool, len(o.Tools))
	ref := spec.ObjectReference{Namespace: o.ToolSet.Namespace, Name: o.ToolSet.Name}
	for _, t := range o.Tools {
		if _, dup := tools[t.Name]; dup {
			return nil, fmt.Errorf("%w: %s offers %q twice", ErrInvalidOffer, o.ToolSet, t.Name)
		}
		// The table names the ToolSet that owns each entry; it is not the
		// offerer's to choose.
		t.ToolSet = ref
		tools[t.Name] = t
	}
	if err := p.waitLoaded(ctx); err != nil {
		return nil, err
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	var old map[string]spec.TableTool
	if c := p.claims[o.ToolSet]; c != nil {
		old = c.tools
	}
	p.setClaim(o.ToolSet, &claim{created: o.Created, tools: tools})
	p.offered(o.ToolSet)
	dirty := false
	for name := range union(old, tools) {
		if p.resolve(name, o.ToolSet) {
			dirty = true
		}
		// A new entry, or a changed one, of a name this ToolSet owns.
		if p.owners[name] == o.ToolSet && !reflect.DeepEqual(old[name], tools[name]) {
			dirty = true
		}
	}
	if dirty {
		p.kickLocked()
	}
	owners := make(map[string]types.NamespacedName, len(tools))
	for name := range tools {
		owners[name] = p.owners[name]
	}
	setConflictsMetric(p.conflicts)
	return owners, nil
}

// Withdraw implements [Publisher]. It blocks until the table has been read
// back after start, or ctx is done.
func (p *TablePublisher) Withdraw(ctx context.Context, toolSet types.NamespacedName) error {
	if err := p.waitLoaded(ctx); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.offered(toolSet)
	p.release(toolSet, toolSet)
	setConflictsMetric(p.conflicts)
	return nil
}

// Published returns the entries of the table that toolSet owns, sorted by
// name. Right after start they are the entries read back from the table,
// which lets the ToolSet reconciler hold a ToolSet's last published tools
// through a scrape outage that spans a restart. It blocks like Offer.
func (p *TablePublisher) Published(ctx context.Context, toolSet types.NamespacedName) ([]spec.TableTool, error) {
	if err := p.waitLoaded(ctx); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.claims[toolSet]
	if c == nil {
		return nil, nil
	}
	var out []spec.TableTool
	for name, t := range c.tools {
		if p.owners[name] == toolSet {
			out = append(out, t)
		}
	}
	spec.SortTableTools(out)
	return out, nil
}

// release drops every claim of toolSet and hands its names over; actor is the
// ToolSet whose action caused it (none for a restore that timed out).
func (p *TablePublisher) release(toolSet, actor types.NamespacedName) {
	c := p.claims[toolSet]
	if c == nil {
		return
	}
	p.setClaim(toolSet, nil)
	for name := range c.tools {
		p.resolve(name, actor)
	}
	p.kickLocked()
}

// setClaim replaces the claim of toolSet (nil removes it) and keeps the
// claimants index and the conflict count in step.
func (p *TablePublisher) setClaim(toolSet types.NamespacedName, c *claim) {
	if old := p.claims[toolSet]; old != nil {
		for name := range old.tools {
			p.conflicts -= max(len(p.claimants[name])-1, 0)
			delete(p.claimants[name], toolSet)
			p.conflicts += max(len(p.claimants[name])-1, 0)
			if len(p.claimants[name]) == 0 {
				delete(p.claimants, name)
			}
		}
		delete(p.claims, toolSet)
	}
	if c == nil || len(c.tools) == 0 {
		return
	}
	p.claims[toolSet] = c
	for name := range c.tools {
		set := p.claimants[name]
		if set == nil {
			set = make(map[types.NamespacedName]struct{})
			p.claimants[name] = set
		}
		p.conflicts -= max(len(set)-1, 0)
		set[toolSet] = struct{}{}
		p.conflicts += max(len(set)-1, 0)
	}
}

// resolve settles the owner of name after a change by actor and reports
// whether it moved. The owner keeps a name it still claims; otherwise the
// earliest-created claimant takes it. Every other claimant sees a new owner,
// so each is told.
func (p *TablePublisher) resolve(name string, actor types.NamespacedName) bool {
	cur, owned := p.owners[name]
	if _, ok := p.claimants[name][cur]; owned && ok {
		return false
	}
	var next types.NamespacedName
	found := false
	for ts := range p.claimants[name] {
		if !found || p.earlier(ts, next) {
			next, found = ts, true
		}
	}
	if !found {
		delete(p.owners, name)
		return owned
	}
	p.owners[name] = next
	for ts := range p.claimants[name] {
		if ts != actor {
			p.pending[ts] = struct{}{}
		}
	}
	select {
	case p.notify <- struct{}{}:
	default:
	}
	return true
}

// earlier orders claimants: creation time, then namespace/name.
func (p *TablePublisher) earlier(a, b types.NamespacedName) bool {
	ta, tb := p.claims[a].created, p.claims[b].created
	if !ta.Equal(&tb) {
		return ta.Before(&tb)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

// offered records that toolSet has spoken since start: its restored entries
// are now replaced by what it offers.
func (p *TablePublisher) offered(toolSet types.NamespacedName) {
	if c := p.claims[toolSet]; c != nil {
		c.restored = false
	}
	if _, ok := p.awaiting[toolSet]; !ok {
		return
	}
	delete(p.awaiting, toolSet)
	if len(p.awaiting) == 0 && p.restoring {
		p.restoring = false
		if p.holdWrites {
			p.holdWrites = false
			p.kickLocked()
		}
	}
}

// endRestore drops the restored entries of ToolSets that did not offer in
// time.
func (p *TablePublisher) endRestore(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.restoring {
		return
	}
	log := ctrl.LoggerFrom(ctx)
	for _, ts := range slices.SortedFunc(maps.Keys(p.awaiting), compareNamespacedName) {
		if c := p.claims[ts]; c != nil && c.restored {
			log.Info("Dropped restored tools of a ToolSet that did not offer in time", "toolSet", ts, "tools", len(c.tools))
			p.release(ts, types.NamespacedName{})
		}
	}
	clear(p.awaiting)
	p.restoring, p.holdWrites = false, false
	setConflictsMetric(p.conflicts)
	p.kickLocked()
}

func (p *TablePublisher) kickLocked() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

func compareNamespacedName(a, b types.NamespacedName) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

func union(a, b map[string]spec.TableTool) map[string]struct{} {
	u := make(map[string]struct{}, len(a)+len(b))
	for k := range a {
		u[k] = struct{}{}
	}
	for k := range b {
		u[k] = struct{}{}
	}
	return u
}

// Start implements [manager.Runnable]: it reads the table back, then writes
// it whenever it changes, until ctx is done.
func (p *TablePublisher) Start(ctx context.Context) error {
	p.init()
	log := ctrl.LoggerFrom(ctx).WithName("table-publisher").WithValues("namespace", p.namespace(), "name", p.name())
	ctx = ctrl.LoggerInto(ctx, log)
	if p.tables == nil {
		p.tables = &configMapTable{
			client: p.Client, reader: p.reader(), namespace: p.namespace(), name: p.name(),
			grace: orDefault(p.PartGracePeriod, DefaultTablePartGracePeriod),
		}
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

	restoreTimer := time.NewTimer(orDefault(p.RestoreTimeout, DefaultRestoreTimeout))
	defer restoreTimer.Stop()
	flushTimer := time.NewTimer(0)
	<-flushTimer.C
	defer flushTimer.Stop()
	var burstStart time.Time // zero: no write pending
	debounce, maxDelay := orDefault(p.Debounce, DefaultTableDebounce), orDefault(p.MaxDelay, DefaultTableMaxDelay)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-restoreTimer.C:
			p.endRestore(ctx)
		case <-p.kick:
			now := time.Now()
			if burstStart.IsZero() {
				burstStart = now
			}
			flushTimer.Reset(min(debounce, burstStart.Add(maxDelay).Sub(now)))
		case <-flushTimer.C:
			wait, err := p.flush(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				log.Error(err, "Writing the tool table failed; retrying")
				flushTimer.Reset(backoff.When("flush"))
				continue
			}
			backoff.Forget("flush")
			burstStart = time.Time{}
			if wait > 0 {
				flushTimer.Reset(wait)
			}
		}
	}
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

	var list v1alpha1.ToolSetList
	if err := p.reader().List(ctx, &list); err != nil {
		return fmt.Errorf("listing ToolSets: %w", err)
	}
	exists := make(map[types.NamespacedName]metav1.Time, len(list.Items))
	for _, ts := range list.Items {
		exists[types.NamespacedName{Namespace: ts.Namespace, Name: ts.Name}] = ts.CreationTimestamp
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	restored := make(map[types.NamespacedName]*claim)
	dropped := 0
	if table != nil {
		for _, t := range table.Tools {
			ts := types.NamespacedName{Namespace: t.ToolSet.Namespace, Name: t.ToolSet.Name}
			created, ok := exists[ts]
			if !ok {
				dropped++
				continue
			}
			c := restored[ts]
			if c == nil {
				c = &claim{created: created, tools: make(map[string]spec.TableTool), restored: true}
				restored[ts] = c
			}
			c.tools[t.Name] = t
		}
	}
	for ts, c := range restored {
		p.setClaim(ts, c)
		for name := range c.tools {
			p.owners[name] = ts
		}
		p.awaiting[ts] = struct{}{}
	}
	if unreadable {
		for ts := range exists {
			p.awaiting[ts] = struct{}{}
		}
	}
	p.restoring = len(p.awaiting) > 0
	p.holdWrites = unreadable && p.restoring
	// Write at once what was read back, less the entries of deleted
	// ToolSets; a cluster without a table gets an empty one, so that agents
	// that mount it can start.
	p.kickLocked()
	tools := 0
	if table != nil {
		tools = len(table.Tools)
	}
	log.Info("Read back the tool table", "tools", tools, "toolSets", len(restored), "droppedTools", dropped)
	return nil
}

// table returns the table as the publisher would write it now, sorted, and
// false while writes are held.
func (p *TablePublisher) table() (*spec.Table, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.holdWrites {
		return nil, false
	}
	tools := make([]spec.TableTool, 0, len(p.owners))
	for name, owner := range p.owners {
		tools = append(tools, p.claims[owner].tools[name])
	}
	spec.SortTableTools(tools)
	return &spec.Table{Tools: tools}, true
}

// flush writes the table if it differs from what is stored, and finishes
// what the store left for after the grace period. A positive wait asks for
// another flush after it.
func (p *TablePublisher) flush(ctx context.Context) (wait time.Duration, err error) {
	t, ok := p.table()
	if !ok {
		return 0, nil
	}
	return p.tables.write(ctx, t)
}
