package search

import (
	"strings"
	"sync"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// Index is an immutable search index over one table's tools. It is safe for
// concurrent use. Build one with [New]; follow table revisions with
// [Index.Update].
type Index struct {
	table *spec.Table
	opts  Options
	docs  []docInfo // by table index

	dict map[string]uint32 // term → id
	post [][]posting       // by term id, by doc ascending
	// avgLen is each field's mean length in terms, frozen at a full build
	// and reused by the updates that follow it.
	avgLen [numFields]float32

	pool sync.Pool // *scratch
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
	if t == nil {
		t = &spec.Table{}
	}
	x := &Index{table: t}
	if opts != nil {
		x.opts = *opts
	}
	x.build()
	return x
}

// Update returns an index of t, a later revision of the table x was built
// from, reusing what it can of x; x itself is unchanged and stays usable.
// If t has x's revision, Update returns x.
func (x *Index) Update(t *spec.Table) *Index {
	if t == nil {
		t = &spec.Table{}
	}
	if t == x.table || (t.Revision != "" && t.Revision == x.table.Revision && len(t.Tools) == len(x.table.Tools)) {
		return x
	}
	return New(t, &x.opts)
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

func (x *Index) build() {
	tools := x.table.Tools
	n := len(tools)
	x.docs = make([]docInfo, n)
	x.dict = make(map[string]uint32, 1024)
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
	for i := range tools {
		t := &tools[i]
		x.docs[i] = infoOf(t)
		text := textOf(t)
		starts[i] = len(all)
		clear(local)
		for f := range numFields {
			a.terms(text[f], func(term string) {
				id, ok := x.dict[term]
				if !ok {
					id = uint32(len(df))
					x.dict[strings.Clone(term)] = id
					df = append(df, 0)
				}
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
	for f := range numFields {
		x.avgLen[f] = 1
		if n > 0 && sum[f] > 0 {
			x.avgLen[f] = float32(sum[f] / float64(n))
		}
	}

	// Pass 2: postings, allocated once at their final size.
	x.post = make([][]posting, len(df))
	for id, c := range df {
		x.post[id] = make([]posting, 0, c)
	}
	for i := range n {
		for _, dt := range all[starts[i]:starts[i+1]] {
			x.post[dt.term] = append(x.post[dt.term], posting{doc: uint32(i), w: x.weight(dt.tf, lens[i])})
		}
	}
}

// weight is BM25F's saturated term frequency of a term that occurs tf[f]
// times in field f of a document whose fields are lens long.
func (x *Index) weight(tf [numFields]uint16, lens [numFields]uint16) float32 {
	var s float32
	for f := range numFields {
		if tf[f] == 0 {
			continue
		}
		norm := 1 - fieldB[f] + fieldB[f]*float32(lens[f])/x.avgLen[f]
		s += fieldWeight[f] * float32(tf[f]) / norm
	}
	return s / (bm25K1 + s)
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
