package search

import (
	"slices"
)

// Top-k retrieval with MaxScore (Turtle and Flood, 1995): documents are
// scored one at a time in document order, and a term whose best possible
// share, added to those of the terms weaker than it, cannot lift a document
// above the k-th best score so far stops bringing in candidates: its
// postings are only skipped through for documents that stronger terms
// brought in. The result is the exact top k of an exhaustive evaluation,
// at a cost that grows with the postings of the query's rarer terms rather
// than with the table. Filters apply before a document enters the top k, so
// the k are the best that pass them.

// cursor walks one term's postings: the base segment's, then the delta's,
// whose documents all follow the base's.
type cursor struct {
	lists [2][]posting
	seg   int
	pos   int
	wq    float32 // query weight × idf
	ub    float32 // wq × the term's largest w: its best possible share
}

const noDoc = ^uint32(0)

func (c *cursor) doc() uint32 {
	for c.seg < 2 {
		if c.pos < len(c.lists[c.seg]) {
			return c.lists[c.seg][c.pos].doc
		}
		c.seg++
		c.pos = 0
	}
	return noDoc
}

func (c *cursor) w() float32 { return c.lists[c.seg][c.pos].w }

func (c *cursor) next() { c.pos++ }

// advance moves to the first posting at or after doc d, galloping then
// bisecting, and returns its document.
func (c *cursor) advance(d uint32) uint32 {
	for c.seg < 2 {
		l := c.lists[c.seg]
		if c.pos < len(l) && l[len(l)-1].doc >= d {
			if l[c.pos].doc >= d {
				return l[c.pos].doc
			}
			step := 1
			lo := c.pos
			hi := c.pos + 1
			for hi < len(l) && l[hi].doc < d {
				lo = hi
				step *= 2
				hi = lo + step
			}
			hi = min(hi, len(l)-1)
			// l[lo].doc < d <= l[hi].doc
			for lo+1 < hi {
				m := (lo + hi) / 2
				if l[m].doc < d {
					lo = m
				} else {
					hi = m
				}
			}
			c.pos = hi
			return l[hi].doc
		}
		c.seg++
		c.pos = 0
	}
	return noDoc
}

// cursors makes a cursor per query term that the index holds.
func (x *Index) cursors(terms []qterm, cs []cursor) []cursor {
	n := len(x.table.Tools)
	cs = cs[:0]
	for _, qt := range terms {
		var c cursor
		var maxW float32
		if id, ok := x.base.dict[qt.term]; ok {
			c.lists[0] = x.base.post[id]
			maxW = x.base.maxW[id]
		}
		if x.delta != nil {
			if id, ok := x.delta.dict[qt.term]; ok {
				c.lists[1] = x.delta.post[id]
				maxW = max(maxW, x.delta.maxW[id])
			}
		}
		df := len(c.lists[0]) + len(c.lists[1])
		if df == 0 {
			continue
		}
		c.wq = qt.w * idf(n, df)
		c.ub = c.wq * maxW
		cs = append(cs, c)
	}
	return cs
}

// topK returns the best k documents that pass f's own filters, best first,
// as table indexes with scores; fewer when fewer match. exhausted reports
// that no further document matches.
func (x *Index) topK(terms []qterm, f *Filter, k int, s *scratch) (out []cand, exhausted bool) {
	cs := x.cursors(terms, s.curs)
	s.curs = cs
	// Weakest first: cs[:pivot] are the non-essential terms.
	slices.SortFunc(cs, func(a, b cursor) int {
		switch {
		case a.ub < b.ub:
			return -1
		case a.ub > b.ub:
			return 1
		}
		return 0
	})
	prefix := s.prefix[:0]
	var sum float32
	for _, c := range cs {
		sum += c.ub
		prefix = append(prefix, sum)
	}
	s.prefix = prefix

	top := s.top[:0] // a min-heap of the best k so far
	var theta float32 = -1
	pivot := 0
	filtered := f.Namespace != "" || f.ToolSet != nil || f.ReadOnly != nil || f.Destructive != nil || f.Category != ""
	for {
		d := noDoc
		for i := pivot; i < len(cs); i++ {
			d = min(d, cs[i].doc())
		}
		if d == noDoc {
			break
		}
		var score float32
		for i := pivot; i < len(cs); i++ {
			if cs[i].doc() == d {
				score += cs[i].wq * cs[i].w()
				cs[i].next()
			}
		}
		for i := pivot - 1; i >= 0; i-- {
			if len(top) == k && score+prefix[i] < theta {
				break
			}
			if cs[i].advance(d) == d {
				score += cs[i].wq * cs[i].w()
			}
		}
		idx := x.tableOf[d]
		if idx < 0 || (filtered && !x.keep(int(idx), f)) {
			continue
		}
		c := cand{idx: uint32(idx), score: score}
		if len(top) < k {
			top = append(top, c)
			siftUp(top, len(top)-1)
		} else if minLess(top[0], c) {
			top[0] = c
			siftDown(top, 0)
		} else {
			continue
		}
		if len(top) == k {
			theta = top[0].score
			for pivot < len(cs) && prefix[pivot] < theta {
				pivot++
			}
		}
	}
	s.top = top
	out = make([]cand, len(top))
	copy(out, top)
	slices.SortFunc(out, func(a, b cand) int {
		if minLess(b, a) {
			return -1
		}
		if minLess(a, b) {
			return 1
		}
		return 0
	})
	return out, len(out) < k
}

// siftUp and siftDown keep h a min-heap by minLess (worst on top).
func siftUp(h []cand, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !minLess(h[i], h[p]) {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func siftDown(h []cand, i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && minLess(h[r], h[l]) {
			m = r
		}
		if !minLess(h[m], h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
