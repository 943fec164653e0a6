package controllers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestTrimPodForCache(t *testing.T) {
	now := metav1.Now()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "p", Namespace: "ns", UID: "u", ResourceVersion: "7", Labels: map[string]string{"app": "crm"},
			Annotations: map[string]string{"big": "x"}, DeletionTimestamp: &now,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "tools", Env: []corev1.EnvVar{{Name: "SECRET", Value: "v"}}, Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}},
			{Name: "sidecar"},
		}},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: "10.0.0.1",
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, Message: "m"},
			},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "tools"}},
		},
	}
	out, err := TrimPodForCache(pod)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Pod)
	if !podReady(got) || got.Status.PodIP != "10.0.0.1" || got.Status.Phase != corev1.PodRunning || got.Name != "p" || got.Namespace != "ns" || got.UID != "u" || got.Labels["app"] != "crm" || got.DeletionTimestamp == nil {
		t.Errorf("lost what the reconciler reads: %+v", got)
	}
	if port, err := resolvePort(got, intstr.FromString("http")); err != nil || port != 8080 {
		t.Errorf("port: %d, %v", port, err)
	}
	if got.Annotations != nil || got.ManagedFields != nil || len(got.Spec.Containers) != 1 || got.Spec.Containers[0].Env != nil ||
		len(got.Status.Conditions) != 1 || got.Status.ContainerStatuses != nil {
		t.Errorf("kept what the reconciler never reads: %+v", got)
	}
	if other, _ := TrimPodForCache(&corev1.Service{}); other == nil {
		t.Error("another kind was not passed through")
	}
}
