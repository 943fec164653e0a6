package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// WatchTable follows the tool table published as ConfigMap name (with its
// parts, the ConfigMaps named name-*, and its ledger's chunks, which give
// each entry its owner's UID) in namespace, and gives each good version of
// it to g until ctx is done. It watches ConfigMaps in that one
// namespace only, so it needs nothing but get, list and watch on
// ConfigMaps there. The table is decoded with toolkit/spec, as every agent
// decodes it. An update that cannot be decoded (torn between parts, a part
// missing, malformed, too large) or served is logged and counted in
// toolplane_gateway_table_rejected_total, and the last good table kept.
//
// It returns once the informer's cache has synced and the first version
// (if the table exists) has been given to g, or with an error.
func WatchTable(ctx context.Context, cfg *rest.Config, namespace, name string, g *Gateway) error {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return err
	}
	ca, err := cache.New(cfg, cache.Options{
		Scheme:            scheme,
		DefaultNamespaces: map[string]cache.Config{namespace: {}},
		DefaultTransform:  cache.TransformStripManagedFields(),
	})
	if err != nil {
		return fmt.Errorf("creating the table cache: %w", err)
	}
	w := &tableWatch{cache: ca, namespace: namespace, name: name, g: g, kick: make(chan struct{}, 1)}
	inf, err := ca.GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
		return fmt.Errorf("watching ConfigMaps in %s: %w", namespace, err)
	}
	kick := func(obj any) {
		if cm, ok := obj.(*corev1.ConfigMap); ok && !w.isPart(cm.Name) && !w.isLedger(cm.Name) {
			return
		}
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    kick,
		UpdateFunc: func(_, obj any) { kick(obj) },
		DeleteFunc: kick,
	}); err != nil {
		return err
	}
	go func() {
		if err := ca.Start(ctx); err != nil {
			g.logger.Error("The table cache stopped", "error", err)
		}
	}()
	if !ca.WaitForCacheSync(ctx) {
		return errors.New("the table cache did not sync")
	}
	w.load(ctx)
	go w.run(ctx)
	return nil
}

type tableWatch struct {
	cache           cache.Cache
	namespace, name string
	g               *Gateway
	kick            chan struct{}
	// seen is the names and resourceVersions of the parts last decoded,
	// so that an event that changed none of them costs no decoding.
	seen string
	// ledgerSeen is the same of the ledger's chunks, and uids the owners'
	// UIDs they gave (spec.DecodeTableLedgerOwners): a write of the table
	// alone (a tool's content changed, which writes no chunk) costs no
	// decoding of the ledger, which would add a third to each table's
	// decoding at 50,000 tools.
	ledgerSeen string
	uids       map[spec.ObjectReference]string
}

func (w *tableWatch) isPart(name string) bool {
	return name == w.name || strings.HasPrefix(name, w.name+"-")
}

// isLedger reports whether name is a chunk of the table's ledger.
func (w *tableWatch) isLedger(name string) bool {
	_, _, ok := spec.ParseTableLedgerName(w.name, name)
	return ok
}

// run decodes the table after each burst of events: events that arrive
// while it decodes coalesce into one more decoding.
func (w *tableWatch) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
			w.load(ctx)
		}
	}
}

func (w *tableWatch) load(ctx context.Context) {
	log := w.g.logger
	var list corev1.ConfigMapList
	if err := w.cache.List(ctx, &list, client.InNamespace(w.namespace)); err != nil {
		log.Error("Listing the table's ConfigMaps failed", "error", err)
		return
	}
	w.apply(list.Items)
}

// apply decodes the table from the ConfigMaps of its namespace, items, and
// gives it to the gateway, unless none of its ConfigMaps changed since the
// last call.
func (w *tableWatch) apply(items []corev1.ConfigMap) {
	log := w.g.logger
	var (
		parts, ledger    []spec.TablePart
		seen, ledgerSeen []string
		found            bool
	)
	for i := range items {
		cm := &items[i]
		part := spec.TablePart{Name: cm.Name, Data: cm.Data, BinaryData: cm.BinaryData}
		switch {
		case w.isPart(cm.Name):
			found = found || cm.Name == w.name
			parts = append(parts, part)
		case w.isLedger(cm.Name):
			ledger = append(ledger, part)
			ledgerSeen = append(ledgerSeen, cm.Name+"@"+cm.ResourceVersion)
		default:
			continue
		}
		seen = append(seen, cm.Name+"@"+cm.ResourceVersion)
	}
	slices.Sort(seen)
	key := strings.Join(seen, ",")
	if key == w.seen {
		return
	}
	w.seen = key
	if !found {
		log.Info("The tool table is not published yet", "namespace", w.namespace, "configMap", w.name)
		return
	}
	t, err := spec.DecodeTableParts(parts...)
	if err != nil {
		reason := "malformed"
		switch {
		case errors.Is(err, spec.ErrTableTorn):
			reason = "torn"
		case errors.Is(err, spec.ErrTablePartMissing):
			reason = "missing_part"
		case errors.Is(err, spec.ErrTableTooLarge):
			reason = "too_large"
		}
		w.g.metrics.rejected.WithLabelValues(reason).Inc()
		log.Warn("Kept the last good tool table: the update could not be decoded",
			"reason", reason, "revision", w.g.Revision(), "error", err)
		return
	}
	// The owners' UIDs are the ledger's: a chunk that does not read back
	// leaves its owners' entries without one, so that a task started on
	// one of them with its UID is not found, and their call limits start
	// afresh; the table is served all the same.
	slices.Sort(ledgerSeen)
	if lkey := strings.Join(ledgerSeen, ","); lkey != w.ledgerSeen || w.uids == nil {
		uids, err := spec.DecodeTableLedgerOwners(w.name, ledger...)
		if err != nil {
			log.Warn("Some owners' UIDs are unknown: a chunk of the table's ledger could not be decoded", "error", err)
		}
		w.ledgerSeen, w.uids = lkey, uids
	}
	for i := range t.Tools {
		t.Tools[i].ToolSetUID = w.uids[t.Tools[i].ToolSet]
	}
	if err := w.g.SetTable(t); err != nil {
		log.Warn("Kept the last good tool table: the update cannot be served",
			"revision", w.g.Revision(), "error", err)
	}
}
