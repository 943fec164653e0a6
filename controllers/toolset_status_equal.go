package controllers

import (
	"reflect"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolplane/toolplane/api/v1alpha1"
)

// statusEqual reports whether two statuses are semantically equal, as
// equality.Semantic.DeepEqual does. Most reconciles change nothing, and
// statusesSame tells that without reflection, several times faster than
// reflect.DeepEqual, which is itself an order of magnitude faster than the
// semantic comparison: statuses either finds equal are semantically equal
// too. Only statuses they tell apart (one changed, or a nil slice against
// an empty one) take the semantic comparison.
func statusEqual(a, b *v1alpha1.ToolSetStatus) bool {
	return statusesSame(a, b) || reflect.DeepEqual(a, b) || equality.Semantic.DeepEqual(a, b)
}

// statusesSame reports whether a and b hold the same values, field by
// field, times as the semantic comparison compares them.
// It never reports true of statuses the semantic comparison tells apart;
// it may report false of some it finds equal. TestStatusesSameFields fails
// when the types gain a field this does not compare.
func statusesSame(a, b *v1alpha1.ToolSetStatus) bool {
	if a.ObservedGeneration != b.ObservedGeneration || a.Pods != b.Pods || a.Revision != b.Revision ||
		a.PublishedTools != b.PublishedTools || a.ConflictedTools != b.ConflictedTools || a.OmittedTools != b.OmittedTools ||
		len(a.Conditions) != len(b.Conditions) || len(a.Tools) != len(b.Tools) {
		return false
	}
	for i := range a.Conditions {
		if !conditionsSame(&a.Conditions[i], &b.Conditions[i]) {
			return false
		}
	}
	for i := range a.Tools {
		if !toolStatusesSame(&a.Tools[i], &b.Tools[i]) {
			return false
		}
	}
	return true
}

func conditionsSame(a, b *metav1.Condition) bool {
	return a.Type == b.Type && a.Status == b.Status && a.ObservedGeneration == b.ObservedGeneration &&
		a.Reason == b.Reason && a.Message == b.Message && sameInstant(a.LastTransitionTime, b.LastTransitionTime)
}

func toolStatusesSame(a, b *v1alpha1.ToolStatus) bool {
	if a.Name != b.Name || a.SourceName != b.SourceName || a.State != b.State || a.Reason != b.Reason || a.Owner != b.Owner {
		return false
	}
	x, y := a.LastBreakingChange, b.LastBreakingChange
	if x == nil || y == nil {
		return x == y
	}
	return x.Revision == y.Revision && x.Message == y.Message && sameInstant(x.Time, y.Time)
}

// sameInstant compares times as the semantic comparison does. Not
// time.Time.Equal, which compares monotonic readings when both have one:
// statusesSame must never find equal what that comparison does not.
func sameInstant(a, b metav1.Time) bool {
	return a.UTC() == b.UTC() //nolint:staticcheck // QF1009: as equality.Semantic compares metav1.Time, above
}
