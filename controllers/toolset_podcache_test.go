package controllers

import (
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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

// typicalPod is a Pod as a Deployment's ReplicaSet creates it and a kubelet
// reports it: what the Pod cache holds for every Pod of the cluster.
func typicalPod(i int) *corev1.Pod {
	var env []corev1.EnvVar
	for j := range 20 {
		env = append(env, corev1.EnvVar{Name: fmt.Sprintf("SETTING_%d", j), Value: fmt.Sprintf("value-of-setting-%d", j)})
	}
	container := func(name string) corev1.Container {
		return corev1.Container{
			Name: name, Image: "registry.example.com/team/" + name + ":1.2.3", Env: env,
			Ports:        []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
			VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/config"}, {Name: "token", MountPath: "/var/run/secrets"}},
		}
	}
	now := metav1.Now()
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("orders-7d9c5b6f4-%05d", i), Namespace: "shop", UID: types.UID(fmt.Sprintf("uid-%d", i)), ResourceVersion: "123456",
			Labels:          map[string]string{"app": "orders", "pod-template-hash": "7d9c5b6f4", "team": "shop"},
			Annotations:     map[string]string{"kubectl.kubernetes.io/restartedAt": now.String(), "prometheus.io/scrape": "true"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "orders-7d9c5b6f4", UID: "rs"}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate},
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status"}},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{container("orders"), container("proxy")},
			Volumes:    []corev1.Volume{{Name: "config"}, {Name: "token"}},
			NodeName:   "node-17", ServiceAccountName: "orders",
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: "10.1.2.3", HostIP: "10.0.0.17", StartTime: &now,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			},
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "orders", Ready: true, Image: "registry.example.com/team/orders:1.2.3", ImageID: "sha256:0123456789abcdef", ContainerID: "containerd://0123456789abcdef"},
				{Name: "proxy", Ready: true, Image: "registry.example.com/team/proxy:1.2.3", ImageID: "sha256:0123456789abcdef", ContainerID: "containerd://fedcba9876543210"},
			},
		},
	}
}

// BenchmarkPodCacheMemory measures what the Pod cache holds per Pod, with
// the trim (every Pod of the cluster, the default) and, as the baseline, a
// whole Pod: with --pod-label-selector the cost is the same per Pod, for
// the matched Pods only. Run with
// go test ./controllers -run '^$' -bench PodCacheMemory -benchtime 1x
func BenchmarkPodCacheMemory(b *testing.B) {
	const n = 10000
	measure := func(b *testing.B, keep func(*corev1.Pod) any) {
		for b.Loop() {
			held := make([]any, 0, n)
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for i := range n {
				held = append(held, keep(typicalPod(i)))
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/pod")
			runtime.KeepAlive(held)
		}
	}
	b.Run("whole", func(b *testing.B) { measure(b, func(p *corev1.Pod) any { return p }) })
	b.Run("trimmed", func(b *testing.B) {
		measure(b, func(p *corev1.Pod) any {
			out, _ := TrimPodForCache(p)
			return out
		})
	})
}
