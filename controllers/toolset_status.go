package controllers

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/controllers/ownership"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// Event reasons, emitted on transitions only.
const (
	eventScrapeFailed    = "ScrapeFailed"
	eventScrapeRecovered = "ScrapeRecovered"
	eventToolsChanged    = "ToolsChanged"
	eventRolloutSkew     = "RolloutSkew"
	eventConflictLost    = "ConflictLost"
	eventConflictWon     = "ConflictWon"
	eventToolsStale      = "ToolsStale"
	eventToolsDropped    = "ToolsDropped"
	eventInvalidSpec     = "InvalidSpec"
	eventNameDenied      = "NameDenied"
)

// maxListed bounds the names listed in one condition or event message.
const maxListed = 5

// round is how one round of scrapes of a ToolSet went.
type round struct {
	selected int
	docs     []*spec.Document
	// failures are the Pods that could not be scraped, with why, sorted by
	// Pod name.
	failures []string
	// lastKnown are the last documents of Pods that failed this round but
	// served one before: still ready, they still count for skew. blind
	// counts failed Pods that never served one; they may lack any tool.
	lastKnown []*spec.Document
	blind     int
	// credErr is a credential the user must fix; no Pod was scraped.
	credErr error
}

// newRound sums up the results of a round; last holds each Pod's document
// from earlier rounds, by UID.
func newRound(pods []*corev1.Pod, results []podResult, credErr error, last podDocs) round {
	rd := round{selected: len(pods), credErr: credErr}
	for _, res := range results {
		if res.err != nil {
			rd.failures = append(rd.failures, fmt.Sprintf("pod %s: %s", res.pod.Name, stableError(res.err)))
			if prev, ok := last.get(res.pod.UID); ok && prev.doc != nil {
				rd.lastKnown = append(rd.lastKnown, prev.doc)
			} else {
				rd.blind++
			}
			continue
		}
		rd.docs = append(rd.docs, res.doc)
	}
	return rd
}

// setStatus writes what the round made of the ToolSet into its status.
// Every message is built from what was observed, never from the clock, so
// that a round that observes the same as the last writes nothing.
func (r *ToolSetReconciler) setStatus(ts *v1alpha1.ToolSet, rd round, a assembly, offered []spec.TableTool,
	verdicts map[string]ownership.Verdict, held bool, mem *toolSetMemory) {
	st := &ts.Status
	st.ObservedGeneration = ts.Generation
	st.Pods = v1alpha1.PodCounts{
		Selected: int32(rd.selected),
		Scraped:  int32(len(rd.docs)),
		Failed:   int32(len(rd.failures)),
	}
	if rd.credErr != nil {
		st.Pods.Failed = int32(rd.selected)
	}

	// Sized once; nil, as before, when there is no tool.
	var tools []v1alpha1.ToolStatus
	if n := len(a.rejected) + len(offered); n > 0 {
		tools = append(make([]v1alpha1.ToolStatus, 0, n), a.rejected...)
	}
	var claims nameClaims
	staleReason := ""
	if held {
		staleReason = fmt.Sprintf("no Pod could be scraped since %s; held until %s",
			mem.outageSince.UTC().Format(time.RFC3339), staleDeadline(ts, mem).UTC().Format(time.RFC3339))
	}
	for _, t := range offered {
		tool := v1alpha1.ToolStatus{Name: t.Name, SourceName: t.SourceName, State: v1alpha1.ToolPublished}
		if held {
			tool.State, tool.Reason = v1alpha1.ToolStale, staleReason
		}
		claims.apply(&tool, verdicts[t.Name])
		tools = append(tools, tool)
	}
	st.PublishedTools, st.ConflictedTools = 0, 0
	for _, t := range tools {
		switch t.State {
		case v1alpha1.ToolPublished:
			st.PublishedTools++
		case v1alpha1.ToolConflicted:
			st.ConflictedTools++
		}
	}
	st.Tools, st.OmittedTools = capTools(tools, maxStatusTools)
	switch {
	case len(rd.docs) > 0:
		st.Revision = a.revision
	case held:
		st.Revision = mem.heldRevision
	default:
		st.Revision = ""
	}

	r.setConditions(ts, rd, a, held, mem, claims)
}

// nameClaims collects the names a ToolSet exposes but does not own, by
// verdict, for the Conflicted condition.
type nameClaims struct {
	conflicted, denied, pending []string
}

// awaitingWrite is what status makes of a verdict Owned on a name that
// the table readers see does not have under the ToolSet yet (see
// Publisher.Written): never a verdict of the rule. The tool is Pending,
// reason AwaitingWrite, until the write, so that status says Published
// only of what the table has.
const awaitingWrite ownership.State = v1alpha1.ReasonAwaitingWrite

// awaitingWriteReason is the reason of a tool whose name awaits the write.
const awaitingWriteReason = v1alpha1.ReasonAwaitingWrite + ": this ToolSet owns the name; it is published once the tool table is next written"

// shownVerdicts returns the verdicts as status shows them: each Owned one
// whose name is not written becomes awaitingWrite. verdicts is not
// modified.
func shownVerdicts(verdicts map[string]ownership.Verdict, written map[string]bool) map[string]ownership.Verdict {
	var out map[string]ownership.Verdict
	for name, v := range verdicts {
		if v.State != ownership.Owned || written[name] {
			continue
		}
		if out == nil {
			out = maps.Clone(verdicts)
		}
		v.State = awaitingWrite
		out[name] = v
	}
	if out == nil {
		return verdicts
	}
	return out
}

// apply sets a tool's state from the ownership rule's verdict on its name.
// A tool the ToolSet owns keeps the state it has (Published or Stale).
func (nc *nameClaims) apply(tool *v1alpha1.ToolStatus, v ownership.Verdict) {
	switch v.State {
	case ownership.Conflicted:
		tool.State, tool.Owner, tool.Reason = v1alpha1.ToolConflicted, v.Owner.String(), "the name is owned by ToolSet "+v.Owner.String()
		nc.conflicted = append(nc.conflicted, fmt.Sprintf("%s (%s)", tool.Name, v.Owner))
	case ownership.Denied:
		tool.State, tool.Reason = v1alpha1.ToolDenied, truncate(v.Policy+": "+v.Reason, maxReasonLen)
		if v.Owner != (types.NamespacedName{}) {
			tool.Owner = v.Owner.String()
		}
		nc.denied = append(nc.denied, fmt.Sprintf("%s (%s)", tool.Name, v.Policy))
	case ownership.Pending:
		tool.State, tool.Owner, tool.Reason = v1alpha1.ToolPending, "", truncate(v.Reason, maxReasonLen)
		nc.pending = append(nc.pending, tool.Name)
	case awaitingWrite:
		// Owned, but not yet in the table readers see: not a conflict.
		tool.State, tool.Owner, tool.Reason = v1alpha1.ToolPending, "", awaitingWriteReason
	}
}

// setCondition sets the Conflicted condition: True while some exposed name
// is not owned, with the weightiest reason first.
func (nc *nameClaims) setCondition(set func(typ string, status metav1.ConditionStatus, reason, msg string)) {
	var reason string
	var msgs []string
	if len(nc.conflicted) > 0 {
		reason = v1alpha1.ReasonNameConflict
		msgs = append(msgs, fmt.Sprintf("%s owned by other ToolSets: %s", are(len(nc.conflicted), "tool"), list(nc.conflicted)))
	}
	if len(nc.denied) > 0 {
		reason = cmp.Or(reason, v1alpha1.ReasonNameDenied)
		msgs = append(msgs, fmt.Sprintf("%s denied by policy: %s", are(len(nc.denied), "tool"), list(nc.denied)))
	}
	if len(nc.pending) > 0 {
		reason = cmp.Or(reason, v1alpha1.ReasonHandOverPending)
		msgs = append(msgs, fmt.Sprintf("%s waiting to be handed over after a restart: %s", are(len(nc.pending), "tool"), list(nc.pending)))
	}
	if reason == "" {
		set(v1alpha1.ConditionConflicted, metav1.ConditionFalse, v1alpha1.ReasonNoConflict, "this ToolSet owns every name it exposes")
		return
	}
	set(v1alpha1.ConditionConflicted, metav1.ConditionTrue, reason, strings.Join(msgs, "; "))
}

// maxStatusTools bounds status.tools (its CRD MaxItems), so that a
// ToolSet of many tools stays far below the API server's object size limit.
const maxStatusTools = 1000

// omitFirst orders the states by how little a user misses them in status:
// Published tools are left out first, Invalid ones last.
var omitFirst = map[v1alpha1.ToolState]int{
	v1alpha1.ToolPublished: 0, v1alpha1.ToolFiltered: 1, v1alpha1.ToolStale: 2, v1alpha1.ToolPending: 3,
	v1alpha1.ToolSkewed: 4, v1alpha1.ToolConflicted: 5, v1alpha1.ToolDenied: 6, v1alpha1.ToolInvalid: 7,
}

// capTools keeps at most n tools, those that say most, sorted by name, and
// returns how many it left out.
func capTools(tools []v1alpha1.ToolStatus, n int) ([]v1alpha1.ToolStatus, int32) {
	byName := func(x, y v1alpha1.ToolStatus) int { return strings.Compare(x.Name, y.Name) }
	if len(tools) <= n {
		slices.SortFunc(tools, byName)
		return tools, 0
	}
	slices.SortFunc(tools, func(x, y v1alpha1.ToolStatus) int {
		return cmp.Or(omitFirst[y.State]-omitFirst[x.State], byName(x, y))
	})
	kept := tools[:n]
	slices.SortFunc(kept, byName)
	return kept, int32(len(tools) - n)
}

// staleDeadline is when the tools held through the current outage go.
func staleDeadline(ts *v1alpha1.ToolSet, mem *toolSetMemory) time.Time {
	interval := mem.interval
	if interval <= 0 {
		interval = Ceilings{}.effectiveOf(ts).interval
	}
	return mem.deadline(interval)
}

func (r *ToolSetReconciler) setConditions(ts *v1alpha1.ToolSet, rd round, a assembly, held bool, mem *toolSetMemory, claims nameClaims) {
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&ts.Status.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: truncate(msg, 1024), ObservedGeneration: ts.Generation,
		})
	}
	st := &ts.Status
	outage := len(rd.docs) == 0

	// Ready summarises.
	switch {
	case rd.credErr != nil:
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, credentialReason(rd.credErr), rd.credErr.Error())
	case rd.selected == 0:
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNoPods,
			fmt.Sprintf("the selector matches no Running and Ready Pod with an IP in namespace %s", ts.Namespace))
	case outage:
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonScrapeFailed,
			fmt.Sprintf("none of the %s could be scraped: %s", plural(rd.selected, "selected Pod"), rd.failures[0]))
	case len(a.tools) == 0 && a.count(v1alpha1.ToolInvalid) > 0:
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonInvalidTools,
			fmt.Sprintf("no valid tool to publish: %s", invalidSummary(a)))
	case ts.Spec.Service == nil:
		set(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonNoService,
			fmt.Sprintf("%s published without endpoints: spec.service is not set, so agents have no endpoint to call them", plural(int(st.PublishedTools), "tool")))
	default:
		set(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonPublished,
			fmt.Sprintf("%s published from %s", plural(int(st.PublishedTools), "tool"), plural(len(rd.docs), "Pod")))
	}

	// Degraded details what kept part of the ToolSet out.
	var reasons, msgs []string
	degrade := func(reason, msg string) { reasons, msgs = append(reasons, reason), append(msgs, msg) }
	if outage {
		ready := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
		degrade(ready.Reason, ready.Message)
	}
	if !outage && len(rd.failures) > 0 {
		degrade(v1alpha1.ReasonPartialScrape, fmt.Sprintf("%d of %s could not be scraped: %s",
			len(rd.failures), plural(rd.selected, "selected Pod"), rd.failures[0]))
	}
	if a.skew != "" {
		degrade(v1alpha1.ReasonRolloutSkew, a.skew)
	}
	if a.count(v1alpha1.ToolInvalid) > 0 {
		degrade(v1alpha1.ReasonInvalidTools, invalidSummary(a))
	}
	if len(reasons) > 0 {
		set(v1alpha1.ConditionDegraded, metav1.ConditionTrue, reasons[0], strings.Join(msgs, "; "))
	} else {
		set(v1alpha1.ConditionDegraded, metav1.ConditionFalse, v1alpha1.ReasonHealthy, "every selected Pod was scraped and every tool is valid")
	}

	// Stale says whether tools are held through an outage, or were dropped.
	switch {
	case held:
		set(v1alpha1.ConditionStale, metav1.ConditionTrue, v1alpha1.ReasonToolsStale,
			fmt.Sprintf("no Pod could be scraped since %s; the last good tools are held until %s, then dropped",
				mem.outageSince.UTC().Format(time.RFC3339), staleDeadline(ts, mem).UTC().Format(time.RFC3339)))
	case outage && mem.dropped:
		set(v1alpha1.ConditionStale, metav1.ConditionFalse, v1alpha1.ReasonToolsDropped,
			fmt.Sprintf("no Pod could be scraped since %s; the held tools were dropped after %d intervals",
				mem.outageSince.UTC().Format(time.RFC3339), staleIntervals))
	default:
		set(v1alpha1.ConditionStale, metav1.ConditionFalse, v1alpha1.ReasonHealthy, "no tool is held through an outage")
	}

	if len(mem.clamped) > 0 {
		set(v1alpha1.ConditionClamped, metav1.ConditionTrue, v1alpha1.ReasonCeilingApplied, strings.Join(mem.clamped, "; "))
	} else {
		set(v1alpha1.ConditionClamped, metav1.ConditionFalse, v1alpha1.ReasonWithinCeilings, "the spec asks for nothing beyond the admin ceilings")
	}

	claims.setCondition(set)
	setProgress(ts)
}

// setProgress sets Reconciling and Stalled, as kstatus reads them, from the
// other conditions: Stalled when only the user can unblock the ToolSet,
// Reconciling while the operator keeps working on it, both False once it
// is where its spec and its Pods put it.
func setProgress(ts *v1alpha1.ToolSet) {
	st := &ts.Status
	find := func(typ string) *metav1.Condition {
		if c := meta.FindStatusCondition(st.Conditions, typ); c != nil && c.Status == metav1.ConditionTrue {
			return c
		}
		return nil
	}
	var stalled, reconciling *metav1.Condition
	if ready := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady); ready != nil {
		switch ready.Reason {
		case v1alpha1.ReasonInvalidSpec, v1alpha1.ReasonInvalidTools, v1alpha1.ReasonServiceRefused:
			// ServiceRefused: the Service must change (it is watched).
			stalled = ready
		case v1alpha1.ReasonNoPods, v1alpha1.ReasonScrapeFailed:
			reconciling = ready
		default:
			// Waiting for a Secret or ConfigMap is progress that needs no
			// change of the spec: whoever creates it (a sibling in the same
			// apply, an external secrets operator) unblocks the ToolSet.
			if waitsForReference(ready.Reason) {
				reconciling = ready
			}
		}
	}
	if stalled == nil && reconciling == nil {
		if c := find(v1alpha1.ConditionStale); c != nil {
			reconciling = c
		} else if c := find(v1alpha1.ConditionDegraded); c != nil && c.Reason == v1alpha1.ReasonRolloutSkew {
			reconciling = c
		} else if c := find(v1alpha1.ConditionConflicted); c != nil && c.Reason == v1alpha1.ReasonHandOverPending {
			reconciling = c
		} else if n := awaitingWrites(st.Tools); n > 0 {
			reconciling = &metav1.Condition{Reason: v1alpha1.ReasonAwaitingWrite,
				Message: fmt.Sprintf("%s owned, and published once the tool table is next written", are(n, "tool"))}
		}
	}
	set := func(typ string, from *metav1.Condition, idle string) {
		c := metav1.Condition{Type: typ, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonHealthy, Message: idle, ObservedGeneration: ts.Generation}
		if from != nil {
			c.Status, c.Reason, c.Message = metav1.ConditionTrue, from.Reason, from.Message
		}
		meta.SetStatusCondition(&st.Conditions, c)
	}
	set(v1alpha1.ConditionStalled, stalled, "nothing waits for a change by the user")
	set(v1alpha1.ConditionReconciling, reconciling, "the ToolSet is where its spec and its Pods put it")
}

// awaitsWrite reports whether the tool's name is the ToolSet's and awaits
// the table's write: events and contracts count it as published, as the
// ledger has it, so that its write announces nothing twice.
func awaitsWrite(t v1alpha1.ToolStatus) bool {
	return t.State == v1alpha1.ToolPending && t.Reason == awaitingWriteReason
}

// awaitingWrites counts the tools of status whose name awaits the table's
// write.
func awaitingWrites(tools []v1alpha1.ToolStatus) int {
	n := 0
	for _, t := range tools {
		if awaitsWrite(t) {
			n++
		}
	}
	return n
}

// setInvalidSpec reports a spec that cannot be acted on. The last offer
// stands until the spec is fixed.
func setInvalidSpec(ts *v1alpha1.ToolSet, err error) {
	ts.Status.ObservedGeneration = ts.Generation
	meta.SetStatusCondition(&ts.Status.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonInvalidSpec,
		Message: truncate(err.Error(), 1024), ObservedGeneration: ts.Generation,
	})
	// The other conditions describe this generation too: what it claimed
	// before stands, and nothing else was observed of it. Left at an older
	// generation, a reader such as kstatus takes them as not yet observed.
	for i := range ts.Status.Conditions {
		ts.Status.Conditions[i].ObservedGeneration = ts.Generation
	}
	setProgress(ts)
}

// retainedReason is the reason of a tool still published while the spec is
// invalid.
const retainedReason = "still published as last offered (or, after a restart, as read back from the tool table): the spec is invalid, so the Pods are not scraped"

// setRetained makes status say what stands of a ToolSet whose spec is
// invalid: the tools it still claims, each with the ownership rule's
// verdict, beside the tools the last valid spec rejected. The Ready message
// says how many are still published.
func setRetained(ts *v1alpha1.ToolSet, verdicts map[string]ownership.Verdict) {
	st := &ts.Status
	var (
		tools  []v1alpha1.ToolStatus
		claims nameClaims
		seen   = map[string]bool{}
	)
	retained := func(tool v1alpha1.ToolStatus) {
		// Whatever else status keeps of the tool (its last breaking change)
		// still holds.
		seen[tool.Name] = true
		tool.State, tool.Owner, tool.Reason = v1alpha1.ToolPublished, "", retainedReason
		claims.apply(&tool, verdicts[tool.Name])
		tools = append(tools, tool)
	}
	for _, t := range st.Tools {
		switch t.State {
		case v1alpha1.ToolInvalid, v1alpha1.ToolFiltered, v1alpha1.ToolSkewed:
			// What the last scrape rejected; nothing newer is known.
			tools = append(tools, t)
		default:
			if _, claimed := verdicts[t.Name]; claimed {
				retained(t)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(verdicts)) {
		if !seen[name] {
			retained(v1alpha1.ToolStatus{Name: name})
		}
	}
	st.PublishedTools, st.ConflictedTools = 0, 0
	for _, t := range tools {
		switch t.State {
		case v1alpha1.ToolPublished:
			st.PublishedTools++
		case v1alpha1.ToolConflicted:
			st.ConflictedTools++
		}
	}
	st.Tools, st.OmittedTools = capTools(tools, maxStatusTools)
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: truncate(msg, 1024), ObservedGeneration: ts.Generation,
		})
	}
	if ready := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady); ready != nil {
		ready.Message = truncate(fmt.Sprintf("%s; %s of the last valid spec still published", ready.Message, plural(int(st.PublishedTools), "tool")), 1024)
	}
	claims.setCondition(set)
	setProgress(ts)
}

func invalidSummary(a assembly) string {
	var names []string
	for _, t := range a.rejected {
		if t.State == v1alpha1.ToolInvalid {
			names = append(names, t.Name)
		}
	}
	return fmt.Sprintf("%s invalid (reasons in status.tools): %s", are(len(names), "tool"), list(names))
}

// are counts with its verb: "1 tool is", "2 tools are".
func are(n int, noun string) string {
	if n == 1 {
		return "1 " + noun + " is"
	}
	return plural(n, noun) + " are"
}

// list joins names, at most maxListed of them.
func list(names []string) string {
	if len(names) <= maxListed {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:maxListed], ", "), len(names)-maxListed)
}

// patchStatus writes a status that changed, and only then emits the events
// of the transitions it records: steady state costs no API write, since
// Reconcile calls it only when the status changed.
//
// The patch is a JSON merge patch of the status alone, computed from the
// two statuses rather than the two whole objects, and it is sent for the
// object's metadata only (metav1.PartialObjectMetadata): the API server
// answers with the metadata, not the whole ToolSet it wrote, so that
// neither side encodes or decodes the object again for nothing. Only the
// new resourceVersion is taken from the answer; ts keeps the status it
// was given.
func (r *ToolSetReconciler) patchStatus(ctx context.Context, before, ts *v1alpha1.ToolSet) error {
	data, err := statusMergePatch(&before.Status, &ts.Status)
	if err != nil {
		return fmt.Errorf("patching status: %w", err)
	}
	written := &metav1.PartialObjectMetadata{TypeMeta: toolSetTypeMeta,
		ObjectMeta: metav1.ObjectMeta{Namespace: ts.Namespace, Name: ts.Name}}
	if err := r.Client.Status().Patch(ctx, written, client.RawPatch(types.MergePatchType, data)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("patching status: %w", err)
	}
	ts.ResourceVersion = written.ResourceVersion
	ready := meta.FindStatusCondition(ts.Status.Conditions, v1alpha1.ConditionReady)
	ctrl.LoggerFrom(ctx).Info("Updated status", "ready", ready.Status, "reason", ready.Reason,
		"published", ts.Status.PublishedTools, "conflicted", ts.Status.ConflictedTools)
	r.emitTransitions(before, ts)
	return nil
}

// statusMergePatch is the JSON merge patch (RFC 7386) that takes an object
// whose status is from to one whose status is to, and changes nothing
// else: what client.MergeFrom computes from the two whole objects.
func statusMergePatch(from, to *v1alpha1.ToolSetStatus) ([]byte, error) {
	type statusOnly struct {
		Status *v1alpha1.ToolSetStatus `json:"status"`
	}
	original, err := json.Marshal(statusOnly{from})
	if err != nil {
		return nil, err
	}
	modified, err := json.Marshal(statusOnly{to})
	if err != nil {
		return nil, err
	}
	return jsonpatch.CreateMergePatch(original, modified)
}

// localAddress matches the local end of a connection in a net.OpError's
// text, "127.0.0.1:60364->" or "[::1]:60364->": an ephemeral port, new on
// every connection.
var localAddress = regexp.MustCompile(`(?:\d{1,3}(?:\.\d{1,3}){3}|\[[0-9A-Fa-f:.%a-zA-Z0-9]+\]):\d{1,5}->`)

// stableError returns err's text for status: the same for the same failure
// on every round, so that a Pod that keeps failing the same way costs no
// status write. The local end of a connection is left out (a Pod that
// resets connections put a new ephemeral port in every message); the
// remote address, the URL and the error's class stay. Logs and events keep
// the whole error.
func stableError(err error) string {
	return localAddress.ReplaceAllString(err.Error(), "")
}
