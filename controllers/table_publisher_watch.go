package controllers

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
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
func (p *TablePublisher) watchTable(ctx context.Context) error {
	if p.Informers == nil {
		return nil
	}
	inf, err := p.Informers.GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
		return err
	}
	ours := func(obj any) (*corev1.ConfigMap, bool) {
		if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok || cm.Namespace != p.namespace() || (cm.Name != p.name() && !strings.HasPrefix(cm.Name, p.name()+"-") && !strings.HasPrefix(cm.Name, p.name()+".ledger-")) {
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
			if rv, known := p.ownWrites.Load(cm.Name); known && rv == cm.ResourceVersion {
				return
			}
			kick()
		},
		DeleteFunc: func(obj any) {
			cm, ok := ours(obj)
			if !ok {
				return
			}
			if rv, known := p.ownWrites.Load(cm.Name); known && rv == "" {
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
