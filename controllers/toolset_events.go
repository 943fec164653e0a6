package controllers

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolplane/toolplane/api/v1alpha1"
)

// emitTransitions emits one event per transition between two statuses that
// were both written, so that a restart or a repeated reconcile never repeats
// an event. A ToolSet's first publish emits none: its status says it.
func (r *ToolSetReconciler) emitTransitions(before, after *v1alpha1.ToolSet) {
	emit := func(typ, reason, action, note string) {
		r.Recorder.Eventf(after, nil, typ, reason, action, "%s", truncate(note, 1024))
	}
	bReady, aReady := condition(before, v1alpha1.ConditionReady), condition(after, v1alpha1.ConditionReady)
	bDeg, aDeg := condition(before, v1alpha1.ConditionDegraded), condition(after, v1alpha1.ConditionDegraded)

	switch {
	case aReady.Reason == v1alpha1.ReasonInvalidSpec && bReady.Reason != v1alpha1.ReasonInvalidSpec:
		emit(corev1.EventTypeWarning, eventInvalidSpec, "Scrape", aReady.Message)
	case waitsForReference(aReady.Reason) && bReady.Reason != aReady.Reason:
		emit(corev1.EventTypeWarning, aReady.Reason, "Scrape", aReady.Message)
	case aReady.Reason == v1alpha1.ReasonScrapeFailed && bReady.Reason != v1alpha1.ReasonScrapeFailed:
		emit(corev1.EventTypeWarning, eventScrapeFailed, "Scrape", aReady.Message)
	case aDeg.Reason == v1alpha1.ReasonPartialScrape && bDeg.Reason != v1alpha1.ReasonPartialScrape:
		emit(corev1.EventTypeWarning, eventScrapeFailed, "Scrape", aDeg.Message)
	}
	wasFailing := bReady.Reason == v1alpha1.ReasonScrapeFailed || bReady.Reason == v1alpha1.ReasonInvalidSpec ||
		waitsForReference(bReady.Reason) || bDeg.Reason == v1alpha1.ReasonPartialScrape
	if wasFailing && after.Status.Pods.Scraped > 0 && after.Status.Pods.Failed == 0 {
		emit(corev1.EventTypeNormal, eventScrapeRecovered, "Scrape", fmt.Sprintf("every one of the %s was scraped", plural(int(after.Status.Pods.Selected), "selected Pod")))
	}
	if aDeg.Reason == v1alpha1.ReasonRolloutSkew && bDeg.Reason != v1alpha1.ReasonRolloutSkew {
		emit(corev1.EventTypeWarning, eventRolloutSkew, "Scrape", aDeg.Message)
	}

	bStale, aStale := condition(before, v1alpha1.ConditionStale), condition(after, v1alpha1.ConditionStale)
	if aStale.Status == metav1.ConditionTrue && bStale.Status != metav1.ConditionTrue {
		emit(corev1.EventTypeWarning, eventToolsStale, "Publish", aStale.Message)
	}
	if aStale.Reason == v1alpha1.ReasonToolsDropped && bStale.Reason != v1alpha1.ReasonToolsDropped {
		emit(corev1.EventTypeWarning, eventToolsDropped, "Publish", aStale.Message)
	}

	// The first status a ToolSet gets says what it published; an event would
	// repeat it at the cost of a second API write for every new ToolSet.
	// Later changes are announced.
	bTools, aTools := inTable(before), inTable(after)
	if bReady.Type != "" && (before.Status.Revision != after.Status.Revision || !slices.Equal(bTools, aTools)) {
		emit(corev1.EventTypeNormal, eventToolsChanged, "Publish",
			fmt.Sprintf("%s in the tool table, revision %q", plural(len(aTools), "tool"), after.Status.Revision))
	}

	bState := map[string]v1alpha1.ToolStatus{}
	for _, t := range before.Status.Tools {
		bState[t.Name] = t
	}
	var lost, won, denied []string
	for _, t := range after.Status.Tools {
		prev, seen := bState[t.Name]
		switch {
		case t.State == v1alpha1.ToolDenied && (!seen || prev.State != v1alpha1.ToolDenied || prev.Reason != t.Reason):
			denied = append(denied, fmt.Sprintf("%s (%s)", t.Name, t.Reason))
		case t.State == v1alpha1.ToolConflicted && (!seen || prev.State != v1alpha1.ToolConflicted || prev.Owner != t.Owner):
			lost = append(lost, fmt.Sprintf("%s (owned by %s)", t.Name, t.Owner))
		case seen && prev.State == v1alpha1.ToolConflicted && (t.State == v1alpha1.ToolPublished || t.State == v1alpha1.ToolStale || awaitsWrite(t)):
			won = append(won, t.Name)
		}
	}
	if len(lost) > 0 {
		emit(corev1.EventTypeWarning, eventConflictLost, "Publish", "names owned by other ToolSets: "+list(lost))
	}
	if len(won) > 0 {
		emit(corev1.EventTypeNormal, eventConflictWon, "Publish", "now owns the names: "+list(won))
	}
	if len(denied) > 0 {
		emit(corev1.EventTypeWarning, eventNameDenied, "Publish", "names denied by a ToolNamePolicy or an admin ceiling: "+list(denied))
	}
}

// condition returns a condition of the ToolSet, or an empty one.
func condition(ts *v1alpha1.ToolSet, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(ts.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// inTable lists the names this ToolSet has in the tool table, sorted, and
// those it owns that await the table's write: the events announce what the
// ledger decided, once.
func inTable(ts *v1alpha1.ToolSet) []string {
	var names []string
	for _, t := range ts.Status.Tools {
		if t.State == v1alpha1.ToolPublished || t.State == v1alpha1.ToolStale || awaitsWrite(t) {
			names = append(names, t.Name)
		}
	}
	return names
}
