package harness

import (
	"context"
	"fmt"
	"regexp"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// PortName is the name of the container port that the Pods of this package
// declare and their ToolSets select.
const PortName = "tools"

// CreateReadyPod creates a Pod labelled app=<app> whose container port
// PortName is port, and marks it Running and Ready at 127.0.0.1, as a
// kubelet would: envtest runs no kubelet, and the loopback workload behind
// the port stands in for the container.
func CreateReadyPod(ctx context.Context, c client.Client, namespace, name, app string, port int) (*corev1.Pod, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:  "tools",
			Image: "example.invalid/tools:1",
			Ports: []corev1.ContainerPort{{Name: PortName, ContainerPort: int32(port)}},
		}}},
	}
	if err := c.Create(ctx, pod); err != nil {
		return nil, fmt.Errorf("creating pod %s/%s: %w", namespace, name, err)
	}
	now := metav1.NewTime(time.Now())
	pod.Status = corev1.PodStatus{
		Phase:  corev1.PodRunning,
		PodIP:  "127.0.0.1",
		PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}},
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "tools", Ready: true, Image: "example.invalid/tools:1"}},
		StartTime:         &now,
	}
	if err := c.Status().Update(ctx, pod); err != nil {
		return nil, fmt.Errorf("marking pod %s/%s ready: %w", namespace, name, err)
	}
	return pod, nil
}

// NewToolSet returns a ToolSet that selects the Pods labelled app=<app> and
// scrapes path on their port PortName every interval.
func NewToolSet(namespace, name, app, path string, interval time.Duration) *v1alpha1.ToolSet {
	return &v1alpha1.ToolSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: v1alpha1.ToolSetSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			Port:     intstr.FromString(PortName),
			Path:     path,
			Interval: &metav1.Duration{Duration: interval},
			Service:  &v1alpha1.ServiceReference{Name: app, Port: 8080},
		},
	}
}

// TableStats describes the ConfigMaps of a published table.
type TableStats struct {
	// Parts is the number of ConfigMaps.
	Parts int
	// Bytes is their total payload as the API server stores it.
	Bytes int
	// MaxPart is the payload of the largest one.
	MaxPart int
}

// ReadTable reads the tool table published as ConfigMap base (and base-1,
// base-2, …) in namespace, and decodes it as an agent would.
func ReadTable(ctx context.Context, c client.Reader, namespace, base string) (*spec.Table, TableStats, error) {
	var list corev1.ConfigMapList
	if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, TableStats{}, err
	}
	return DecodeConfigMaps(list.Items, base)
}

// DecodeConfigMaps decodes the tool table published as base from a set of
// ConfigMaps, ignoring those that are not its parts.
func DecodeConfigMaps(cms []corev1.ConfigMap, base string) (*spec.Table, TableStats, error) {
	part := regexp.MustCompile("^" + regexp.QuoteMeta(base) + "(-[0-9]+)?$")
	var (
		parts []spec.TablePart
		st    TableStats
	)
	for _, cm := range cms {
		if !part.MatchString(cm.Name) {
			continue
		}
		p := spec.TablePart{Name: cm.Name, Data: cm.Data, BinaryData: cm.BinaryData}
		parts = append(parts, p)
		n := p.StoredSize()
		st.Parts++
		st.Bytes += n
		st.MaxPart = max(st.MaxPart, n)
	}
	if len(parts) == 0 {
		return nil, st, fmt.Errorf("no ConfigMap %s", base)
	}
	t, err := spec.DecodeTableParts(parts...)
	return t, st, err
}
