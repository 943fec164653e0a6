package search

import (
	"cmp"
	"container/heap"
	"context"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxQueryBytes bounds the query text that Search reads; the rest is
// ignored. A task is a sentence or two, not a document.
const MaxQueryBytes = 1024

// maxQueryTerms bounds the distinct terms of one query.
const maxQueryTerms = 32

// scratch is one search's working memory, pooled per index: a score per
// document and the documents touched.
type scratch struct {
	score   []float32
	touched []uint32
	cands   candHeap
	top     []cand
	asked   map[uint32]bool
	// grp and gtouched score one concept: a term and its synonyms.
	grp      []float32
	gtouched []uint32
	members  []member
	// question is whether the query asks one: read-only tools score
	// readBoost more.
	question bool
}

// Search returns the tools that best match q and pass f, best first. A
// query without a word to search by (empty, or only stop words) has no
// hits. ctx bounds the optional semantic stage only; lexical ranking is
// in memory and does not wait.
func (x *Index) Search(ctx context.Context, q string, f Filter) []Hit {
	limit := f.limit()
	q = clipQuery(q)
	asks := question(q)
	q = plainQuery(q)
	terms := queryTerms(q)
	if len(terms) == 0 || len(x.table.Tools) == 0 {
		return nil
	}

	s := x.getScratch()
	defer x.pool.Put(s)
	s.question = asks
	qterms := expand(terms, queryWords(q))
	if x.sem != nil {
		if vs := x.vecs.Load(); vs != nil {
			if qv := x.sem.queryVector(ctx, q, vs.dim); qv != nil {
				x.candidates(qterms, &f, s)
				return x.fused(qv, vs, &f, &s.cands, limit)
			}
		}
	}

	// Score every match once, term at a time; take the best limit that
	// pass the filters; when Allow refuses some, the best 4× as many of
	// those not asked about yet, and so on.
	x.score(qterms, s)
	defer x.reset(s)
	hits := make([]Hit, 0, limit)
	if f.Allow != nil && s.asked == nil {
		s.asked = map[uint32]bool{}
	}
	defer clear(s.asked)
	for k := limit; ; k *= 4 {
		top := x.best(s, &f, k)
		for _, c := range top {
			if len(hits) == limit {
				return hits
			}
			if f.Allow != nil {
				s.asked[c.idx] = true
				if !f.Allow(int(c.idx)) {
					continue
				}
			}
			hits = append(hits, Hit{Index: int(c.idx), Score: float64(c.score)})
		}
		if len(hits) == limit || len(top) < k {
			return hits
		}
	}
}

// best returns the k best scored documents that pass f's own filters and
// that Allow was not asked about, best first, by a bounded heap: one
// comparison for most of the documents touched.
func (x *Index) best(s *scratch, f *Filter, k int) []cand {
	filtered := f.Namespace != "" || f.ToolSet != nil || f.ReadOnly != nil || f.Destructive != nil || f.Category != ""
	top := s.top[:0]
	for _, d := range s.touched {
		i := x.tableOf[d]
		if i < 0 {
			continue
		}
		c := cand{idx: uint32(i), score: s.score[d]}
		if len(top) == k && !minLess(top[0], c) {
			continue
		}
		if filtered && !x.keep(int(i), f) || s.asked[c.idx] {
			continue
		}
		if len(top) < k {
			top = append(top, c)
			siftUp(top, len(top)-1)
		} else {
			top[0] = c
			siftDown(top, 0)
		}
	}
	s.top = top
	out := make([]cand, len(top))
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
	return out
}

// reset clears the scores of the documents a search touched.
func (x *Index) reset(s *scratch) {
	for _, d := range s.touched {
		s.score[d] = 0
	}
	s.touched = s.touched[:0]
}

// exhaustive scores every document the query matches and adds hits to
// hits, best first, asking Allow about those it was not asked about yet.
func (x *Index) exhaustive(terms []qterm, f *Filter, s *scratch, limit int, hits []Hit) []Hit {
	x.candidates(terms, f, s)
	for len(hits) < limit && len(s.cands) > 0 {
		c := heap.Pop(&s.cands).(cand)
		if s.asked[c.idx] {
			continue
		}
		if f.Allow == nil || f.Allow(int(c.idx)) {
			hits = append(hits, Hit{Index: int(c.idx), Score: float64(c.score)})
		}
	}
	return hits
}

// candidates scores every document the query matches, term at a time,
// into s.cands as a heap, those f's own filters keep.
func (x *Index) candidates(terms []qterm, f *Filter, s *scratch) {
	x.score(terms, s)
	s.cands = s.cands[:0]
	for _, d := range s.touched {
		if i := x.tableOf[d]; i >= 0 && x.keep(int(i), f) {
			s.cands = append(s.cands, cand{idx: uint32(i), score: s.score[d]})
		}
		s.score[d] = 0
	}
	s.touched = s.touched[:0]
	heap.Init(&s.cands)
}

// score adds each term's BM25F share to the score of every document that
// holds it, in the base segment and the delta. A term and its synonyms are
// one concept, as a thesaurus means them: a document scores by the best of
// them, not their sum, so that a tool that says "delete" and "remove" is
// not twice the answer to "delete" and synonyms can weigh nearly as much
// as the word itself.
func (x *Index) score(terms []qterm, s *scratch) {
	n := len(x.table.Tools)
	if len(s.grp) < len(s.score) {
		s.grp = make([]float32, len(s.score))
	}
	// The terms that the index holds, by concept: a word's own, then its
	// synonyms.
	s.members = s.members[:0]
	for i, qt := range terms {
		lists, df := x.postings(qt.term)
		if df == 0 || qt.w <= 0 || qt.syn != 0 && df > max(n/4, 16) {
			continue // a synonym a quarter of the tools hold says little
		}
		g := i + 1
		if qt.syn != 0 {
			g = qt.syn
		}
		s.members = append(s.members, member{g: g, w: qt.w * idf(n, df), lists: lists})
	}
	slices.SortStableFunc(s.members, func(a, b member) int { return cmp.Compare(a.g, b.g) })
	for start := 0; start < len(s.members); {
		end := start + 1
		for end < len(s.members) && s.members[end].g == s.members[start].g {
			end++
		}
		if g := s.members[start:end]; len(g) == 1 {
			for _, post := range g[0].lists {
				for _, p := range post {
					if s.score[p.doc] == 0 {
						s.touched = append(s.touched, p.doc)
					}
					s.score[p.doc] += g[0].w * p.w
				}
			}
		} else {
			s.gtouched = s.gtouched[:0]
			for _, m := range g {
				for _, post := range m.lists {
					for _, p := range post {
						if s.grp[p.doc] == 0 {
							s.gtouched = append(s.gtouched, p.doc)
						}
						s.grp[p.doc] = max(s.grp[p.doc], m.w*p.w)
					}
				}
			}
			for _, d := range s.gtouched {
				if s.score[d] == 0 {
					s.touched = append(s.touched, d)
				}
				s.score[d] += s.grp[d]
				s.grp[d] = 0
			}
		}
		start = end
	}
	if s.question && readBoost > 0 {
		for _, d := range s.touched {
			if i := x.tableOf[d]; i >= 0 && x.docs[i].flags&flagReadOnly != 0 {
				s.score[d] *= 1 + readBoost
			}
		}
	}
}

// member is one term of a concept: its weight in the query times its idf,
// and its postings.
type member struct {
	g     int // the concept: 1 + the index of its word in the query
	w     float32
	lists [2][]posting
}

// postings returns a term's postings in the base segment and the delta,
// and its document frequency.
func (x *Index) postings(t string) ([2][]posting, int) {
	var lists [2][]posting
	if id, ok := x.base.dict[t]; ok {
		lists[0] = x.base.post[id]
	}
	if x.delta != nil {
		if id, ok := x.delta.dict[t]; ok {
			lists[1] = x.delta.post[id]
		}
	}
	return lists, len(lists[0]) + len(lists[1])
}

// keep reports whether document d passes f's own filters (not Allow).
func (x *Index) keep(d int, f *Filter) bool {
	t := &x.table.Tools[d]
	if f.Namespace != "" && t.ToolSet.Namespace != f.Namespace {
		return false
	}
	if f.ToolSet != nil && t.ToolSet != *f.ToolSet {
		return false
	}
	info := x.docs[d]
	if f.ReadOnly != nil && *f.ReadOnly != (info.flags&flagReadOnly != 0) {
		return false
	}
	if f.Destructive != nil && *f.Destructive != (info.flags&flagDestructive != 0) {
		return false
	}
	if f.Category != "" && !strings.EqualFold(f.Category, info.category) {
		return false
	}
	return true
}

func (x *Index) getScratch() *scratch {
	if s, ok := x.pool.Get().(*scratch); ok {
		return s
	}
	return &scratch{score: make([]float32, len(x.tableOf))}
}

// clipQuery cuts q to MaxQueryBytes, at a character boundary.
func clipQuery(q string) string {
	if len(q) > MaxQueryBytes {
		q = q[:MaxQueryBytes]
		for !utf8.ValidString(q) {
			q = q[:len(q)-1]
		}
	}
	return q
}

// plainQuery reads a task the way it names a tool: a URL in it is the word
// "url" (what tools that take one say), not the words of its host and path,
// which are the user's data.
func plainQuery(q string) string {
	q = unquote(q)
	if !strings.Contains(q, ".") && !strings.Contains(q, "-") {
		return q
	}
	f := strings.Fields(q)
	for i, w := range f {
		if l := strings.ToLower(w); strings.HasPrefix(l, "http://") || strings.HasPrefix(l, "https://") || strings.HasPrefix(l, "www.") {
			f[i] = "url"
		} else if base, kind, ok := fileName(w); ok {
			f[i] = base + " " + kind
		} else if issueKey(w) {
			f[i] = "issue"
		}
	}
	return strings.Join(f, " ")
}

// fileName reports whether w is a file's name or path, by an extension of
// a common kind, and returns it without the extension and what a tool
// calls such a file: "file", or "image file" and the like. The extension
// is not a word a tool is found by; the kind of file is.
func fileName(w string) (base, kind string, ok bool) {
	w = strings.TrimRight(w, ",;:!?)'\"")
	dot := strings.LastIndexByte(w, '.')
	if dot < 0 || dot == len(w)-1 {
		return "", "", false
	}
	kind, ok = fileKinds[strings.ToLower(w[dot+1:])]
	return w[:dot], kind, ok
}

// fileKinds is common file extensions, by what a tool calls the file.
var fileKinds = func() map[string]string {
	m := map[string]string{}
	for kind, exts := range map[string]string{
		"file":          "txt md markdown json yaml yml toml ini conf cfg env xml csv tsv log go py rb rs java kt c h cpp hpp cs php sh bash sql html htm css scss lock mod sum tf",
		"image file":    "png jpg jpeg gif svg webp bmp ico tiff heic",
		"audio file":    "mp3 wav ogg flac m4a aac",
		"video file":    "mp4 mov avi mkv webm",
		"document file": "pdf doc docx odt rtf xls xlsx ppt pptx",
		"archive file":  "zip tar gz tgz bz2 xz 7z rar jar",
	} {
		for _, e := range strings.Fields(exts) {
			m[e] = kind
		}
	}
	return m
}()

// unquote drops the text a task quotes: "type \"hello there\" into the
// box" searches by type and box, not by what to type.
func unquote(q string) string {
	if strings.Count(q, `"`) < 2 {
		return q
	}
	var b strings.Builder
	in := false
	for _, part := range strings.SplitAfter(q, `"`) {
		if !in {
			b.WriteString(part)
		} else if strings.HasSuffix(part, `"`) {
			b.WriteByte(' ')
		} else {
			b.WriteString(part) // an unclosed quote: keep the rest
		}
		in = !in
	}
	return b.String()
}

// number reports whether a term is digits only: in a task, an identifier
// or a value (issue #17, port 5432, release 1.4), not a word of a tool.
func number(t string) bool {
	for i := 0; i < len(t); i++ {
		if t[i] < '0' || t[i] > '9' {
			return false
		}
	}
	return true
}

// queryTerms analyzes q into its distinct terms, in order, without numbers.
func queryTerms(q string) []string {
	var terms []string
	a := analyzer{stems: map[string]string{}, whole: true}
	a.terms(q, func(t string) {
		if len(terms) >= maxQueryTerms || number(t) {
			return
		}
		for _, u := range terms {
			if u == t {
				return
			}
		}
		terms = append(terms, t)
	})
	// Two words in a row are also searched for as one, as an API may write
	// them: "box plot" finds boxplot, "time zone" timezone, "look up" lookup.
	prev := ""
	wholeWords(q, func(w string) {
		lw := lower(w)
		if stopWords[lw] || !letters(lw) {
			prev = ""
			return
		}
		if prev != "" && len(terms) < maxQueryTerms {
			if t := a.stem(prev + lw); !slices.Contains(terms, t) {
				terms = append(terms, t)
			}
		}
		prev = lw
	})
	return terms
}

// letters reports whether w is letters only.
func letters(w string) bool {
	for _, r := range w {
		if !unicode.IsLetter(r) {
			return false
		}
	}
	return true
}

// cand is a tool that may be a hit, by table index.
type cand struct {
	idx   uint32
	score float32
}

// candHeap is a max-heap of candidates: higher score first, then lower
// table index, so that equal scores come in the table's (name) order.
type candHeap []cand

func (h candHeap) Len() int { return len(h) }
func (h candHeap) Less(i, j int) bool {
	if h[i].score != h[j].score {
		return h[i].score > h[j].score
	}
	return cmp.Less(h[i].idx, h[j].idx)
}
func (h candHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *candHeap) Push(v any)   { *h = append(*h, v.(cand)) }
func (h *candHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// limit is the number of hits f asks for.
func (f *Filter) limit() int {
	if f.Limit <= 0 {
		return DefaultLimit
	}
	return min(f.Limit, MaxLimit)
}

// queryWords is q's distinct words as written, lowercased, bounded like
// its terms.
func queryWords(q string) []string {
	var out []string
	exactWholeWords(q, func(w string) {
		if len(out) < maxQueryTerms && !number(w) && !slices.Contains(out, w) {
			out = append(out, w)
		}
	})
	return out
}

// readBoost is how much more a read-only tool (annotations.readOnlyHint)
// scores for a query that asks a question: "which pods are failing?" wants
// a tool that reads, not one that changes what it asks about. Chosen by
// cross-validation on the tuning half (0.2 in three folds of four, 0.4 in
// one).
var readBoost float32 = 0.2

// question reports whether q asks something: it ends in a question mark
// or opens with an interrogative word.
func question(q string) bool {
	q = strings.TrimSpace(q)
	if strings.HasSuffix(q, "?") {
		return true
	}
	first, _, _ := strings.Cut(q, " ")
	switch strings.ToLower(first) {
	case "what", "which", "how", "who", "when", "where", "why", "whose", "is", "are", "was", "were", "does", "do", "did", "has", "have":
		return true
	}
	return false
}

// issueKey reports whether w is an issue tracker's key, a project's
// capitals, a dash and a number (ENG-204, PROJ-17): the user's data, that
// stands for an issue.
func issueKey(w string) bool {
	w = strings.TrimRight(w, ",;:!?)'\".")
	k, n, ok := strings.Cut(w, "-")
	if !ok || len(k) < 2 || len(k) > 10 || n == "" || !number(n) || k[0] < 'A' || k[0] > 'Z' {
		return false
	}
	for i := 1; i < len(k); i++ {
		if (k[i] < 'A' || k[i] > 'Z') && (k[i] < '0' || k[i] > '9') {
			return false
		}
	}
	return true
}
