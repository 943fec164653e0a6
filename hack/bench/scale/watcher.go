package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/controllers"
	"github.com/toolplane/toolplane/test/harness"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// tablePartName matches the ConfigMaps of the table: the base and its parts.
var tablePartName = regexp.MustCompile("^" + regexp.QuoteMeta(tableName) + "(-[0-9]+)?$")

// isTablePart reports whether cm is one of the table's ConfigMaps, as the
// manager names and labels them.
func isTablePart(cm *corev1.ConfigMap) bool {
	return cm.Namespace == tableNamespace && tablePartName.MatchString(cm.Name) &&
		cm.Labels[controllers.TableManagedByLabel] == "toolplane"
}

// isLedgerChunk reports whether cm is a chunk of the table's ledger, which
// the manager keeps apart from the table (see spec.TableLedgerChunkKey).
func isLedgerChunk(cm *corev1.ConfigMap) bool {
	_, _, ok := spec.ParseTableLedgerName(tableName, cm.Name)
	return ok && cm.Namespace == tableNamespace && cm.Labels[controllers.TableManagedByLabel] == "toolplane"
}

// isStored reports whether cm is one of the ConfigMaps the manager stores
// the table in: a part of it, or a chunk of its ledger. Writes of both are
// the table's writes.
func isStored(cm *corev1.ConfigMap) bool { return isTablePart(cm) || isLedgerChunk(cm) }

// watcher follows the ToolSets and the table through an informer cache, so
// that waiting adds no load to the API server, and accounts every write of
// the table's ConfigMaps as its watch delivers them: a watch delivers every
// update of an object as an event of its own.
//
// Reads from the cache share its objects (no deep copy of thousands of
// ToolSets or of megabytes of table every time), and the table is decoded
// only when it may have changed, so that watching costs little of the CPU
// that the manager is measured on.
type watcher struct {
	cache cache.Cache
	// changed is poked on every write of the table.
	changed chan struct{}

	mu     sync.Mutex
	writes tableWrites
	// baseAt is when each resourceVersion of the base ConfigMap, which
	// holds the index (the only part rewritten in place), arrived.
	baseAt map[string]time.Time
}

// partWrites counts the writes of one ConfigMap.
type partWrites struct {
	writes int
	bytes  int64
}

// tableWrites counts the writes of the table's ConfigMaps seen so far.
type tableWrites struct {
	// writes are the creates and updates; bytes their stored payload, keys
	// plus values, binaryData counted in base64.
	writes int
	bytes  int64
	// byName are the writes and bytes of each ConfigMap.
	byName map[string]partWrites
	// deletes are the part ConfigMaps deleted.
	deletes int
	// last is when the last write or delete arrived.
	last time.Time
}

func newWatcher(ctx context.Context, cp *harness.ControlPlane) (*watcher, error) {
	ca, err := cache.New(cp.Config, cache.Options{
		Scheme: cp.Scheme,
		ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {Namespaces: map[string]cache.Config{tableNamespace: {}}},
		},
	})
	if err != nil {
		return nil, err
	}
	w := &watcher{cache: ca, changed: make(chan struct{}, 1), baseAt: map[string]time.Time{}}
	w.writes.byName = map[string]partWrites{}
	// Start the informers before anything is created, so that waiting
	// needs no initial list of a thousand objects.
	if _, err := ca.GetInformer(ctx, &v1alpha1.ToolSet{}); err != nil {
		return nil, err
	}
	inf, err := ca.GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
		return nil, err
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if cm, ok := obj.(*corev1.ConfigMap); ok {
				w.wrote(cm)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*corev1.ConfigMap)
			n, ok2 := newObj.(*corev1.ConfigMap)
			// A resync delivers an update with nothing written.
			if ok1 && ok2 && o.ResourceVersion != n.ResourceVersion {
				w.wrote(n)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if cm, ok := obj.(*corev1.ConfigMap); ok && isStored(cm) {
				w.mu.Lock()
				w.writes.deletes++
				w.writes.last = time.Now()
				w.mu.Unlock()
				w.poke()
			}
		},
	}); err != nil {
		return nil, err
	}
	go func() { _ = ca.Start(ctx) }()
	if !ca.WaitForCacheSync(ctx) {
		return nil, errors.New("the watcher's cache did not sync")
	}
	return w, nil
}

func (w *watcher) wrote(cm *corev1.ConfigMap) {
	if !isStored(cm) {
		return
	}
	now := time.Now()
	size := spec.TablePart{Name: cm.Name, Data: cm.Data, BinaryData: cm.BinaryData}.StoredSize()
	w.mu.Lock()
	w.writes.writes++
	w.writes.bytes += int64(size)
	pw := w.writes.byName[cm.Name]
	pw.writes++
	pw.bytes += int64(size)
	w.writes.byName[cm.Name] = pw
	w.writes.last = now
	if cm.Name == tableName {
		w.baseAt[cm.ResourceVersion] = now
	}
	w.mu.Unlock()
	w.poke()
}

func (w *watcher) poke() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// tableWrites returns the writes of the table seen so far.
func (w *watcher) tableWrites() tableWrites {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.writes
	out.byName = maps.Clone(w.writes.byName)
	return out
}

// arrived returns when the base ConfigMap's version rv arrived, and forgets
// it and the versions before it; the zero time if its event is not handled
// yet (the cache is updated before the handlers run).
func (w *watcher) arrived(rv string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.baseAt[rv]
	if !ok {
		return time.Time{}
	}
	for v, t := range w.baseAt {
		if !t.After(at) {
			delete(w.baseAt, v)
		}
	}
	return at
}

// tableConfigMaps returns the table's ConfigMaps, the chunks of its ledger
// included, as the cache holds them, shared with it: read them, never
// change them.
func (w *watcher) tableConfigMaps(ctx context.Context) ([]corev1.ConfigMap, error) {
	var list corev1.ConfigMapList
	if err := w.cache.List(ctx, &list, client.InNamespace(tableNamespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	out := list.Items[:0]
	for _, cm := range list.Items {
		if isStored(&cm) {
			out = append(out, cm)
		}
	}
	return out, nil
}

// atRest reports whether the table's ConfigMaps hold only what its index
// names, no chunk waiting for its grace period to end, and the ledger's
// only its chunks, of one layout: the ledger of a manager before chunks,
// beside the index, counts as the table's.
func atRest(cms []corev1.ConfigMap) bool {
	var base *corev1.ConfigMap
	for i := range cms {
		if cms[i].Name == tableName {
			base = &cms[i]
		}
	}
	if base == nil {
		return len(cms) == 0
	}
	needed := map[string]bool{}
	if ib, ok := base.Data[spec.TableIndexKey]; ok {
		idx, err := spec.ParseTableIndex([]byte(ib))
		if err != nil {
			return false
		}
		needed[spec.TableIndexKey] = true
		for _, k := range idx.Keys() {
			needed[k] = true
		}
	} else {
		needed[spec.TableKey] = true
	}
	needed[spec.TableLedgerKey] = true
	layout := 0
	for _, cm := range cms {
		if _, n, ok := spec.ParseTableLedgerName(tableName, cm.Name); ok {
			// Chunks of another layout are deleted with the write that
			// replaced them, and each holds its chunk alone.
			if layout != 0 && n != layout {
				return false
			}
			layout = n
			if len(cm.Data) != 0 || len(cm.BinaryData) != 1 || cm.BinaryData[spec.TableLedgerChunkKey] == nil {
				return false
			}
			continue
		}
		for k := range cm.Data {
			if !needed[k] {
				return false
			}
		}
		for k := range cm.BinaryData {
			// The ledger rides beside the table in its base ConfigMap.
			if !needed[k] && (cm.Name != tableName || k != spec.TableLedgerKey) {
				return false
			}
		}
	}
	return true
}

// waitAtRest waits until the table holds only what its index names and no
// write of it came for quiet: the writes that a change causes, removals
// after the grace period included, are over. With tools > 0 it also waits
// until every ToolSet's status says that many tools Published: a tool is
// Published only once the table readers see has it, so those statuses
// are written after the table, and they are convergence's writes, not
// steady state's. It gives up after timeout, and says so, without failing
// the run.
func (w *watcher) waitAtRest(ctx context.Context, quiet, timeout time.Duration, tools int, mgr *harness.Manager) error {
	deadline := time.Now().Add(timeout)
	for {
		if exited, err := mgr.Exited(); exited {
			return fmt.Errorf("the manager exited: %w (log: %s)", err, mgr.LogPath)
		}
		cms, err := w.tableConfigMaps(ctx)
		if err != nil {
			return err
		}
		published := true
		if tools > 0 {
			if published, err = w.allPublished(ctx, tools); err != nil {
				return err
			}
		}
		if atRest(cms) && published && time.Since(w.tableWrites().last) >= quiet {
			return nil
		}
		if time.Now().After(deadline) {
			step("WARNING: the table is not at rest after %s (chunks the index does not name, writes within %s, or ToolSets whose status does not say all %d tools Published yet); going on", timeout, quiet, tools)
			return nil
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
}

// allPublished reports whether every ToolSet's status, of its current
// generation, says tools tools Published.
func (w *watcher) allPublished(ctx context.Context, tools int) (bool, error) {
	var list v1alpha1.ToolSetList
	if err := w.cache.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return false, err
	}
	for i := range list.Items {
		ts := &list.Items[i]
		if ts.Status.ObservedGeneration != ts.Generation || int(ts.Status.PublishedTools) != tools {
			return false, nil
		}
	}
	return true, nil
}

// decodeStats describes the watcher's decoding of the table.
type decodeStats struct {
	decodes, failed int
	took            time.Duration
}

// observe decodes the table each time its base ConfigMap changes, and hands
// each version to seen with the time its write arrived, until ctx ends.
// A version that does not decode (a part that has not arrived yet) is
// decoded again on the next write.
func (w *watcher) observe(ctx context.Context, seen func(t *spec.Table, at time.Time)) decodeStats {
	var st decodeStats
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastRV, failed := "", false
	for {
		select {
		case <-ctx.Done():
			return st
		case <-w.changed:
		case <-tick.C:
		}
		lastWrite := w.tableWrites().last
		cms, err := w.tableConfigMaps(ctx)
		if err != nil {
			continue
		}
		rv := ""
		for _, cm := range cms {
			if cm.Name == tableName {
				rv = cm.ResourceVersion
			}
		}
		if rv == "" || (rv == lastRV && !failed) {
			continue
		}
		at := w.arrived(rv)
		if at.IsZero() || failed {
			// Either this version's event is still on its way, or the
			// version became readable with the write that came last.
			at = later(at, lastWrite)
		}
		start := time.Now()
		t, _, err := harness.DecodeConfigMaps(cms, tableName)
		st.took += time.Since(start)
		st.decodes++
		lastRV, failed = rv, err != nil
		if err != nil {
			st.failed++
			continue
		}
		seen(t, at)
	}
}

func (w *watcher) waitConverged(ctx context.Context, c config, since time.Time, mgr *harness.Manager) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	want := c.toolSets * c.tools
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastReport := time.Now()
	var lastRV string
	var tableOK bool
	var tools int
	for {
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%w within %s: table has %d of %d tools: %w", errNotConverged, c.timeout, tools, want, ctx.Err())
		case <-tick.C:
		}
		now := time.Now()
		if exited, err := mgr.Exited(); exited {
			return time.Time{}, fmt.Errorf("the manager exited: %w (log: %s)", err, mgr.LogPath)
		}
		var list v1alpha1.ToolSetList
		if err := w.cache.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
			return time.Time{}, err
		}
		ready, published := 0, 0
		for i := range list.Items {
			ts := &list.Items[i]
			if !strings.HasPrefix(ts.Namespace, benchNamespacePrefix) {
				// The baseline's, deleted, if the watch is behind.
				continue
			}
			if ts.Status.ObservedGeneration == ts.Generation && apimeta.IsStatusConditionTrue(ts.Status.Conditions, v1alpha1.ConditionReady) {
				ready++
				published += int(ts.Status.PublishedTools)
			}
		}
		// Decode only once every ToolSet is Ready, and then only when some
		// ConfigMap changed: a 50,000-tool table is tens of megabytes of
		// JSON.
		if ready == c.toolSets && published == want {
			cms, err := w.tableConfigMaps(ctx)
			if err != nil {
				return time.Time{}, err
			}
			rv := ""
			for _, cm := range cms {
				rv += cm.Name + "@" + cm.ResourceVersion + ";"
			}
			if rv != lastRV {
				lastRV = rv
				tableOK, tools = false, 0
				if t, _, err := harness.DecodeConfigMaps(cms, tableName); err == nil {
					tools = len(t.Tools)
					tableOK = hasAllTools(t, c)
				}
			}
		}
		// Status says Published only of what the table has: each ToolSet
		// has converged once its status says so of every tool.
		if tableOK && ready == c.toolSets && published == want {
			return now, nil
		}
		if time.Since(lastReport) >= 5*time.Second {
			lastReport = time.Now()
			step("%s since the last create: %d/%d ToolSets Ready with %d/%d tools published; %d tools in the table (read once all are Ready and published)",
				time.Since(since).Round(time.Second), ready, c.toolSets, published, want, tools)
		}
	}
}
