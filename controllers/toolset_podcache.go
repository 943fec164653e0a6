package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
)

// TrimPodForCache is a cache transform for Pods that keeps only what the
// ToolSet reconciler reads: identity, labels, deletion, container ports,
// phase, IP and the Ready condition. The manager caches every Pod of the
// cluster to match them to ToolSets, and whole Pods (environment, volumes,
// annotations, managed fields) would make that cache many times larger.
// Nothing in the manager may write a Pod read from such a cache.
func TrimPodForCache(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	trimmed := &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              pod.Name,
			Namespace:         pod.Namespace,
			UID:               pod.UID,
			ResourceVersion:   pod.ResourceVersion,
			Generation:        pod.Generation,
			CreationTimestamp: pod.CreationTimestamp,
			DeletionTimestamp: pod.DeletionTimestamp,
			Labels:            pod.Labels,
		},
		Status: corev1.PodStatus{Phase: pod.Status.Phase, PodIP: pod.Status.PodIP},
	}
	for _, c := range pod.Spec.Containers {
		if len(c.Ports) > 0 {
			trimmed.Spec.Containers = append(trimmed.Spec.Containers, corev1.Container{Name: c.Name, Ports: c.Ports})
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			trimmed.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	return trimmed, nil
}

// podStore reads the Pods of the manager's own informer in place. A
// client's List copies each Pod into a PodList (with
// client.UnsafeDisableDeepCopy, the struct but not what it points to):
// some 1.2 KiB a Pod that each ToolSet's remembered list of ready Pods
// (podList) kept alive, 7 MB at 5,000 ToolSets, for Pods the cache holds
// anyway. The informer's objects are never modified: an update replaces
// one, so a list holds the Pods as they were when it was made.
type podStore struct {
	indexer toolscache.Indexer
}

// podStoreOf returns the store of c's Pod informer, or nil when c does not
// keep one in a form that can be read in place (a cache of several
// namespaces keeps one per namespace): then the client lists.
func podStoreOf(ctx context.Context, c crcache.Cache) (*podStore, error) {
	if c == nil {
		return nil, nil
	}
	inf, err := c.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return nil, fmt.Errorf("the Pod informer: %w", err)
	}
	shared, ok := inf.(interface{ GetIndexer() toolscache.Indexer })
	if !ok {
		return nil, nil
	}
	ix := shared.GetIndexer()
	if _, indexed := ix.GetIndexers()[toolscache.NamespaceIndex]; !indexed {
		return nil, nil
	}
	return &podStore{indexer: ix}, nil
}

// ready returns the scrapable Pods of namespace ns that sel selects,
// sorted by name; as readyPods, read from the store.
func (s *podStore) ready(ns string, sel labels.Selector) ([]*corev1.Pod, error) {
	objs, err := s.indexer.ByIndex(toolscache.NamespaceIndex, ns)
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	var pods []*corev1.Pod
	for _, o := range objs {
		p, ok := o.(*corev1.Pod)
		if ok && sel.Matches(labels.Set(p.Labels)) && podScrapable(p) {
			pods = append(pods, p)
		}
	}
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods, nil
}
