package controllers

import (
	"fmt"
	"reflect"
	"slices"
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
		{"nil and empty conditions", func(s *v1alpha1.ToolSetStatus) { s.Conditions = []metav1.Condition{} }, false},
		{"the observed generation", func(s *v1alpha1.ToolSetStatus) { s.ObservedGeneration++ }, false},
		{"the revision", func(s *v1alpha1.ToolSetStatus) { s.Revision += "0" }, false},
		{"the tools published", func(s *v1alpha1.ToolSetStatus) { s.PublishedTools-- }, false},
		{"the tools conflicted", func(s *v1alpha1.ToolSetStatus) { s.ConflictedTools++ }, false},
		{"the tools omitted", func(s *v1alpha1.ToolSetStatus) { s.OmittedTools++ }, false},
		{"a condition's type", func(s *v1alpha1.ToolSetStatus) { s.Conditions[3].Type = "Other" }, false},
		{"a condition's status", func(s *v1alpha1.ToolSetStatus) { s.Conditions[3].Status = metav1.ConditionTrue }, false},
		{"a condition's message", func(s *v1alpha1.ToolSetStatus) { s.Conditions[4].Message += "." }, false},
		{"a condition's generation", func(s *v1alpha1.ToolSetStatus) { s.Conditions[5].ObservedGeneration++ }, false},
		{"a condition fewer", func(s *v1alpha1.ToolSetStatus) { s.Conditions = s.Conditions[1:] }, false},
		{"a tool's name", func(s *v1alpha1.ToolSetStatus) { s.Tools[1].Name += "x" }, false},
		{"a tool's source name", func(s *v1alpha1.ToolSetStatus) { s.Tools[1].SourceName += "x" }, false},
		{"a tool's reason", func(s *v1alpha1.ToolSetStatus) { s.Tools[2].Reason = "why" }, false},
		{"a tool's owner", func(s *v1alpha1.ToolSetStatus) { s.Tools[2].Owner = "ns/other" }, false},
		{"a breaking change gone", func(s *v1alpha1.ToolSetStatus) { s.Tools[0].LastBreakingChange = nil }, false},
		{"a breaking change more", func(s *v1alpha1.ToolSetStatus) {
			s.Tools[3].LastBreakingChange = s.Tools[0].LastBreakingChange.DeepCopy()
		}, false},
		{"a breaking change's revision", func(s *v1alpha1.ToolSetStatus) { s.Tools[0].LastBreakingChange.Revision = "r" }, false},
		{"a breaking change's message", func(s *v1alpha1.ToolSetStatus) { s.Tools[0].LastBreakingChange.Message += "." }, false},
		{"a breaking change's time", func(s *v1alpha1.ToolSetStatus) {
			s.Tools[0].LastBreakingChange.Time = metav1.NewTime(s.Tools[0].LastBreakingChange.Time.Add(time.Second))
		}, false},
		{"a tool fewer", func(s *v1alpha1.ToolSetStatus) { s.Tools = s.Tools[1:] }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			other := *base.DeepCopy()
			tc.change(&other)
			if got, want := statusEqual(&base, &other), equality.Semantic.DeepEqual(&base, &other); got != want || got != tc.equal {
				t.Fatalf("statusEqual = %v, equality.Semantic.DeepEqual = %v, want %v", got, want, tc.equal)
			}
			if same := statusesSame(&base, &other); same && !tc.equal {
				t.Fatal("statusesSame reports the same of statuses that differ")
			}
		})
	}
}

// TestStatusesSameFields fails when a type of the status gains or loses a
// field: statusesSame compares each field by name, and must be told of it.
func TestStatusesSameFields(t *testing.T) {
	for _, tc := range []struct {
		typ    reflect.Type
		fields []string
	}{
		{reflect.TypeFor[v1alpha1.ToolSetStatus](), []string{"ObservedGeneration", "Conditions", "Pods", "Revision", "PublishedTools", "ConflictedTools", "Tools", "OmittedTools"}},
		{reflect.TypeFor[v1alpha1.PodCounts](), []string{"Selected", "Scraped", "Failed"}},
		{reflect.TypeFor[metav1.Condition](), []string{"Type", "Status", "ObservedGeneration", "LastTransitionTime", "Reason", "Message"}},
		{reflect.TypeFor[v1alpha1.ToolStatus](), []string{"Name", "SourceName", "State", "Reason", "Owner", "LastBreakingChange"}},
		{reflect.TypeFor[v1alpha1.BreakingChange](), []string{"Revision", "Time", "Message"}},
	} {
		var got []string
		for i := range tc.typ.NumField() {
			got = append(got, tc.typ.Field(i).Name)
		}
		if !slices.Equal(got, tc.fields) {
			t.Errorf("%s has the fields %v; statusesSame compares %v: make it compare the new ones", tc.typ, got, tc.fields)
		}
	}
	// PodCounts is compared with ==: it must stay comparable.
	if !reflect.TypeFor[v1alpha1.PodCounts]().Comparable() {
		t.Error("PodCounts is not comparable")
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
