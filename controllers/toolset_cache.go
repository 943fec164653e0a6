package controllers

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

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
// ToolSets).
func TrimToolSetForCache(obj any) (any, error) {
	ts, ok := obj.(*v1alpha1.ToolSet)
	if !ok {
		return obj, nil
	}
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
	return ts, nil
}
