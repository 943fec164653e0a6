package controllers

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/controllers/ownership"
)

// These specs need no API server: they check how the ownership rule's
// verdicts become a ToolSet's status.
var _ = Describe("The status of the ownership verdicts", func() {
	other := types.NamespacedName{Namespace: "weather", Name: "weather-tools"}

	DescribeTable("sets each tool's state, and the Conflicted condition with the weightiest reason",
		func(v ownership.Verdict, state v1alpha1.ToolState, reason, conditionReason string) {
			tool := v1alpha1.ToolStatus{Name: "get_weather", State: v1alpha1.ToolPublished}
			var nc nameClaims
			nc.apply(&tool, v)
			Expect(tool.State).To(Equal(state))
			Expect(tool.Reason).To(ContainSubstring(reason))

			var conds []metav1.Condition
			nc.setCondition(func(typ string, status metav1.ConditionStatus, reason, msg string) {
				meta.SetStatusCondition(&conds, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg})
			})
			c := meta.FindStatusCondition(conds, v1alpha1.ConditionConflicted)
			Expect(c).NotTo(BeNil())
			Expect(c.Reason).To(Equal(conditionReason))
			Expect(c.Status).To(Equal(map[bool]metav1.ConditionStatus{true: metav1.ConditionFalse, false: metav1.ConditionTrue}[conditionReason == v1alpha1.ReasonNoConflict]))
		},
		Entry("owned", ownership.Verdict{State: ownership.Owned}, v1alpha1.ToolPublished, "", v1alpha1.ReasonNoConflict),
		Entry("conflicted, with the owner", ownership.Verdict{State: ownership.Conflicted, Owner: other},
			v1alpha1.ToolConflicted, "owned by ToolSet weather/weather-tools", v1alpha1.ReasonNameConflict),
		Entry("denied, naming the policy", ownership.Verdict{State: ownership.Denied, Policy: "payments", Reason: "the policy reserves the name for other namespaces"},
			v1alpha1.ToolDenied, "payments: the policy reserves the name", v1alpha1.ReasonNameDenied),
		Entry("denied over budget", ownership.Verdict{State: ownership.Denied, Policy: "OverBudget", Reason: "more than 10 tools"},
			v1alpha1.ToolDenied, "OverBudget: more than 10 tools", v1alpha1.ReasonNameDenied),
		Entry("pending a hand-over", ownership.Verdict{State: ownership.Pending, Reason: "nobody owns the name"},
			v1alpha1.ToolPending, "nobody owns the name", v1alpha1.ReasonHandOverPending),
		Entry("owned, awaiting the table's write: Pending, and no conflict", ownership.Verdict{State: awaitingWrite},
			v1alpha1.ToolPending, v1alpha1.ReasonAwaitingWrite, v1alpha1.ReasonNoConflict),
	)

	It("shows a verdict Owned as Published only once the table readers see has the name", func() {
		verdicts := map[string]ownership.Verdict{
			"written":   {State: ownership.Owned, Owner: other},
			"unwritten": {State: ownership.Owned, Owner: other},
			"taken":     {State: ownership.Conflicted, Owner: other},
		}
		shown := shownVerdicts(verdicts, map[string]bool{"written": true, "taken": true})
		Expect(shown).To(Equal(map[string]ownership.Verdict{
			"written":   {State: ownership.Owned, Owner: other},
			"unwritten": {State: awaitingWrite, Owner: other},
			"taken":     {State: ownership.Conflicted, Owner: other},
		}))
		Expect(verdicts["unwritten"].State).To(Equal(ownership.Owned), "the publisher's verdicts are left as they are")

		ts := &v1alpha1.ToolSet{}
		ts.Status.Tools = []v1alpha1.ToolStatus{{Name: "unwritten", State: v1alpha1.ToolPending, Reason: awaitingWriteReason}}
		setProgress(ts)
		reconciling := meta.FindStatusCondition(ts.Status.Conditions, v1alpha1.ConditionReconciling)
		Expect(reconciling.Status).To(Equal(metav1.ConditionTrue))
		Expect(reconciling.Reason).To(Equal(v1alpha1.ReasonAwaitingWrite))
	})

	It("says what stands of a spec that became invalid: retained tools, and what the last scrape rejected", func() {
		ts := &v1alpha1.ToolSet{}
		ts.Generation = 3
		ts.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonHealthy, ObservedGeneration: 2}}
		ts.Status.Tools = []v1alpha1.ToolStatus{
			{Name: "a", State: v1alpha1.ToolPublished},
			{Name: "b", State: v1alpha1.ToolConflicted, Owner: other.String()},
			{Name: "bad", State: v1alpha1.ToolInvalid, Reason: "no schema"},
			{Name: "gone", State: v1alpha1.ToolStale},
		}
		setInvalidSpec(ts, errTest("spec.include pattern \"[\": syntax error"))
		setRetained(ts, map[string]ownership.Verdict{
			"a":        {State: ownership.Owned},
			"b":        {State: ownership.Conflicted, Owner: other},
			"restored": {State: ownership.Owned},
		})
		Expect(ts.Status.Tools).To(Equal([]v1alpha1.ToolStatus{
			{Name: "a", State: v1alpha1.ToolPublished, Reason: retainedReason},
			{Name: "b", State: v1alpha1.ToolConflicted, Owner: other.String(), Reason: "the name is owned by ToolSet " + other.String()},
			{Name: "bad", State: v1alpha1.ToolInvalid, Reason: "no schema"},
			{Name: "restored", State: v1alpha1.ToolPublished, Reason: retainedReason},
		}))
		Expect(ts.Status.PublishedTools).To(BeEquivalentTo(2))
		Expect(ts.Status.ConflictedTools).To(BeEquivalentTo(1))
		ready := meta.FindStatusCondition(ts.Status.Conditions, v1alpha1.ConditionReady)
		Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		Expect(ready.Reason).To(Equal(v1alpha1.ReasonInvalidSpec))
		Expect(ready.Message).To(HaveSuffix("; 2 tools of the last valid spec still published"))
		Expect(meta.FindStatusCondition(ts.Status.Conditions, v1alpha1.ConditionConflicted).Reason).To(Equal(v1alpha1.ReasonNameConflict))
		for _, c := range ts.Status.Conditions {
			Expect(c.ObservedGeneration).To(BeEquivalentTo(3), "%s describes the current generation", c.Type)
		}
		// kstatus reads it as Stalled: only the user can fix the spec.
		stalled := meta.FindStatusCondition(ts.Status.Conditions, v1alpha1.ConditionStalled)
		Expect(stalled).NotTo(BeNil())
		Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
		Expect(stalled.Reason).To(Equal(v1alpha1.ReasonInvalidSpec))
		Expect(stalled.Message).To(Equal(ready.Message))
		Expect(meta.FindStatusCondition(ts.Status.Conditions, v1alpha1.ConditionReconciling).Status).To(Equal(metav1.ConditionFalse))
	})
})

type errTest string

func (e errTest) Error() string { return string(e) }
