package controllers

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"

	"github.com/toolplane/toolplane/api/v1alpha1"
)

// TestToolCounts checks the series of toolplane_toolset_tools as the
// metrics endpoint serves them: one for each state a ToolSet has tools in,
// none for a state it has none in (nor for states the metric does not
// count), and none once it has no tools or is forgotten.
func TestToolCounts(t *testing.T) {
	c := newToolCounts()
	statuses := func(states ...v1alpha1.ToolState) []v1alpha1.ToolStatus {
		out := make([]v1alpha1.ToolStatus, len(states))
		for i, s := range states {
			out[i] = v1alpha1.ToolStatus{Name: "t", State: s}
		}
		return out
	}
	a := types.NamespacedName{Namespace: "ns-a", Name: "a"}
	b := types.NamespacedName{Namespace: "ns-b", Name: "b"}
	gone := types.NamespacedName{Namespace: "ns-b", Name: "gone"}
	c.record(a, statuses(v1alpha1.ToolPublished, v1alpha1.ToolPublished, v1alpha1.ToolInvalid, v1alpha1.ToolPending, v1alpha1.ToolDenied))
	c.record(b, statuses(v1alpha1.ToolStale))
	c.record(b, statuses(v1alpha1.ToolPublished, v1alpha1.ToolStale, v1alpha1.ToolConflicted))
	c.record(gone, statuses(v1alpha1.ToolPublished))
	c.forget(gone)
	c.record(types.NamespacedName{Namespace: "ns-b", Name: "empty"}, statuses(v1alpha1.ToolPublished))
	c.record(types.NamespacedName{Namespace: "ns-b", Name: "empty"}, nil)
	c.record(types.NamespacedName{Namespace: "ns-b", Name: "uncounted"}, statuses(v1alpha1.ToolPending))

	want := `
# HELP toolplane_toolset_tools The tools of each ToolSet, by state (Published, Conflicted, Invalid, Filtered, Skewed, Stale); a state the ToolSet has no tool in has no series.
# TYPE toolplane_toolset_tools gauge
toolplane_toolset_tools{name="a",namespace="ns-a",state="Invalid"} 1
toolplane_toolset_tools{name="a",namespace="ns-a",state="Published"} 2
toolplane_toolset_tools{name="b",namespace="ns-b",state="Conflicted"} 1
toolplane_toolset_tools{name="b",namespace="ns-b",state="Published"} 1
toolplane_toolset_tools{name="b",namespace="ns-b",state="Stale"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}
