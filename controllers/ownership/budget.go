package ownership

import (
	"cmp"
	"container/heap"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// OverBudget names the ceilings in Denied verdicts and denials: the tool is
// beyond a budget the cluster admin set.
const OverBudget = "OverBudget"

// Budget caps what the ToolSets of the cluster publish together. Zero
// fields cap nothing.
type Budget struct {
	// MaxToolsPerNamespace bounds the tools the ToolSets of one namespace
	// publish together.
	MaxToolsPerNamespace int
	// MaxTableBytes bounds the sum of the entries' sizes.
	MaxTableBytes int64
	// TableCeiling names MaxTableBytes in denials, for status, when it is
	// not the flag's: what bounds it. Empty names the flag and its value.
	TableCeiling string
	// MaxEncodedBytes bounds the sum of the entries' encoded weights: what
	// the table takes once compressed, which the ConfigMaps bound whatever
	// the JSON's size. Describe names the ceiling in the denials as EncodedCeiling says.
	MaxEncodedBytes int64
	// EncodedCeiling names MaxEncodedBytes in denials, for status: what
	// bounds it and where it comes from.
	EncodedCeiling string
}

// Entry is one owned tool, as the budget weighs it.
type Entry struct {
	// Name is the published name.
	Name string
	// ToolSet owns the name.
	ToolSet types.NamespacedName
	// Created is when the ToolSet was created.
	Created time.Time
	// Bytes is the size of the tool's table entry.
	Bytes int64
	// Encoded is the tool's share of the compressed table, as the caller
	// estimates it; only MaxEncodedBytes weighs it.
	Encoded int64
	// Kept: the ToolSet owned the name before, and keeps it. A budget
	// denies newcomers before what was kept, so that deciding again from
	// its own outcome denies nothing more.
	Kept bool
}

// Apply decides which entries fit the budget, and returns a denial for
// each of the others, by name. The outcome depends only on the entries, not
// on their order:
//
//   - Within a namespace, tools are kept in claim order: those Kept first,
//     then those of the earliest-created ToolSet (ties by namespace/name),
//     each ToolSet's by name. The tools past MaxToolsPerNamespace are
//     denied, so a newcomer, or a ToolSet created later, cannot push out
//     the tools that were there first.
//   - Past MaxTableBytes, tools are denied from the namespace that then
//     weighs most (ties by name), its last tool in claim order first, until
//     the rest fits: the namespace that bloats the table pays for it, and
//     every other keeps publishing. Newcomers go first: the namespace that
//     weighs most among those with a newcomer left loses its last
//     newcomer, and what was Kept is denied only once no newcomer is left.
//   - Past MaxEncodedBytes, likewise by the entries' Encoded weights, among
//     the entries left: the namespace whose tools compress worst pays.
func (b Budget) Apply(entries []Entry) map[string]Denial {
	denied, _ := b.apply(slices.Clone(entries))
	return denied
}

// apply is Apply, and reports whether MaxEncodedBytes denied any entry.
// It sorts entries in place: the namespaces' entries are runs of it, not
// copies in a map of them.
func (b Budget) apply(entries []Entry) (map[string]Denial, bool) {
	if b.MaxToolsPerNamespace <= 0 && b.MaxEncodedBytes <= 0 {
		// The common case, on every write of the table: no cap per
		// namespace, and a table within its bytes. Nothing to sort.
		var total int64
		for _, e := range entries {
			total += e.Bytes
		}
		if b.MaxTableBytes <= 0 || total <= b.MaxTableBytes {
			return map[string]Denial{}, false
		}
	}
	slices.SortFunc(entries, func(a, b Entry) int {
		return cmp.Or(strings.Compare(a.ToolSet.Namespace, b.ToolSet.Namespace), claimOrder(a, b))
	})
	denied := map[string]Denial{}
	q := &weights{}
	var total int64
	for len(entries) > 0 {
		ns := entries[0].ToolSet.Namespace
		end := 1
		for end < len(entries) && entries[end].ToolSet.Namespace == ns {
			end++
		}
		es := entries[:end:end]
		entries = entries[end:]
		if b.MaxToolsPerNamespace > 0 && len(es) > b.MaxToolsPerNamespace {
			for _, e := range es[b.MaxToolsPerNamespace:] {
				denied[e.Name] = Denial{Policy: OverBudget, Reason: fmt.Sprintf(
					"namespace %s publishes more than %d tools (--max-tools-per-namespace); the earliest-created ToolSets' tools are kept", ns, b.MaxToolsPerNamespace)}
			}
			es = es[:b.MaxToolsPerNamespace]
		}
		w := &weight{ns: ns, entries: es}
		for _, e := range es {
			w.bytes += e.Bytes
			if e.Kept {
				w.kept++
			}
		}
		total += w.bytes
		heap.Push(q, w)
	}
	if b.MaxTableBytes > 0 {
		// One reason per namespace, not one formatted per denial.
		reasons := map[string]Denial{}
		trim(q, total, b.MaxTableBytes, func(e Entry) int64 { return e.Bytes }, func(e Entry, ns string) {
			d, ok := reasons[ns]
			if !ok {
				d = b.denial(passesTableBytes, ns)
				reasons[ns] = d
			}
			denied[e.Name] = d
		})
	}
	encoded := false
	if b.MaxEncodedBytes > 0 {
		// The same namespaces, weighed anew by what is left of them.
		var weight int64
		for _, w := range *q {
			w.bytes = 0
			for _, e := range w.entries {
				w.bytes += e.Encoded
			}
			weight += w.bytes
		}
		heap.Init(q)
		ceiling := cmp.Or(b.EncodedCeiling, fmt.Sprintf("%d bytes compressed", b.MaxEncodedBytes))
		reasons := map[string]Denial{}
		trim(q, weight, b.MaxEncodedBytes, func(e Entry) int64 { return e.Encoded }, func(e Entry, ns string) {
			encoded = true
			d, ok := reasons[ns]
			if !ok {
				d = Denial{Policy: OverBudget, Reason: fmt.Sprintf(
					"the tool table would not fit in %s; tools are denied from the namespace whose tools weigh most compressed, %s", ceiling, ns)}
				reasons[ns] = d
			}
			denied[e.Name] = d
		})
	}
	return denied, encoded
}

// trim denies entries until total is within ceiling: first the newcomers
// (the entries past each namespace's kept ones) of the namespace that weighs
// most among those with a newcomer left, its last in claim order first;
// then, should that not do, what was kept, likewise. q holds what is left
// of every namespace, and its weights are brought up to date.
func trim(q *weights, total, ceiling int64, weigh func(Entry) int64, deny func(Entry, string)) int64 {
	if total <= ceiling {
		return total
	}
	var newcomers weights
	for _, w := range *q {
		if len(w.entries) > w.kept {
			newcomers = append(newcomers, w)
		}
	}
	heap.Init(&newcomers)
	total = trimTo(&newcomers, total, ceiling, func(w *weight) int { return w.kept }, weigh, deny)
	// Every namespace's weight went down or stayed; reorder them all.
	kept := (*q)[:0]
	for _, w := range *q {
		if len(w.entries) > 0 {
			kept = append(kept, w)
		}
	}
	*q = kept
	heap.Init(q)
	return trimTo(q, total, ceiling, func(*weight) int { return 0 }, weigh, deny)
}

// trimTo denies from the namespace of q that weighs most its last entry,
// while total is over ceiling, leaving each namespace floor(w) entries; a
// namespace at its floor leaves q.
func trimTo(q *weights, total, ceiling int64, floor func(*weight) int, weigh func(Entry) int64, deny func(Entry, string)) int64 {
	for total > ceiling && q.Len() > 0 {
		w := (*q)[0]
		last := w.entries[len(w.entries)-1]
		w.entries = w.entries[:len(w.entries)-1]
		w.bytes -= weigh(last)
		total -= weigh(last)
		deny(last, w.ns)
		w.kept = min(w.kept, len(w.entries))
		if len(w.entries) <= floor(w) {
			heap.Pop(q)
		} else {
			heap.Fix(q, 0)
		}
	}
	return total
}

// claimOrder orders entries: those kept first, then by their ToolSet's
// creation, then its namespace/name, then the tool's name.
func claimOrder(a, b Entry) int {
	if a.Kept != b.Kept {
		if a.Kept {
			return -1
		}
		return 1
	}
	if !a.Created.Equal(b.Created) {
		return a.Created.Compare(b.Created)
	}
	return cmp.Or(
		strings.Compare(a.ToolSet.Namespace, b.ToolSet.Namespace),
		strings.Compare(a.ToolSet.Name, b.ToolSet.Name),
		strings.Compare(a.Name, b.Name),
	)
}

// weight is one namespace's kept entries and their bytes.
type weight struct {
	ns      string
	entries []Entry
	bytes   int64
	// kept counts the entries Kept, at the head of entries.
	kept int
}

// weights is a max-heap of namespaces by bytes, ties by name.
type weights []*weight

func (w weights) Len() int { return len(w) }
func (w weights) Less(i, j int) bool {
	if w[i].bytes != w[j].bytes {
		return w[i].bytes > w[j].bytes
	}
	return w[i].ns < w[j].ns
}
func (w weights) Swap(i, j int) { w[i], w[j] = w[j], w[i] }
func (w *weights) Push(x any)   { *w = append(*w, x.(*weight)) }
func (w *weights) Pop() any {
	old := *w
	x := old[len(old)-1]
	*w = old[:len(old)-1]
	return x
}

// Totals are what a set of entries weighs against a budget.
type Totals struct {
	// Tools counts the entries of each namespace.
	Tools   map[string]int
	Bytes   int64
	Encoded int64
}

// Add counts e in t.
func (t *Totals) Add(e Entry) {
	if t.Tools == nil {
		t.Tools = map[string]int{}
	}
	t.Tools[e.ToolSet.Namespace]++
	t.Bytes += e.Bytes
	t.Encoded += e.Encoded
}

// Fits reports whether entries of totals t, which fit the budget, still fit
// with e, and if not the denial [Budget.Apply] would give it, naming the
// first ceiling it passes.
func (b Budget) Fits(t Totals, e Entry) (Denial, bool) {
	c := b.passes(t, e)
	if c == fitsAll {
		return Denial{}, true
	}
	return b.denial(c, e.ToolSet.Namespace), false
}

// ceiling is which of a budget's ceilings an entry passes.
type ceiling int

const (
	fitsAll ceiling = iota
	passesNamespace
	passesTableBytes
	passesEncoded
)

// passes returns the first ceiling e passes beside totals t.
func (b Budget) passes(t Totals, e Entry) ceiling {
	switch {
	case b.MaxToolsPerNamespace > 0 && t.Tools[e.ToolSet.Namespace]+1 > b.MaxToolsPerNamespace:
		return passesNamespace
	case b.MaxTableBytes > 0 && t.Bytes+e.Bytes > b.MaxTableBytes:
		return passesTableBytes
	case b.MaxEncodedBytes > 0 && t.Encoded+e.Encoded > b.MaxEncodedBytes:
		return passesEncoded
	}
	return fitsAll
}

// denial is the denial of a tool of namespace ns for passing c.
func (b Budget) denial(c ceiling, ns string) Denial {
	switch c {
	case passesNamespace:
		return Denial{Policy: OverBudget, Reason: fmt.Sprintf(
			"namespace %s publishes more than %d tools (--max-tools-per-namespace); the earliest-created ToolSets' tools are kept", ns, b.MaxToolsPerNamespace)}
	case passesTableBytes:
		ceiling := cmp.Or(b.TableCeiling, fmt.Sprintf("%d bytes (--max-table-bytes)", b.MaxTableBytes))
		return Denial{Policy: OverBudget, Reason: fmt.Sprintf(
			"the tool table would pass %s; tools are denied from the namespace that weighs most, %s", ceiling, ns)}
	case passesEncoded:
		ceiling := cmp.Or(b.EncodedCeiling, fmt.Sprintf("%d bytes compressed", b.MaxEncodedBytes))
		return Denial{Policy: OverBudget, Reason: fmt.Sprintf(
			"the tool table would not fit in %s; tools are denied from the namespace whose tools weigh most compressed, %s", ceiling, ns)}
	}
	return Denial{}
}

// denials formats each denial of a budget once per namespace and ceiling:
// a decision under a budget that binds names the ceiling of thousands of
// claims, mostly of a few namespaces.
type denials struct {
	b    Budget
	seen map[denialKey]*Denial
}

type denialKey struct {
	c  ceiling
	ns string
}

// fits is b.Fits, the denial shared by every claim of its namespace
// denied for the same ceiling: do not modify it.
func (d *denials) fits(t Totals, e Entry) (*Denial, bool) {
	c := d.b.passes(t, e)
	if c == fitsAll {
		return nil, true
	}
	k := denialKey{c, e.ToolSet.Namespace}
	if dn, ok := d.seen[k]; ok {
		return dn, false
	}
	if d.seen == nil {
		d.seen = map[denialKey]*Denial{}
	}
	dn := ptrTo(d.b.denial(c, k.ns))
	d.seen[k] = dn
	return dn, false
}

// Tighten returns the compressed ceiling (Budget.MaxEncodedBytes) to try
// after a table did not fit under ceiling (zero: none yet): capacity, the
// first estimate of what fits, then a sixth less than the lower of ceiling
// and kept, the encoded weight the last table kept; never below 1. So
// every table tried weighs less than the last.
func Tighten(ceiling, capacity, kept int64) int64 {
	if ceiling <= 0 {
		return capacity
	}
	return max(min(ceiling, kept)*5/6, 1)
}

// Relax returns the compressed ceiling once a table was written: none
// (zero) if the ceiling did not bind it, for the pressure is gone; ceiling
// as it is otherwise.
func Relax(ceiling int64, bound bool) int64 {
	if !bound {
		return 0
	}
	return ceiling
}
