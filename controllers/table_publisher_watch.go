package controllers

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// This file holds what makes the publisher repair the table: the events of
// the table's ConfigMaps, written or deleted by anyone but the publisher.

// informerSource is where the publisher gets the informer of ConfigMaps:
// the manager's cache.
type informerSource interface {
	GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error)
}

// watchTable kicks a write whenever a ConfigMap of the table is deleted or
// changed by anyone but the publisher, until ctx is done: the write
// compares with what is stored and writes what is missing.
//
// It watches the ConfigMaps' metadata only: their names and
// resourceVersions are all it reads, and a watch of whole ConfigMaps had
// the API server send, and the manager decode and cache, every part the
// publisher wrote (some 60 MB while 5,000 ToolSets converged).
func (p *TablePublisher) watchTable(ctx context.Context) error {
	if p.Informers == nil {
		return nil
	}
	inf, err := p.Informers.GetInformer(ctx, configMapMetadata())
	if err != nil {
		return err
	}
	ours := func(obj any) (metav1.Object, bool) {
		if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		cm, err := meta.Accessor(obj)
		if err != nil || cm.GetNamespace() != p.namespace() {
			return nil, false
		}
		if name := cm.GetName(); name != p.name() && !strings.HasPrefix(name, p.name()+"-") && !strings.HasPrefix(name, p.name()+".ledger-") {
			return nil, false
		}
		return cm, true
	}
	kick := func() {
		p.mu.Lock()
		p.kickLocked()
		p.mu.Unlock()
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			cm, ok := ours(obj)
			if !ok {
				return
			}
			if rv, known := p.ownWrites.Load(cm.GetName()); known && rv == cm.GetResourceVersion() {
				return
			}
			kick()
		},
		DeleteFunc: func(obj any) {
			cm, ok := ours(obj)
			if !ok {
				return
			}
			if rv, known := p.ownWrites.Load(cm.GetName()); known && rv == "" {
				return
			}
			kick()
		},
	})
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		_ = inf.RemoveEventHandler(reg)
	}()
	return nil
}

// configMapMetadata is the object of a metadata-only informer of
// ConfigMaps.
func configMapMetadata() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}}
}
