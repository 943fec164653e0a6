package controllers

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolplane/toolplane/api/v1alpha1"
)

// TrimToolSetForCache is a cache transform for ToolSets: it drops what the
// reconciler never reads and the API server keeps anyway, the managed
// fields and kubectl's last-applied configuration, a second copy of the
// spec as JSON on every ToolSet applied client-side. The manager caches
// every ToolSet; it writes their status only, as a patch, so nothing it
// sends carries what was dropped. The status's lists are cut to their
// length: the JSON decoder grows them as append does, and a ToolSet of 10
// tools came with room for 17 (616 bytes of slack, 3 MB at 5,000
// ToolSets). The words the status repeats on every ToolSet (each tool's
// state and reason, each condition's type, status and reason) share one
// copy (see internStatus).
func TrimToolSetForCache(obj any) (any, error) {
	ts, ok := obj.(*v1alpha1.ToolSet)
	if !ok {
		return obj, nil
	}
	internStatus(&trimToolSet(ts).Status)
	return ts, nil
}

// trimToolSet drops from ts what TrimToolSetForCache drops, but for the
// words it shares.
func trimToolSet(ts *v1alpha1.ToolSet) *v1alpha1.ToolSet {
	ts.ManagedFields = nil
	if cap(ts.Status.Tools) > len(ts.Status.Tools) {
		ts.Status.Tools = slices.Clone(ts.Status.Tools)
	}
	if cap(ts.Status.Conditions) > len(ts.Status.Conditions) {
		ts.Status.Conditions = slices.Clone(ts.Status.Conditions)
	}
	if _, ok := ts.Annotations[corev1.LastAppliedConfigAnnotation]; ok {
		// A copy: the map may be shared with the object the informer was
		// handed.
		kept := make(map[string]string, len(ts.Annotations)-1)
		for k, v := range ts.Annotations {
			if k != corev1.LastAppliedConfigAnnotation {
				kept[k] = v
			}
		}
		if len(kept) == 0 {
			kept = nil
		}
		ts.Annotations = kept
	}
	return ts
}

// statusWords are the values the operator writes in every ToolSet's status
// again and again: tools' states and reasons, conditions' types, statuses
// and reasons.
var statusWords = func() map[string]string {
	words := []string{
		string(metav1.ConditionTrue), string(metav1.ConditionFalse), string(metav1.ConditionUnknown),
		v1alpha1.ConditionReady, v1alpha1.ConditionDegraded, v1alpha1.ConditionStale, v1alpha1.ConditionConflicted,
		v1alpha1.ConditionClamped, v1alpha1.ConditionReconciling, v1alpha1.ConditionStalled,
		string(v1alpha1.ToolPublished), string(v1alpha1.ToolConflicted), string(v1alpha1.ToolInvalid),
		string(v1alpha1.ToolFiltered), string(v1alpha1.ToolSkewed), string(v1alpha1.ToolStale),
		string(v1alpha1.ToolDenied), string(v1alpha1.ToolPending),
		v1alpha1.ReasonPublished, v1alpha1.ReasonNoPods, v1alpha1.ReasonScrapeFailed, v1alpha1.ReasonPartialScrape,
		v1alpha1.ReasonInvalidTools, v1alpha1.ReasonRolloutSkew, v1alpha1.ReasonToolsStale, v1alpha1.ReasonToolsDropped,
		v1alpha1.ReasonNameConflict, v1alpha1.ReasonNameDenied, v1alpha1.ReasonHandOverPending,
		v1alpha1.ReasonAwaitingWrite, v1alpha1.ReasonNoConflict, v1alpha1.ReasonNoService, v1alpha1.ReasonInvalidSpec,
		v1alpha1.ReasonSecretNotFound, v1alpha1.ReasonSecretKeyNotFound, v1alpha1.ReasonConfigMapNotFound,
		v1alpha1.ReasonConfigMapKeyNotFound, v1alpha1.ReasonServiceRefused, v1alpha1.ReasonHealthy,
		v1alpha1.ReasonCeilingApplied, v1alpha1.ReasonWithinCeilings,
	}
	m := make(map[string]string, len(words))
	for _, w := range words {
		m[w] = w
	}
	return m
}()

// intern returns the shared copy of s if it is one of statusWords, else s.
func intern(s string) string {
	if w, ok := statusWords[s]; ok {
		return w
	}
	return s
}

// internStatus points the words of st that statusWords holds at their one
// copy, instead of the one the JSON decoder allocated for each: 10 states
// and the conditions' words, about 400 bytes a ToolSet of 10 tools.
func internStatus(st *v1alpha1.ToolSetStatus) {
	for i := range st.Tools {
		t := &st.Tools[i]
		t.State = v1alpha1.ToolState(intern(string(t.State)))
		t.Reason = intern(t.Reason)
	}
	for i := range st.Conditions {
		c := &st.Conditions[i]
		c.Type, c.Reason = intern(c.Type), intern(c.Reason)
		c.Status = metav1.ConditionStatus(intern(string(c.Status)))
	}
}
