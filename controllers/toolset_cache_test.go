package controllers

import (
	"encoding/json"
	"reflect"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/toolplane/toolplane/api/v1alpha1"
)

func TestTrimToolSetForCache(t *testing.T) {
	toolSet := func() *v1alpha1.ToolSet {
		return &v1alpha1.ToolSet{
			ObjectMeta: metav1.ObjectMeta{
				Name: "crm", Namespace: "ns", UID: "u", ResourceVersion: "7", Generation: 2,
				Labels:        map[string]string{"team": "sales"},
				Annotations:   map[string]string{"note": "kept", corev1.LastAppliedConfigAnnotation: `{"apiVersion":"toolplane.io/v1alpha1","kind":"ToolSet","spec":{}}`},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
				Finalizers:    []string{"f"},
			},
			Spec: v1alpha1.ToolSetSpec{Port: intstr.FromString("http"), Path: "/spec.json"},
			Status: v1alpha1.ToolSetStatus{ObservedGeneration: 2, PublishedTools: 1,
				Tools: []v1alpha1.ToolStatus{{Name: "find", State: v1alpha1.ToolPublished}}},
		}
	}
	in := toolSet()
	// As the JSON decoder leaves them: room for more.
	in.Status.Tools = append(make([]v1alpha1.ToolStatus, 0, 16), in.Status.Tools...)
	in.Status.Conditions = append(make([]metav1.Condition, 0, 4), metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue})
	shared := in.Annotations
	out, err := TrimToolSetForCache(in)
	if err != nil {
		t.Fatal(err)
	}
	want := toolSet()
	want.ManagedFields = nil
	want.Annotations = map[string]string{"note": "kept"}
	want.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue}}
	got := out.(*v1alpha1.ToolSet)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("trimmed to\n%+v\nwant\n%+v", got, want)
	}
	if cap(got.Status.Tools) != len(got.Status.Tools) || cap(got.Status.Conditions) != len(got.Status.Conditions) {
		t.Errorf("status lists keep room: tools %d of %d, conditions %d of %d",
			len(got.Status.Tools), cap(got.Status.Tools), len(got.Status.Conditions), cap(got.Status.Conditions))
	}
	if _, ok := shared[corev1.LastAppliedConfigAnnotation]; !ok {
		t.Error("the annotations map the object came with was written")
	}

	only := toolSet()
	only.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: "{}"}
	if out, _ := TrimToolSetForCache(only); out.(*v1alpha1.ToolSet).Annotations != nil {
		t.Errorf("annotations left: %v", out.(*v1alpha1.ToolSet).Annotations)
	}
	if other, _ := TrimToolSetForCache(&corev1.Pod{}); other == nil {
		t.Error("another kind was not passed through")
	}
}

// TestTrimToolSetForCacheSharesWords: the words of a decoded status point
// at one copy for every ToolSet, and keep their values; others are left.
func TestTrimToolSetForCacheSharesWords(t *testing.T) {
	body := []byte(`{"status":{"tools":[{"name":"find","state":"Published"},{"name":"lookup","state":"Conflicted","reason":"NameConflict","owner":"ns/other"}],` +
		`"conditions":[{"type":"Ready","status":"True","reason":"Published","message":"2 tools","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`)
	var decoded [2]*v1alpha1.ToolSet
	for i := range decoded {
		ts := &v1alpha1.ToolSet{}
		if err := json.Unmarshal(body, ts); err != nil {
			t.Fatal(err)
		}
		want := ts.DeepCopy()
		out, _ := TrimToolSetForCache(ts)
		decoded[i] = out.(*v1alpha1.ToolSet)
		if !reflect.DeepEqual(decoded[i].Status, want.Status) {
			t.Fatalf("status changed:\n%+v\nwant\n%+v", decoded[i].Status, want.Status)
		}
	}
	same := func(what, a, b string) {
		t.Helper()
		if unsafe.StringData(a) != unsafe.StringData(b) {
			t.Errorf("%s %q: two copies", what, a)
		}
	}
	a, b := decoded[0].Status, decoded[1].Status
	for i := range a.Tools {
		same("state", string(a.Tools[i].State), string(b.Tools[i].State))
	}
	same("reason", a.Tools[1].Reason, b.Tools[1].Reason)
	same("condition type", a.Conditions[0].Type, b.Conditions[0].Type)
	same("condition status", string(a.Conditions[0].Status), string(b.Conditions[0].Status))
	same("condition reason", a.Conditions[0].Reason, b.Conditions[0].Reason)
	if unsafe.StringData(a.Tools[1].Owner) == unsafe.StringData(b.Tools[1].Owner) {
		t.Error("an owner, not one of the words, was shared")
	}
}
