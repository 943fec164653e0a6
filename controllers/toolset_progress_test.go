package controllers

import (
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/internal/credentials"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// TestProgressFollowsReady checks how kstatus reads each Ready reason:
// Stalled when only a change by the user unblocks the ToolSet,
// Reconciling while the operator works (or waits) towards its spec.
func TestProgressFollowsReady(t *testing.T) {
	for _, tc := range []struct {
		reason               string
		stalled, reconciling bool
	}{
		{v1alpha1.ReasonPublished, false, false},
		{v1alpha1.ReasonNoService, false, false},
		{v1alpha1.ReasonInvalidSpec, true, false},
		{v1alpha1.ReasonInvalidTools, true, false},
		{v1alpha1.ReasonServiceRefused, true, false},
		{v1alpha1.ReasonNoPods, false, true},
		{v1alpha1.ReasonScrapeFailed, false, true},
		{v1alpha1.ReasonSecretNotFound, false, true},
		{v1alpha1.ReasonSecretKeyNotFound, false, true},
		{v1alpha1.ReasonConfigMapNotFound, false, true},
		{v1alpha1.ReasonConfigMapKeyNotFound, false, true},
	} {
		ts := &v1alpha1.ToolSet{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
		meta.SetStatusCondition(&ts.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: tc.reason, Message: "m"})
		setProgress(ts)
		stalled := meta.FindStatusCondition(ts.Status.Conditions, v1alpha1.ConditionStalled)
		reconciling := meta.FindStatusCondition(ts.Status.Conditions, v1alpha1.ConditionReconciling)
		if got := stalled.Status == metav1.ConditionTrue; got != tc.stalled {
			t.Errorf("Ready %s: Stalled %t, want %t", tc.reason, got, tc.stalled)
		}
		if got := reconciling.Status == metav1.ConditionTrue; got != tc.reconciling {
			t.Errorf("Ready %s: Reconciling %t, want %t", tc.reason, got, tc.reconciling)
		}
		for _, c := range []*metav1.Condition{stalled, reconciling} {
			if c.Status == metav1.ConditionTrue && c.Reason != tc.reason {
				t.Errorf("Ready %s: %s has reason %s", tc.reason, c.Type, c.Reason)
			}
		}
	}
}

// TestEveryConditionCurrent checks that each way status is written leaves
// no condition at an older generation: kstatus, and any reader, would take
// such a condition as not yet observed.
func TestEveryConditionCurrent(t *testing.T) {
	old := func() *v1alpha1.ToolSet {
		ts := &v1alpha1.ToolSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ts", Generation: 3}}
		for _, typ := range []string{v1alpha1.ConditionReady, v1alpha1.ConditionDegraded, v1alpha1.ConditionStale, v1alpha1.ConditionConflicted,
			v1alpha1.ConditionClamped, v1alpha1.ConditionReconciling, v1alpha1.ConditionStalled} {
			meta.SetStatusCondition(&ts.Status.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionFalse, Reason: "Old", Message: "old", ObservedGeneration: 2})
		}
		ts.Status.ObservedGeneration = 2
		return ts
	}
	r := &ToolSetReconciler{}
	mem := func() *toolSetMemory { return &toolSetMemory{interval: 5 * time.Second} }
	published := round{selected: 1, docs: []*spec.Document{{}}}
	tools := []spec.TableTool{{Name: "a"}}
	for name, write := range map[string]func(*v1alpha1.ToolSet){
		"invalid spec": func(ts *v1alpha1.ToolSet) {
			setInvalidSpec(ts, errors.New("spec.selector: bad"))
			setRetained(ts, nil)
		},
		"missing Secret": func(ts *v1alpha1.ToolSet) {
			rd := round{selected: 1, credErr: &credentials.MissingReference{Kind: credentials.KindSecret, Name: "s", Key: "k"}}
			r.setStatus(ts, rd, assembly{}, nil, nil, false, mem())
		},
		"held through an outage": func(ts *v1alpha1.ToolSet) {
			m := mem()
			m.outageSince = time.Now()
			r.setStatus(ts, round{selected: 1, failures: []string{"pod p: down"}, blind: 1}, assembly{}, tools, nil, true, m)
		},
		"published": func(ts *v1alpha1.ToolSet) {
			r.setStatus(ts, published, assembly{tools: tools}, tools, nil, false, mem())
		},
		"service refused": func(ts *v1alpha1.ToolSet) {
			r.setStatus(ts, published, assembly{tools: tools}, tools, nil, false, mem())
			setServiceRefused(ts, "it is of type ExternalName")
		},
	} {
		ts := old()
		write(ts)
		if ts.Status.ObservedGeneration != 3 {
			t.Errorf("%s: status.observedGeneration %d", name, ts.Status.ObservedGeneration)
		}
		for _, c := range ts.Status.Conditions {
			if c.ObservedGeneration != 3 {
				t.Errorf("%s: condition %s at generation %d", name, c.Type, c.ObservedGeneration)
			}
			// An invalid spec keeps what was observed before (its tools
			// stand), at this generation; every other path recomputes all.
			if c.Reason == "Old" && name != "invalid spec" {
				t.Errorf("%s: condition %s left as it was", name, c.Type)
			}
		}
	}
}

// TestServiceRefusedStalls checks that the pair follows Ready when
// setServiceRefused changes it after the other conditions were set.
func TestServiceRefusedStalls(t *testing.T) {
	ts := &v1alpha1.ToolSet{ObjectMeta: metav1.ObjectMeta{Generation: 1}}
	tools := []spec.TableTool{{Name: "a"}}
	(&ToolSetReconciler{}).setStatus(ts, round{selected: 1, docs: []*spec.Document{{}}}, assembly{tools: tools}, tools, nil, false, &toolSetMemory{interval: 5 * time.Second})
	setServiceRefused(ts, "it is of type ExternalName")
	if c := meta.FindStatusCondition(ts.Status.Conditions, v1alpha1.ConditionStalled); c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonServiceRefused {
		t.Errorf("Stalled is %s %s, want True ServiceRefused", c.Status, c.Reason)
	}
}
