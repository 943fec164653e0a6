package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/toolkit/spec"
	"github.com/toolplane/toolplane/toolkit/spec/contract"
)

// eventBreakingChange is emitted once per round in which a published tool
// changed in a way that may break its callers.
const eventBreakingChange = "BreakingChange"

// maxBreakingMessage bounds status.tools[].lastBreakingChange.message.
const maxBreakingMessage = 512

// contractRound is what one round found of the changes to the tools this
// ToolSet publishes. It takes effect only once the status that records it
// is written, so that a round whose status write fails repeats the
// comparison instead of losing or doubling the event.
type contractRound struct {
	// baseline is what the table holds of this ToolSet after the round,
	// sorted by published name; nil leaves the last baseline as it is.
	baseline []spec.TableTool
	// breaking lists each breaking change as "tool: path: what".
	breaking []string
}

// checkContracts compares the tools this ToolSet publishes now with the
// versions it published before, records each tool's last breaking change
// in status, and returns the round to commit once the status is written.
// prev is the status before the round.
func (r *ToolSetReconciler) checkContracts(ctx context.Context, ts *v1alpha1.ToolSet, prev []v1alpha1.ToolStatus,
	offered []spec.TableTool, scraped bool, mem *toolSetMemory, now time.Time) (*contractRound, error) {
	// Carry each tool's last breaking change over from the last status.
	var last map[string]*v1alpha1.BreakingChange
	for _, t := range prev {
		if t.LastBreakingChange != nil {
			if last == nil {
				last = map[string]*v1alpha1.BreakingChange{}
			}
			last[t.Name] = t.LastBreakingChange
		}
	}
	for i := range ts.Status.Tools {
		if bc := last[ts.Status.Tools[i].Name]; bc != nil {
			ts.Status.Tools[i].LastBreakingChange = bc.DeepCopy()
		}
	}
	if !scraped {
		// Held through an outage or dropped: nothing new was served.
		return &contractRound{}, nil
	}
	if err := r.loadBaseline(ctx, ts, mem); err != nil {
		return nil, err
	}

	state := make(map[string]v1alpha1.ToolState, len(ts.Status.Tools))
	for _, t := range ts.Status.Tools {
		state[t.Name] = t.State
		if awaitsWrite(t) {
			// Owned: published at the table's next write.
			state[t.Name] = v1alpha1.ToolPublished
		}
	}
	cr := &contractRound{baseline: baselineOf(offered, state)}
	if cr.baseline == nil {
		// Not nil, which would keep the last baseline: nothing is published.
		cr.baseline = []spec.TableTool{}
	}

	now = now.UTC().Truncate(time.Second)
	for _, old := range mem.baseline {
		name := old.Name
		cur, still := findTool(cr.baseline, name)
		if !still {
			if s, listed := state[name]; listed {
				cr.breaking = append(cr.breaking, fmt.Sprintf("%s: the tool is no longer published (%s)", name, s))
			} else {
				cr.breaking = append(cr.breaking, name+": the tool was removed")
			}
			continue
		}
		if digestOf(old) == digestOf(*cur) {
			continue
		}
		changes := contract.Breaking(contract.Compare(contract.FromTableTool(old), contract.FromTableTool(*cur)))
		if len(changes) == 0 {
			continue
		}
		words := make([]string, len(changes))
		for i, c := range changes {
			words[i] = c.Path + ": " + c.Message
			cr.breaking = append(cr.breaking, name+": "+words[i])
		}
		for i := range ts.Status.Tools {
			if ts.Status.Tools[i].Name == name {
				ts.Status.Tools[i].LastBreakingChange = &v1alpha1.BreakingChange{
					Revision: truncate(ts.Status.Revision, 80),
					Time:     metav1.NewTime(now),
					Message:  truncate(strings.Join(words, "; "), maxBreakingMessage),
				}
			}
		}
	}
	return cr, nil
}

// loadBaseline takes, once after the operator starts, the versions of this
// ToolSet's tools that the table holds, so that a change made while the
// operator was down is classified too.
func (r *ToolSetReconciler) loadBaseline(ctx context.Context, ts *v1alpha1.ToolSet, mem *toolSetMemory) error {
	if mem.baselineLoaded {
		return nil
	}
	mem.baseline = nil
	if pl, ok := r.Publisher.(publishedLister); ok {
		tools, err := pl.Published(ctx, client.ObjectKeyFromObject(ts))
		if err != nil {
			return fmt.Errorf("reading the published tools: %w", err)
		}
		mem.baseline = baselineOf(tools, nil)
	}
	mem.baselineLoaded = true
	return nil
}

// baselineOf returns the tools, sorted by name and each name once, that
// the table holds of a ToolSet that offers tools: those it owns, by its
// tools' states (a tool without one counts as owned; status.tools may
// have left a Published tool out). It is tools itself when that is all of
// them in order, as it is in the steady state, so that the baseline shares
// the offer's entries instead of copying them.
func baselineOf(tools []spec.TableTool, state map[string]v1alpha1.ToolState) []spec.TableTool {
	owned := func(t spec.TableTool) bool {
		s, listed := state[t.Name]
		return !listed || s == v1alpha1.ToolPublished
	}
	asIs := true
	for i, t := range tools {
		if !owned(t) || (i > 0 && tools[i-1].Name >= t.Name) {
			asIs = false
			break
		}
	}
	if asIs {
		return tools
	}
	out := make([]spec.TableTool, 0, len(tools))
	for _, t := range tools {
		if owned(t) {
			out = append(out, t)
		}
	}
	// The last of a name stands, as it did in a map by name.
	slices.Reverse(out)
	slices.SortStableFunc(out, compareToolNames)
	return slices.CompactFunc(out, func(a, b spec.TableTool) bool { return a.Name == b.Name })
}

// commitContracts makes a round's baseline the last one, and emits one
// BreakingChange event for its breaking changes. Call it only once the
// status that records the round is written.
func (r *ToolSetReconciler) commitContracts(ts *v1alpha1.ToolSet, mem *toolSetMemory, cr *contractRound) {
	if cr == nil || cr.baseline == nil {
		return
	}
	mem.baseline = cr.baseline
	if len(cr.breaking) == 0 {
		return
	}
	note := fmt.Sprintf("%s that may break callers: %s", plural(len(cr.breaking), "change"), strings.Join(cr.breaking, "; "))
	r.Recorder.Eventf(ts, nil, corev1.EventTypeWarning, eventBreakingChange, "Publish", "%s", truncate(note, 1024))
}

// digestOf is the tool's schemaDigest, computed for an entry of a table
// written before entries carried one.
func digestOf(t spec.TableTool) string {
	if t.SchemaDigest != "" {
		return t.SchemaDigest
	}
	return spec.SchemaDigest(t.InputSchema, t.OutputSchema, t.Annotations, t.Execution)
}
