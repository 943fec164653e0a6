package controllers

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolplane/toolplane/api/v1alpha1"
)

// steadyStatus is the status of a Ready ToolSet of tools tools, one of
// them with a breaking change, as make bench-scale's ToolSets carry it.
func steadyStatus(tools int) v1alpha1.ToolSetStatus {
	at := metav1.NewTime(time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC))
	st := v1alpha1.ToolSetStatus{
		ObservedGeneration: 1, Pods: v1alpha1.PodCounts{Selected: 1, Scraped: 1},
		Revision: "sha256:" + fmt.Sprintf("%064x", 42), PublishedTools: int32(tools),
	}
	for _, t := range []string{v1alpha1.ConditionReady, v1alpha1.ConditionDegraded, v1alpha1.ConditionStale,
		v1alpha1.ConditionConflicted, v1alpha1.ConditionReconciling, v1alpha1.ConditionStalled} {
		st.Conditions = append(st.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionFalse, Reason: "Healthy",
			Message: "all is well", ObservedGeneration: 1, LastTransitionTime: at})
	}
	for j := range tools {
		ts := v1alpha1.ToolStatus{Name: fmt.Sprintf("set0042_tool%02d", j), SourceName: fmt.Sprintf("tool%02d", j), State: v1alpha1.ToolPublished}
		if j == 0 {
			ts.LastBreakingChange = &v1alpha1.BreakingChange{Revision: st.Revision, Time: at, Message: "input schema narrowed"}
		}
		st.Tools = append(st.Tools, ts)
	}
	return st
}

func TestStatusEqualIsSemanticEquality(t *testing.T) {
	base := steadyStatus(10)
	for _, tc := range []struct {
		name   string
		change func(*v1alpha1.ToolSetStatus)
		equal  bool
	}{
		{"the same status", func(*v1alpha1.ToolSetStatus) {}, true},
		{"a time in another location", func(s *v1alpha1.ToolSetStatus) {
			// The same instant: equal, though reflect tells them apart.
			s.Conditions[2].LastTransitionTime = metav1.NewTime(s.Conditions[2].LastTransitionTime.In(time.FixedZone("X", 3600)))
		}, true},
		{"a breaking change at a time in another location", func(s *v1alpha1.ToolSetStatus) {
			s.Tools[0].LastBreakingChange.Time = metav1.NewTime(s.Tools[0].LastBreakingChange.Time.Local())
		}, true},
		{"nil and empty tools", func(s *v1alpha1.ToolSetStatus) { s.Tools = nil }, false},
		{"a tool's state", func(s *v1alpha1.ToolSetStatus) { s.Tools[9].State = v1alpha1.ToolConflicted }, false},
		{"a condition's reason", func(s *v1alpha1.ToolSetStatus) { s.Conditions[0].Reason = "Other" }, false},
		{"a later time", func(s *v1alpha1.ToolSetStatus) {
			s.Conditions[1].LastTransitionTime = metav1.NewTime(s.Conditions[1].LastTransitionTime.Add(time.Second))
		}, false},
		{"the pods scraped", func(s *v1alpha1.ToolSetStatus) { s.Pods.Scraped = 0 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			other := *base.DeepCopy()
			tc.change(&other)
			if got, want := statusEqual(&base, &other), equality.Semantic.DeepEqual(&base, &other); got != want || got != tc.equal {
				t.Fatalf("statusEqual = %v, equality.Semantic.DeepEqual = %v, want %v", got, want, tc.equal)
			}
		})
	}
}

// BenchmarkStatusEqual compares the status of a steady ToolSet of 10 tools
// with its deep copy, as every reconcile that changes nothing does: the
// semantic comparison alone (the baseline, in the same run) against
// statusEqual.
//
//	go test ./controllers -run '^$' -bench BenchmarkStatusEqual -benchmem -count 6
func BenchmarkStatusEqual(b *testing.B) {
	a := steadyStatus(10)
	c := *a.DeepCopy()
	for _, bc := range []struct {
		name  string
		equal func(a, b *v1alpha1.ToolSetStatus) bool
	}{
		{"semantic", func(a, b *v1alpha1.ToolSetStatus) bool { return equality.Semantic.DeepEqual(a, b) }},
		{"statusEqual", statusEqual},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !bc.equal(&a, &c) {
					b.Fatal("a deep copy differs")
				}
			}
		})
	}
}
