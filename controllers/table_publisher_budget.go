package controllers

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolplane/toolplane/controllers/ownership"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// This file holds what the publisher does for the admin ceilings that need
// the whole cluster's view: the budgets of tools per namespace and of table
// bytes (decided by ownership.Budget, a pure function), the policies'
// counts, and the table writes that fail anyway.

// overBudgetLocked returns the owned names the budget denies among
// entries. p.mu is held.
func (p *TablePublisher) overBudgetLocked(entries []ownership.Entry) map[string]ownership.Denial {
	b := p.Budget
	if b.MaxTableBytes <= 0 || b.MaxTableBytes > spec.MaxTableSegmentedBytes {
		// Whatever the flags say, the table must stay writable.
		b.MaxTableBytes = spec.MaxTableSegmentedBytes
	}
	if p.encodedCeiling > 0 {
		b.MaxEncodedBytes, b.EncodedCeiling = p.encodedCeiling, p.encodedCeilingName()
		var total int64
		for _, e := range entries {
			total += e.Encoded
		}
		p.encodedBinding = total > p.encodedCeiling
	}
	over := b.Apply(entries)
	if p.encodedCeiling > 0 {
		p.encodedKept = 0
		for _, e := range entries {
			if _, ok := over[e.Name]; !ok {
				p.encodedKept += e.Encoded
			}
		}
	}
	return over
}

// passOnLocked hands every name in over whose owner has a permitted rival
// to the rival the rule picks with the owner denied, and reports whether
// any moved. Every claimant of a moved name is told. p.mu is held.
func (p *TablePublisher) passOnLocked(over map[string]ownership.Denial) bool {
	moved := false
	for _, name := range slices.Sorted(maps.Keys(over)) {
		set := p.claimants[name]
		if set.Len() < 2 {
			continue
		}
		owner := p.owners[name]
		d := over[name]
		// A copy of the claimants, the owner denied: Claimants share
		// their storage.
		var without ownership.Claimants
		for ts, cl := range set.All() {
			if ts == owner {
				cl.Denied = &d
			}
			without.Set(ts, cl)
		}
		out := p.rule.Resolve(ownership.Contest{Name: name, Owner: owner, Claimants: without, Hold: p.holds()})
		if !out.Owned() || out.Owner == owner {
			continue
		}
		p.owners[name] = out.Owner
		for ts := range set.All() {
			p.pending[ts] = struct{}{}
		}
		moved = true
	}
	if moved {
		p.notifyLocked()
	}
	return moved
}

// budgeted returns the owned entries that fit the budget, over being those
// it denies, and records them as over budget: their owners' verdicts
// become Denied (OverBudget), and the owners whose set of such names
// changed are told. p.mu is held.
func (p *TablePublisher) budgeted(tools []spec.TableTool, over map[string]ownership.Denial) []spec.TableTool {
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

// overCapacity reports whether err says the table cannot be written
// whatever is stored: more segments or chunks than its ConfigMaps hold.
// ErrTablePartsFull (room taken by chunks in their grace) passes with time.
func overCapacity(err error) bool {
	return errors.Is(err, spec.ErrTableTooLarge) && !errors.Is(err, spec.ErrTablePartsFull)
}

// maxParts returns the ConfigMaps the table may take.
func (p *TablePublisher) maxParts() int {
	if n := int(p.parts.Load()); n >= 2 {
		return min(n, spec.MaxTableParts)
	}
	if p.MaxTableParts >= 2 && p.MaxTableParts < spec.MaxTableParts {
		return p.MaxTableParts
	}
	return spec.MaxTableParts
}

// encodedCapacity is the first compressed ceiling of a table that did not
// fit: nine tenths of what its chunks hold, for the estimate's error.
func (p *TablePublisher) encodedCapacity() int64 {
	return int64(p.maxParts()-1) * spec.MaxTableChunkBytes * 9 / 10
}

// encodedCeilingName names the compressed ceiling in denials. It names what
// bounds it, never the ceiling's current value, which moves with the
// tables tried: status stays the same while the outcome does.
func (p *TablePublisher) encodedCeilingName() string {
	return fmt.Sprintf("the %d ConfigMaps of the tool table (%d chunks of at most %d bytes of gzipped JSON)",
		p.maxParts(), p.maxParts()-1, spec.MaxTableChunkBytes)
}

// tighten lowers the compressed ceiling after a table did not fit: to the
// first estimate, then by a sixth of what the last table kept.
func (p *TablePublisher) tighten() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.encodedCeiling <= 0 {
		p.encodedCeiling = p.encodedCapacity()
		return
	}
	p.encodedCeiling = max(min(p.encodedCeiling, p.encodedKept)*5/6, 1)
}

// relax drops the compressed ceiling once a table was written that it did
// not bind: the pressure is gone, and tables are weighed no more.
func (p *TablePublisher) relax() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.encodedCeiling > 0 && !p.encodedBinding {
		p.encodedCeiling = 0
	}
}

// encodedWeight returns the compressed weight of the claim's tool i: its
// size in the table times how well the claim's tools compress together,
// measured once per claim, when a table first needs it. A claim's tools
// sit together in the table, so this follows what they add to its chunks.
func (c *claim) encodedWeight(i int) int64 {
	if c.ratio == 0 {
		c.ratio = compressionRatio(c.tools)
	}
	return max(int64(float64(c.sizes[i])*c.ratio), 1)
}

// compressionRatio returns the gzipped size of tools' JSON over its size.
func compressionRatio(tools []spec.TableTool) float64 {
	var raw, z countingWriter
	zw, _ := gzip.NewWriterLevel(&z, gzip.DefaultCompression)
	enc := json.NewEncoder(io.MultiWriter(&raw, zw))
	for i := range tools {
		_ = enc.Encode(&tools[i])
	}
	_ = zw.Close()
	if raw.n == 0 {
		return 1
	}
	return float64(z.n) / float64(raw.n)
}

type countingWriter struct{ n int64 }

func (w *countingWriter) Write(b []byte) (int, error) {
	w.n += int64(len(b))
	return len(b), nil
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
