package search

import (
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// Index is an immutable search index over one table's tools. It is safe for
// concurrent use. Build one with [New]; follow table revisions with
// [Index.Update].
//
// Inside, documents are numbered apart from table indexes, so that an
// update need not renumber them: a full build's documents are its base
// segment, shared by the updates that follow it, and the tools that an
// update adds or changes go into a small delta segment of that update's
// own; a removed or changed tool's old document is dead (tableOf < 0).
type Index struct {
	table *spec.Table
	opts  Options

	docs    []docInfo // by table index
	keys    []uint64  // by table index: contentKey of the tool
	docOf   []uint32  // table index → document
	tableOf []int32   // document → table index, or -1 when dead

	base  *segment // shared with the indexes updated from this one
	delta *segment // documents base.docs and up; nil when none

	sem  *semantic               // nil without Options.Embedder; shared by updates
	vecs atomic.Pointer[vectors] // set once by Embed

	pool sync.Pool // *scratch
}

// segment is an inverted index over a range of documents.
type segment struct {
	dict map[string]uint32 // term → id
	post [][]posting       // by term id, by document ascending
	maxW []float32         // by term id: the largest w of its postings
	docs int               // documents 0 … docs-1 of the index hold its postings
	// avgLen is each field's mean length in terms over the base segment,
	// which the updates that follow it reuse so that their weights are
	// comparable.
	avgLen [numFields]float32
}

// posting is one document holding a term, with the term's saturated BM25F
// term frequency there: idf × w is its share of the document's score.
type posting struct {
	doc uint32
	w   float32
}

// docInfo is what filters read of a tool, computed once.
type docInfo struct {
	flags    uint8
	category string
}

const (
	flagReadOnly uint8 = 1 << iota
	flagDestructive
)

// New builds an index over t's tools. Hits refer to t.Tools by index; the
// index keeps t, which the caller must not modify afterwards. A nil t is an
// empty table.
func New(t *spec.Table, opts *Options) *Index {
	var o Options
	if opts != nil {
		o = *opts
	}
	return build(t, o, newSemantic(&o))
}

func build(t *spec.Table, opts Options, sem *semantic) *Index {
	if t == nil {
		t = &spec.Table{}
	}
	x := &Index{table: t, opts: opts, sem: sem}
	n := len(t.Tools)
	x.docs = make([]docInfo, n)
	x.keys = make([]uint64, n)
	x.docOf = make([]uint32, n)
	x.tableOf = make([]int32, n)
	for i := range t.Tools {
		x.docs[i] = infoOf(&t.Tools[i])
		x.keys[i] = contentKey(&t.Tools[i])
		x.docOf[i] = uint32(i)
		x.tableOf[i] = int32(i)
	}
	x.base = buildSegment(t.Tools, nil, nil)
	return x
}

// Update returns an index of t, a later revision of the table x was built
// from, reusing what it can of x; x itself is unchanged and stays usable.
// The tools of t that x holds unchanged (same name, same searchable
// content) keep their postings; only added and changed tools are analyzed,
// so that a one-tool change costs about one tool's analysis and a pass over
// the table's names, not a rebuild. Past a bound on the documents an update
// chain has added or removed (a tenth of the last full build's, at least
// 64), Update rebuilds in full, so that dead postings never dominate. A
// table not sorted by name is rebuilt too. If t is x's table or has its
// revision, Update returns x.
func (x *Index) Update(t *spec.Table) *Index {
	if t == nil {
		t = &spec.Table{}
	}
	if t == x.table || (t.Revision != "" && t.Revision == x.table.Revision && len(t.Tools) == len(x.table.Tools)) {
		return x
	}
	n := len(t.Tools)
	keys := make([]uint64, n)
	for i := range t.Tools {
		keys[i] = contentKey(&t.Tools[i])
	}

	// Walk the old and new tables in name order; a tool whose name and key
	// match keeps its document.
	old := x.table.Tools
	docOf := make([]uint32, n)
	var added []int // table indexes of t needing a new document
	kept := 0
	j := 0
	for i := range t.Tools {
		name := t.Tools[i].Name
		if i > 0 && name <= t.Tools[i-1].Name {
			return build(t, x.opts, x.sem)
		}
		for j < len(old) && old[j].Name < name {
			j++
		}
		if j < len(old) && old[j].Name == name && x.keys[j] == keys[i] {
			docOf[i] = x.docOf[j]
			kept++
			j++
			continue
		}
		added = append(added, i)
	}
	deltaDocs := len(x.tableOf) - x.base.docs
	dead := len(x.tableOf) - kept // old documents t does not keep, and ones dead before
	if bound := max(64, x.base.docs/10); deltaDocs+len(added) > bound || dead > bound {
		return build(t, x.opts, x.sem)
	}

	y := &Index{table: t, opts: x.opts, keys: keys, docOf: docOf, base: x.base, sem: x.sem}
	y.docs = make([]docInfo, n)
	for i := range t.Tools {
		y.docs[i] = infoOf(&t.Tools[i])
	}
	y.tableOf = make([]int32, len(x.tableOf), len(x.tableOf)+len(added))
	for d := range y.tableOf {
		y.tableOf[d] = -1
	}
	for i, d := range docOf {
		if !contains(added, i) {
			y.tableOf[d] = int32(i)
		}
	}
	if len(added) == 0 {
		y.delta = x.delta
		return y
	}
	first := len(y.tableOf)
	tools := make([]spec.TableTool, len(added))
	for k, i := range added {
		tools[k] = t.Tools[i]
		docOf[i] = uint32(first + k)
		y.tableOf = append(y.tableOf, int32(i))
	}
	y.delta = buildSegment(tools, x.base, x.delta)
	return y
}

// contains reports whether the sorted ints hold i.
func contains(sorted []int, i int) bool {
	lo, hi := 0, len(sorted)
	for lo < hi {
		m := (lo + hi) / 2
		if sorted[m] < i {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo < len(sorted) && sorted[lo] == i
}

// Revision is the revision of the table the index was built from.
func (x *Index) Revision() string { return x.table.Revision }

// Len is the number of tools in the index.
func (x *Index) Len() int { return len(x.table.Tools) }

// docTerm is one term of one document during a build, with its count in
// each field.
type docTerm struct {
	term uint32
	tf   [numFields]uint16
}

// buildSegment indexes tools as documents numbered on from prev's (or from
// 0). With base nil it is a base segment, whose field lengths set avgLen;
// otherwise it is a delta that holds prev's postings (if any) followed by
// tools', weighted with base's avgLen.
func buildSegment(tools []spec.TableTool, base, prev *segment) *segment {
	s := &segment{}
	first := 0
	if prev != nil {
		first = prev.docs
	} else if base != nil {
		first = base.docs
	}
	n := len(tools)
	s.docs = first + n
	s.dict = make(map[string]uint32, 1024)
	if prev != nil {
		s.dict = make(map[string]uint32, len(prev.dict)+64)
	}
	a := newAnalyzer()

	// Pass 1: analyze every tool, keeping its terms with counts per field.
	var (
		all    []docTerm
		starts = make([]int, n+1)
		lens   = make([][numFields]uint16, n)
		df     []uint32
		sum    [numFields]float64
		local  = make(map[uint32]int, 64)
	)
	termID := func(term string) uint32 {
		id, ok := s.dict[term]
		if !ok {
			id = uint32(len(df))
			s.dict[strings.Clone(term)] = id
			df = append(df, 0)
		}
		return id
	}
	if prev != nil {
		for term := range prev.dict {
			s.dict[term] = uint32(len(df))
			df = append(df, 0)
		}
	}
	for i := range tools {
		text := textOf(&tools[i])
		starts[i] = len(all)
		clear(local)
		for f := range numFields {
			each := a.terms
			if f == fieldExact {
				each = exactWords
			}
			each(text[f], func(term string) {
				switch f {
				case fieldOwner:
					term = ownerTerm(term)
				case fieldExact:
					term = exactTerm(term)
				}
				id := termID(term)
				j, ok := local[id]
				if !ok {
					j = len(all)
					local[id] = j
					all = append(all, docTerm{term: id})
					df[id]++
				}
				if all[j].tf[f] < 1<<16-1 {
					all[j].tf[f]++
				}
				if lens[i][f] < 1<<16-1 {
					lens[i][f]++
				}
			})
			sum[f] += float64(lens[i][f])
		}
	}
	starts[n] = len(all)
	if base == nil {
		for f := range numFields {
			s.avgLen[f] = 1
			if n > 0 && sum[f] > 0 {
				s.avgLen[f] = float32(sum[f] / float64(n))
			}
		}
	} else {
		s.avgLen = base.avgLen
	}

	// Pass 2: postings, allocated once at their final size: prev's first.
	s.post = make([][]posting, len(df))
	if prev != nil {
		for term, id := range prev.dict {
			nid := s.dict[term]
			p := prev.post[id]
			s.post[nid] = append(make([]posting, 0, len(p)+int(df[nid])), p...)
		}
	}
	for id, c := range df {
		if s.post[id] == nil {
			s.post[id] = make([]posting, 0, c)
		}
	}
	for i := range n {
		for _, dt := range all[starts[i]:starts[i+1]] {
			s.post[dt.term] = append(s.post[dt.term], posting{doc: uint32(first + i), w: s.weight(dt.tf, lens[i])})
		}
	}
	s.maxW = make([]float32, len(s.post))
	for id, post := range s.post {
		for _, p := range post {
			s.maxW[id] = max(s.maxW[id], p.w)
		}
	}
	return s
}

// weight is BM25F's saturated term frequency of a term that occurs tf[f]
// times in field f of a document whose fields are lens long.
func (s *segment) weight(tf [numFields]uint16, lens [numFields]uint16) float32 {
	var sum float32
	for f := range numFields {
		if tf[f] == 0 {
			continue
		}
		norm := 1 - fieldB[f] + fieldB[f]*float32(lens[f])/s.avgLen[f]
		sum += fieldWeight[f] * float32(tf[f]) / norm
	}
	return sum / (bm25K1 + sum)
}

func infoOf(t *spec.TableTool) docInfo {
	d := docInfo{category: category(t), flags: flagDestructive}

	if a := t.Annotations; a != nil {
		if a.ReadOnlyHint != nil && *a.ReadOnlyHint {
			d.flags = flagReadOnly
		} else if a.DestructiveHint != nil && !*a.DestructiveHint {
			d.flags = 0
		}
	}
	return d
}

// keySeed seeds contentKey; keys are compared only within one process.
var keySeed = maphash.MakeSeed()

// contentKey hashes everything of a tool that the index reads: the fields
// it ranks and the ones it filters by. Two tools with the same name and
// key are the same document.
func contentKey(t *spec.TableTool) uint64 {
	var h maphash.Hash
	h.SetSeed(keySeed)
	str := func(s string) {
		h.WriteString(s)
		h.WriteByte(0)
	}
	str(t.Name)
	str(t.Title)
	str(t.Description)
	h.Write(t.InputSchema)
	h.WriteByte(0)
	if a := t.Annotations; a != nil {
		str(a.Title)
		for _, b := range []*bool{a.ReadOnlyHint, a.DestructiveHint, a.IdempotentHint, a.OpenWorldHint} {
			switch {
			case b == nil:
				h.WriteByte(2)
			case *b:
				h.WriteByte(1)
			default:
				h.WriteByte(0)
			}
		}
	}
	str(category(t))
	str(t.ToolSet.Namespace)
	str(t.ToolSet.Name)
	return h.Sum64()
}
