package controllers

import (
	"encoding/json"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolplane/toolplane/api/v1alpha1"
)

// TestStatusMergePatchChangesTheStatusAlone applies statusMergePatch to the
// whole object, as the API server does, and finds the object with the new
// status and nothing else changed: what the merge patch of the two whole
// objects (client.MergeFrom) did.
func TestStatusMergePatchChangesTheStatusAlone(t *testing.T) {
	now := metav1.NewTime(metav1.Now().Rfc3339Copy().Time)
	ready := v1alpha1.ToolSetStatus{
		ObservedGeneration: 2,
		Conditions: []metav1.Condition{
			{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonPublished, Message: "2 tools published", LastTransitionTime: now, ObservedGeneration: 2},
			{Type: v1alpha1.ConditionConflicted, Status: metav1.ConditionTrue, Reason: "NameTaken", Message: "b is taken", LastTransitionTime: now, ObservedGeneration: 2},
		},
		Pods:            v1alpha1.PodCounts{Selected: 2, Scraped: 2},
		Revision:        "sha256:0a",
		PublishedTools:  1,
		ConflictedTools: 1,
		Tools: []v1alpha1.ToolStatus{
			{Name: "a", SourceName: "a", State: v1alpha1.ToolPublished},
			{Name: "b", SourceName: "b", State: v1alpha1.ToolConflicted},
		},
	}
	resolved := *ready.DeepCopy()
	resolved.Conditions = resolved.Conditions[:1]
	resolved.Conditions[0].Message = "1 tool published"
	resolved.ConflictedTools = 0
	resolved.Tools = resolved.Tools[:1]
	resolved.Pods.Scraped = 1

	for name, c := range map[string]struct{ from, to v1alpha1.ToolSetStatus }{
		"first status":   {v1alpha1.ToolSetStatus{}, ready},
		"fields cleared": {ready, resolved},
		"status emptied": {ready, v1alpha1.ToolSetStatus{}},
		"unchanged":      {ready, ready},
	} {
		t.Run(name, func(t *testing.T) {
			obj := v1alpha1.ToolSet{
				TypeMeta:   toolSetTypeMeta,
				ObjectMeta: metav1.ObjectMeta{Namespace: "crm", Name: "tools", UID: "u-1", ResourceVersion: "7", Labels: map[string]string{"app": "crm"}},
				Spec:       v1alpha1.ToolSetSpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "crm"}}, Path: "/spec"},
			}
			before, want := obj.DeepCopy(), obj.DeepCopy()
			before.Status, want.Status = *c.from.DeepCopy(), *c.to.DeepCopy()
			patch, err := statusMergePatch(&before.Status, &want.Status)
			if err != nil {
				t.Fatal(err)
			}
			var members map[string]json.RawMessage
			if err := json.Unmarshal(patch, &members); err != nil {
				t.Fatal(err)
			}
			for k := range members {
				if k != "status" {
					t.Errorf("the patch %s touches %q", patch, k)
				}
			}
			original, err := json.Marshal(before)
			if err != nil {
				t.Fatal(err)
			}
			patched, err := jsonpatch.MergePatch(original, patch)
			if err != nil {
				t.Fatal(err)
			}
			var got v1alpha1.ToolSet
			if err := json.Unmarshal(patched, &got); err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(&got, want) {
				t.Errorf("patched with %s:\n got  %+v\n want %+v", patch, got, *want)
			}
		})
	}
}
