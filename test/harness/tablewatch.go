package harness

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// TableWatcher decodes every version of the tool table that the API server
// shows a watch, as an agent's kubelet would see them one after another,
// and hands each to a check.
type TableWatcher struct {
	cache     cache.Cache
	namespace string
	base      string
	check     func(*spec.Table)

	mu       sync.Mutex
	latest   *spec.Table
	observed int
	torn     int
	errs     []error
}

// WatchTable starts watching the table published as ConfigMap base in
// namespace until ctx ends. check, if not nil, sees every version decoded,
// one at a time.
func WatchTable(ctx context.Context, cp *ControlPlane, namespace, base string, check func(*spec.Table)) (*TableWatcher, error) {
	ca, err := cache.New(cp.Config, cache.Options{
		Scheme:            cp.Scheme,
		DefaultNamespaces: map[string]cache.Config{namespace: {}},
	})
	if err != nil {
		return nil, err
	}
	w := &TableWatcher{cache: ca, namespace: namespace, base: base, check: check}
	inf, err := ca.GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
		return nil, err
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.observe(ctx) },
		UpdateFunc: func(any, any) { w.observe(ctx) },
		DeleteFunc: func(any) { w.observe(ctx) },
	}); err != nil {
		return nil, err
	}
	go func() { _ = ca.Start(ctx) }()
	if !ca.WaitForCacheSync(ctx) {
		return nil, errors.New("the table watcher's cache did not sync")
	}
	return w, nil
}

// observe decodes the table as the cache holds it now. Event handlers run
// one at a time, so versions are seen in the order the API server made
// them.
func (w *TableWatcher) observe(ctx context.Context) {
	var list corev1.ConfigMapList
	if err := w.cache.List(ctx, &list, client.InNamespace(w.namespace)); err != nil {
		w.fail(err)
		return
	}
	t, _, err := DecodeConfigMaps(list.Items, w.base)
	switch {
	case err == nil:
	case errors.Is(err, spec.ErrTableTorn), errors.Is(err, spec.ErrTablePartMissing):
		// A publisher writes the parts before the index, so between its
		// writes a watch may show new parts under the old index. A reader
		// keeps its last good table; so does the watcher.
		w.mu.Lock()
		w.torn++
		w.mu.Unlock()
		return
	case len(list.Items) == 0 || !hasPart(list.Items, w.base):
		return // Not published yet, or deleted.
	default:
		w.fail(fmt.Errorf("decoding the table: %w", err))
		return
	}
	w.mu.Lock()
	w.latest = t
	w.observed++
	w.mu.Unlock()
	if w.check != nil {
		w.check(t)
	}
}

func hasPart(cms []corev1.ConfigMap, base string) bool {
	for _, cm := range cms {
		if cm.Name == base {
			return true
		}
	}
	return false
}

func (w *TableWatcher) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errs = append(w.errs, err)
}

// Latest returns the last version decoded, or nil.
func (w *TableWatcher) Latest() *spec.Table {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.latest
}

// Observed returns how many versions were decoded and how many reads were
// torn between parts.
func (w *TableWatcher) Observed() (versions, torn int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.observed, w.torn
}

// Err returns every failure to read or decode the table, joined.
func (w *TableWatcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return errors.Join(w.errs...)
}

// Names returns the names of t's tools as a set, with the ToolSet that
// publishes each.
func Names(t *spec.Table) map[string]spec.ObjectReference {
	out := make(map[string]spec.ObjectReference, len(t.Tools))
	for _, tt := range t.Tools {
		out[tt.Name] = tt.ToolSet
	}
	return out
}
