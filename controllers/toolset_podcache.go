package controllers

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
