package controllers

import (
	"encoding/json"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolplane/toolplane/controllers/ownership"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// This file holds what the publisher does for the admin ceilings that need
// the whole cluster's view: the budgets of tools per namespace and of table
// bytes (decided by ownership.Budget, a pure function), the policies'
// counts, and the table writes that fail anyway.

// budgeted returns the owned entries that fit the budget, and records the
// others as over budget: their owners' verdicts become Denied (OverBudget),
// and the owners whose set of such names changed are told. entries are
// what the budget needs of each of tools. p.mu is held.
func (p *TablePublisher) budgeted(tools []spec.TableTool, entries []ownership.Entry) []spec.TableTool {
	b := p.Budget
	if b.MaxTableBytes <= 0 || b.MaxTableBytes > spec.MaxTableBytes {
		// Whatever the flags say, the table must stay writable.
		b.MaxTableBytes = spec.MaxTableBytes
	}
	over := b.Apply(entries)
	if !maps.EqualFunc(over, p.overBudget, func(a, b ownership.Denial) bool { return a == b }) {
		for name := range over {
			if _, ok := p.overBudget[name]; !ok {
				p.pending[p.owners[name]] = struct{}{}
			}
		}
		for name := range p.overBudget {
			if _, ok := over[name]; !ok {
				if owner, ok := p.owners[name]; ok {
					p.pending[owner] = struct{}{}
				}
			}
		}
		p.overBudget = over
		p.notifyLocked()
	}
	if len(over) == 0 {
		return tools
	}
	kept := tools[:0:0]
	for _, t := range tools {
		if _, ok := over[t.Name]; !ok {
			kept = append(kept, t)
		}
	}
	return kept
}

// entrySizes returns the bytes each of tools takes in the table: its JSON
// and its separator in the tools array. A claim computes them once, not
// every table write for every entry.
func entrySizes(tools []spec.TableTool) []int32 {
	sizes := make([]int32, len(tools))
	for i := range tools {
		n, _ := json.Marshal(&tools[i])
		sizes[i] = int32(len(n) + 1)
	}
	return sizes
}

// overBudgetVerdict turns the verdict of an owner whose name is over budget
// into Denied (OverBudget). p.mu is held.
func (p *TablePublisher) overBudgetVerdict(name string, v ownership.Verdict) ownership.Verdict {
	if v.State != ownership.Owned {
		return v
	}
	if d, ok := p.overBudget[name]; ok {
		v.State, v.Policy, v.Reason = ownership.Denied, d.Policy, d.Reason
	}
	return v
}

// Governed counts the claims of the names a policy matches, and those of
// them from the namespaces it does not permit: what the policy governs and
// denies now.
func (p *TablePublisher) Governed(policy ownership.Policy) (governed, denied int) {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, claimants := range p.claimants {
		if !policy.Matches(name) {
			continue
		}
		for ts := range claimants.All() {
			governed++
			if !policy.Permits(ts.Namespace) {
				denied++
			}
		}
	}
	return governed, denied
}

// Event reasons of the tool table, recorded on its ConfigMap.
const (
	eventTableWriteFailed    = "TableWriteFailed"
	eventTableWriteRecovered = "TableWriteRecovered"
)

// wroteTable records how a write of the table went: a failure counts in
// toolplane_table_write_failures_total, and the first failure after a
// success, and the first success after, are recorded as events on the
// table's ConfigMap (in the operator's namespace, where whoever runs the
// operator looks), so that a failing table shows in more than a log line.
func (p *TablePublisher) wroteTable(err error) {
	if err != nil {
		tableWriteFailures.Inc()
	}
	failing := err != nil
	if failing == p.writeFailing {
		return
	}
	p.writeFailing = failing
	if p.Recorder == nil {
		return
	}
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: p.namespace(), Name: p.name()},
	}
	if failing {
		p.Recorder.Eventf(cm, nil, corev1.EventTypeWarning, eventTableWriteFailed, "Publish",
			"writing the tool table failed, agents keep the last table until a retry succeeds: %s", truncate(err.Error(), 512))
		return
	}
	p.Recorder.Eventf(cm, nil, corev1.EventTypeNormal, eventTableWriteRecovered, "Publish", "the tool table was written again")
}
