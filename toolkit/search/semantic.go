package search

import (
	"cmp"
	"container/heap"
	"context"
	"hash/maphash"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// The semantic stage: tool vectors are computed off the request path by
// Index.Embed and kept per tool text in a cache that the indexes of later
// revisions share; a search embeds its query within EmbedTimeout, ranks the
// tools passing the filters by cosine similarity, and fuses that ranking
// with the lexical one by reciprocal rank fusion. A query that cannot be
// embedded in time is answered lexically, and the endpoint is then left
// alone for a backoff, so that an endpoint that is down costs a search
// nothing.

const (
	// rrfK is reciprocal rank fusion's constant (Cormack et al.'s 60).
	rrfK = 60
	// fuseDepth is how deep each ranking goes into the fusion.
	fuseDepth = 100
	// maxEmbedText bounds the text embedded for one tool.
	maxEmbedText = 2048
	// maxQueryVectors bounds the cache of query vectors.
	maxQueryVectors = 4096
	// Backoff after a failed query embedding.
	minBackoff = time.Second
	maxBackoff = time.Minute
)

// semantic is the state the semantic stage keeps across index revisions.
type semantic struct {
	emb     Embedder
	timeout time.Duration

	mu      sync.Mutex
	vecs    map[uint64][]float32 // tool text key → unit vector
	queries map[string][]float32

	skipUntil atomic.Int64 // unix nanoseconds
	backoff   atomic.Int64
}

func newSemantic(o *Options) *semantic {
	if o.Embedder == nil {
		return nil
	}
	t := o.EmbedTimeout
	if t <= 0 {
		t = DefaultEmbedTimeout
	}
	return &semantic{emb: o.Embedder, timeout: t, vecs: map[uint64][]float32{}, queries: map[string][]float32{}}
}

// vectors are one index's tool vectors, by table index, all of dim.
type vectors struct {
	dim int
	v   []float32 // len(tools) × dim
}

var textSeed = maphash.MakeSeed()

// embedText is what the semantic stage embeds of a tool: its name as
// words, title, description and parameter names.
func embedText(t *spec.TableTool) string {
	var b strings.Builder
	words(t.Name, func(w string) { b.WriteString(strings.ToLower(w)); b.WriteByte(' ') })
	text := textOf(t)
	for _, s := range []string{text[fieldTitle], text[fieldDesc], text[fieldParamName]} {
		if s != "" && b.Len() < maxEmbedText {
			b.WriteString(". ")
			b.WriteString(s)
		}
	}
	s := b.String()
	if len(s) > maxEmbedText {
		s = strings.ToValidUTF8(s[:maxEmbedText], "")
	}
	return s
}

// Embed computes the vectors of the index's tools with Options.Embedder,
// reusing those of tools whose text an index of this chain embedded before,
// so that a new revision embeds only its new and changed tools. Until it
// returns nil, searches are lexical. Run it off the request path, and again
// after an error: it is safe for concurrent use, and a no-op without an
// Embedder or once done.
func (x *Index) Embed(ctx context.Context) error {
	sem := x.sem
	if sem == nil || x.vecs.Load() != nil {
		return nil
	}
	tools := x.table.Tools
	keys := make([]uint64, len(tools))
	var missing []int
	var texts []string
	sem.mu.Lock()
	for i := range tools {
		text := embedText(&tools[i])
		keys[i] = maphash.String(textSeed, text)
		if _, ok := sem.vecs[keys[i]]; !ok {
			missing = append(missing, i)
			texts = append(texts, text)
		}
	}
	sem.mu.Unlock()
	if len(texts) > 0 {
		vecs, err := sem.emb.Embed(ctx, texts)
		if err != nil {
			return err
		}
		if len(vecs) != len(texts) {
			return errBadVectors
		}
		sem.mu.Lock()
		for k, i := range missing {
			sem.vecs[keys[i]] = unit(vecs[k])
		}
		sem.mu.Unlock()
	}

	sem.mu.Lock()
	defer sem.mu.Unlock()
	v := &vectors{}
	for _, k := range keys {
		if vec := sem.vecs[k]; v.dim == 0 {
			v.dim = len(vec)
		}
	}
	v.v = make([]float32, 0, len(keys)*v.dim)
	for _, k := range keys {
		vec := sem.vecs[k]
		if len(vec) != v.dim {
			return errBadVectors
		}
		v.v = append(v.v, vec...)
	}
	// Forget the vectors of tools that left the table, once they are many.
	if len(sem.vecs) > 2*len(keys)+1024 {
		keep := make(map[uint64]bool, len(keys))
		for _, k := range keys {
			keep[k] = true
		}
		maps.DeleteFunc(sem.vecs, func(k uint64, _ []float32) bool { return !keep[k] })
	}
	x.vecs.Store(v)
	return nil
}

type embedError string

func (e embedError) Error() string { return string(e) }

const errBadVectors = embedError("search: the embedder returned vectors of the wrong number or dimensions")

// unit returns v scaled to unit length (a copy), or nil for a zero vector.
func unit(v []float32) []float32 {
	var s float32
	for _, x := range v {
		s += x * x
	}
	if s == 0 || s != s {
		return make([]float32, len(v))
	}
	inv := float32(1 / math.Sqrt(float64(s)))
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = x * inv
	}
	return out
}

// queryVector embeds q within the timeout, from the cache if it can; nil
// when the endpoint fails or is backing off.
func (s *semantic) queryVector(ctx context.Context, q string, dim int) []float32 {
	s.mu.Lock()
	v, ok := s.queries[q]
	s.mu.Unlock()
	if ok {
		return v
	}
	if time.Now().UnixNano() < s.skipUntil.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	vecs, err := s.emb.Embed(ctx, []string{q})
	if err != nil || len(vecs) != 1 || len(vecs[0]) != dim {
		b := min(maxBackoff, max(minBackoff, 2*time.Duration(s.backoff.Load())))
		s.backoff.Store(int64(b))
		s.skipUntil.Store(time.Now().Add(b).UnixNano())
		return nil
	}
	s.backoff.Store(0)
	v = unit(vecs[0])
	s.mu.Lock()
	if len(s.queries) >= maxQueryVectors {
		clear(s.queries)
	}
	s.queries[q] = v
	s.mu.Unlock()
	return v
}

// fused ranks the lexical candidates (a heap) and the semantic ranking of
// qv together by reciprocal rank fusion, and returns up to limit hits that
// Allow lets through, best first.
func (x *Index) fused(qv []float32, vs *vectors, f *Filter, lex *candHeap, limit int) []Hit {
	rrf := make(map[uint32]float64, 2*fuseDepth)
	for r := 0; r < fuseDepth && lex.Len() > 0; r++ {
		c := heap.Pop(lex).(cand)
		rrf[c.idx] += 1 / float64(rrfK+r+1)
	}
	// The semantic ranking: the fuseDepth most similar tools that pass the
	// filters, by a bounded min-heap.
	top := make(candHeap, 0, fuseDepth+1)
	for i := range x.table.Tools {
		row := vs.v[i*vs.dim : (i+1)*vs.dim]
		sim := dot(qv, row)
		if c := (cand{uint32(i), sim}); len(top) == fuseDepth && !minLess(top[0], c) {
			continue
		}
		if !x.keep(i, f) {
			continue
		}
		heap.Push((*minHeap)(&top), cand{uint32(i), sim})
		if len(top) > fuseDepth {
			heap.Pop((*minHeap)(&top))
		}
	}
	slices.SortFunc(top, func(a, b cand) int {
		if a.score != b.score {
			return cmp.Compare(b.score, a.score)
		}
		return cmp.Compare(a.idx, b.idx)
	})
	for r, c := range top {
		rrf[c.idx] += 1 / float64(rrfK+r+1)
	}
	order := make([]Hit, 0, len(rrf))
	for i, s := range rrf {
		order = append(order, Hit{Index: int(i), Score: s})
	}
	slices.SortFunc(order, func(a, b Hit) int {
		if a.Score != b.Score {
			return cmp.Compare(b.Score, a.Score)
		}
		return cmp.Compare(a.Index, b.Index)
	})
	hits := make([]Hit, 0, limit)
	for _, h := range order {
		if len(hits) == limit {
			return hits
		}
		if f.Allow == nil || f.Allow(h.Index) {
			hits = append(hits, h)
		}
	}
	// Past both rankings' depth: the rest of the lexical candidates, below
	// every fused score.
	for len(hits) < limit && lex.Len() > 0 {
		c := heap.Pop(lex).(cand)
		if f.Allow == nil || f.Allow(int(c.idx)) {
			hits = append(hits, Hit{Index: int(c.idx), Score: 1 / float64(2*rrfK+2*fuseDepth)})
		}
	}
	return hits
}

// minLess orders candidates worst first.
func minLess(a, b cand) bool {
	if a.score != b.score {
		return a.score < b.score
	}
	return a.idx > b.idx
}

// minHeap keeps the best candidates seen, worst on top.
type minHeap []cand

func (h minHeap) Len() int           { return len(h) }
func (h minHeap) Less(i, j int) bool { return minLess(h[i], h[j]) }
func (h minHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *minHeap) Push(v any)        { *h = append(*h, v.(cand)) }
func (h *minHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

func dot(a, b []float32) float32 {
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}
