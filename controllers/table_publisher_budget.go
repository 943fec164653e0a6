package controllers

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolplane/toolplane/controllers/ownership"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// This file holds what the publisher does for the admin ceilings that need
// the whole cluster's view: the budget in force (the flags, capped at what
// the table can hold, and the compressed ceiling learnt from a table that
// did not fit, stepped by ownership.Tighten and ownership.Relax), which
// ownership.Index decides with the rule; the sizes and
// compressed weights of the entries it weighs; and the table writes that
// fail anyway.

// budget returns the budget in force: Budget, its JSON bytes capped at
// what readers accept whatever the flags say and at what the encoder lays
// out while that is known to bind, and the compressed ceiling while one is
// set. p.mu is held.
func (p *TablePublisher) budget() ownership.Budget {
	b := p.Budget
	if b.MaxTableBytes <= 0 || b.MaxTableBytes > int64(spec.MaxTableEntriesBytes) {
		// Whatever the flags say, readers must accept the table.
		b.MaxTableBytes = int64(spec.MaxTableEntriesBytes)
	}
	if p.layoutCeiling > 0 && p.layoutParts == p.maxParts() && p.layoutCeiling < b.MaxTableBytes {
		b.MaxTableBytes, b.TableCeiling = p.layoutCeiling, p.layoutCeilingName()
	}
	if p.encodedCeiling > 0 {
		b.MaxEncodedBytes, b.EncodedCeiling = p.encodedCeiling, p.encodedCeilingName()
	}
	return b
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

// layoutCeilingName names the layout's ceiling in denials: what bounds it,
// never its value, which moves with the tables tried (see
// encodedCeilingName).
func (p *TablePublisher) layoutCeilingName() string {
	return fmt.Sprintf("what its index's %d segments of JSON hold (512 KiB to 1 MiB each, cut at tools)", p.maxParts()-1)
}

// tightenLayout bounds the table's JSON after one did not lay out in its
// segments (see layoutCeilingAfter).
func (p *TablePublisher) tightenLayout(le *spec.TableLayoutError) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.layoutCeiling = layoutCeilingAfter(le)
	p.layoutParts = le.MaxSegments + 1
	p.rebudgetLocked()
}

// layoutCeilingAfter is the ceiling on the table's JSON after a table
// did not lay out in its segments: what the segments of that table held,
// le.Capacity, less about one segment of them (a 64th of 63), so that the
// table kept, whose tools move between segments as some are denied, has
// a segment to spare. Every table tried is so smaller than the last:
// le.Capacity is less than its bytes, which the ceiling in force bounded.
func layoutCeilingAfter(le *spec.TableLayoutError) int64 {
	return max(le.Capacity-le.Capacity/int64(max(le.MaxSegments, 1)+1), 1)
}

// relaxLayout drops the layout's ceiling once the claims fit under it,
// whoever owns their names: it binds nothing then, and a table of them
// was written; or once the table may take other ConfigMaps than it was
// learnt with. p.mu is held.
func (p *TablePublisher) relaxLayout() {
	if p.layoutCeiling <= 0 {
		return
	}
	if p.layoutParts != p.maxParts() {
		p.layoutCeiling = 0
		p.rebudgetLocked()
		return
	}
	var offered int64
	for _, c := range p.claims {
		for i := range c.tools {
			if _, denied := c.denied[c.tools[i].Name]; !denied {
				offered += int64(c.sizes[i])
			}
		}
		if offered > p.layoutCeiling {
			return
		}
	}
	p.layoutCeiling = 0
	p.rebudgetLocked()
}

// tighten lowers the compressed ceiling after a table did not fit (see
// ownership.Tighten).
func (p *TablePublisher) tighten() {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, kept := p.index.Encoded()
	p.encodedCeiling = ownership.Tighten(p.encodedCeiling, p.encodedCapacity(), kept)
	p.rebudgetLocked()
}

// relax drops the compressed ceiling once a table was written that it did
// not bind (see ownership.Relax), and the layout's once the claims fit
// under it.
func (p *TablePublisher) relax() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.relaxLayout()
	bound, _ := p.index.Encoded()
	if c := ownership.Relax(p.encodedCeiling, bound); c != p.encodedCeiling {
		p.encodedCeiling = c
		p.rebudgetLocked()
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

// entrySizesSince is entrySizes of tools, sorted by name, taking the size
// of an entry prev has as it is from prev rather than encode it again, and
// reports which of tools prev has as they are (nil for no prev).
func entrySizesSince(prev *claim, tools []spec.TableTool) (sizes []int32, same []bool) {
	if prev == nil || len(prev.tools) == 0 {
		return entrySizes(tools), nil
	}
	sizes, same = make([]int32, len(tools)), make([]bool, len(tools))
	i := 0
	for j := range tools {
		for i < len(prev.tools) && prev.tools[i].Name < tools[j].Name {
			i++
		}
		if i < len(prev.tools) && prev.tools[i].Name == tools[j].Name && sameEntry(&prev.tools[i], &tools[j]) {
			sizes[j], same[j] = prev.sizes[i], true
			continue
		}
		n, _ := json.Marshal(&tools[j])
		sizes[j] = int32(len(n) + 1)
	}
	return sizes, same
}

// Governed counts the claims of the names a policy matches, and those of
// them from the namespaces it does not permit: what the policy governs and
// denies now.
func (p *TablePublisher) Governed(policy ownership.Policy) (governed, denied int) {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.index.Governed(policy)
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

// sameEntry reports whether a and b are the same entry, as reflect.DeepEqual
// says, field by field: every changed offer compares its entries with the
// last offer's, and reflection took a fifth of the offer's time.
// TestSameEntry fails when TableTool gains a field this does not compare.
func sameEntry(a, b *spec.TableTool) bool {
	return a.Name == b.Name && a.SourceName == b.SourceName && a.Title == b.Title && a.Description == b.Description &&
		sameSlice(a.InputSchema, b.InputSchema) && sameSlice(a.OutputSchema, b.OutputSchema) &&
		samePtr(a.Annotations, b.Annotations, sameAnnotations) &&
		samePtr(a.Execution, b.Execution, func(x, y *spec.Execution) bool { return *x == *y }) &&
		(a.Meta == nil) == (b.Meta == nil) && (len(a.Meta) == 0 && len(b.Meta) == 0 || reflect.DeepEqual(a.Meta, b.Meta)) &&
		a.SchemaDigest == b.SchemaDigest && a.ToolSet == b.ToolSet && a.ToolSetUID == b.ToolSetUID &&
		a.Protocol == b.Protocol && samePtr(a.Endpoints, b.Endpoints, func(x, y *spec.Endpoints) bool { return *x == *y }) &&
		a.CallsPerMinute == b.CallsPerMinute && sameSlice(a.Extensions, b.Extensions)
}

func sameAnnotations(a, b *spec.Annotations) bool {
	return a.Title == b.Title && samePtr(a.ReadOnlyHint, b.ReadOnlyHint, sameValue) &&
		samePtr(a.DestructiveHint, b.DestructiveHint, sameValue) && samePtr(a.IdempotentHint, b.IdempotentHint, sameValue) &&
		samePtr(a.OpenWorldHint, b.OpenWorldHint, sameValue)
}

// samePtr: both nil, or both not and the same by same.
func samePtr[T any](a, b *T, same func(a, b *T) bool) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a == b || same(a, b)
}

func sameValue[T comparable](a, b *T) bool { return *a == *b }

// sameSlice: both nil, or both not and equal, as DeepEqual has it.
func sameSlice[S ~[]E, E comparable](a, b S) bool {
	return (a == nil) == (b == nil) && slices.Equal(a, b)
}
