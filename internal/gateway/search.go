package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/toolplane/toolplane/toolkit/search"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// Paths of search.
const (
	// SearchPath serves GET /v1/search: the tools that match a query, best
	// first, as table entries with a score.
	SearchPath = "/v1/search"
	// SearchMCPPath is the MCP endpoint of search: two meta-tools,
	// search_tools and call_tool, instead of the whole table.
	SearchMCPPath = "/mcp/search"
	// searchViewSuffix follows a view's path for the search of that view:
	// /mcp/namespaces/{namespace}/search, /mcp/toolsets/{namespace}/{name}/search.
	searchViewSuffix = "/search"
)

// Bounds of one search.
const (
	// DefaultSearchLimit is the number of tools a search returns when it
	// names no limit.
	DefaultSearchLimit = search.DefaultLimit
	// MaxSearchLimit is the most tools one search returns; a larger limit
	// is lowered to it.
	MaxSearchLimit = search.MaxLimit
	// MaxQueryBytes bounds a query: a tool is found by a task's words, not
	// by a document pasted whole.
	MaxQueryBytes = 1024
	// maxSearchAuthorized bounds the ranked candidates whose authorization
	// one search asks, when the caller may call only some tools, as a
	// tools/list request's scan is bounded: a caller granted few of many
	// matching tools gets fewer results rather than a request that
	// authorizes the whole table. The index asks in rank order, so the
	// best candidates are asked first. The questions that cost a review
	// are bounded apart, by Options.MaxReviewsPerRequest: a search that
	// spends it answers with the tools decided so far, and since decisions
	// are cached, the same search asked again goes further.
	maxSearchAuthorized = maxScanFactor * DefaultPageSize
)

// searchIndex returns the search index of s, building it on the first
// call: the next of the last revision's index when there is one (the index
// updates what changed rather than rebuild), else a new one. With an
// Embedder it starts embedding the new index's tools in the background.
func (g *Gateway) searchIndex(s *snapshot) *search.Index {
	s.indexOnce.Do(func() {
		var x *search.Index
		if s.prevIndex != nil {
			x = s.prevIndex.Update(s.table)
		} else {
			x = search.New(s.table, g.opts.Search)
		}
		s.prevIndex = nil
		s.index.Store(x)
		if g.opts.Search != nil && g.opts.Search.Embedder != nil {
			go g.embed(x)
		}
	})
	return s.index.Load()
}

// embed computes the vectors of x's tools, retrying with backoff while the
// endpoint fails, until it succeeds or x is no longer the index served.
// Searches are lexical meanwhile.
func (g *Gateway) embed(x *search.Index) {
	wait := embedRetryMin
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), embedTimeout)
		err := x.Embed(ctx)
		cancel()
		if err == nil {
			g.logger.Debug("Embedded the tools for semantic search", "revision", x.Revision(), "tools", x.Len())
			return
		}
		g.logger.Warn("Embedding the tools for semantic search failed: searches stay lexical", "revision", x.Revision(),
			"attempt", attempt, "retryIn", wait, "error", err)
		time.Sleep(wait)
		if s := g.snap.Load(); s == nil || s.index.Load() != x {
			return
		}
		wait = min(2*wait, embedRetryMax)
	}
}

// Bounds of embedding one table revision in the background.
const (
	embedTimeout  = 10 * time.Minute
	embedRetryMin = 5 * time.Second
	embedRetryMax = 5 * time.Minute
)

// searchQuery is one search, as /v1/search, search_tools and the catalog
// ask it.
type searchQuery struct {
	text  string
	limit int
	// v is the view searched: the whole table, a namespace or a ToolSet.
	v view
	// readOnly, destructive and category filter by annotations and the
	// toolplane.io/category of _meta, when set.
	readOnly, destructive *bool
	category              string
	// unroutable keeps the tools the gateway cannot route, which only the
	// catalog shows.
	unroutable bool
}

// errBadQuery is a query that cannot be asked; its message says why, for
// the caller.
var errBadQuery = errors.New("bad query")

func badQuery(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errBadQuery, fmt.Sprintf(format, args...))
}

// checkQuery validates the text and limit of q, and sets the default limit.
func checkQuery(q *searchQuery) error {
	q.text = strings.TrimSpace(q.text)
	switch {
	case q.text == "":
		return badQuery("the query is empty: say in a few words what the tool should do")
	case len(q.text) > MaxQueryBytes:
		return badQuery("the query is over %d bytes", MaxQueryBytes)
	case !utf8.ValidString(q.text):
		return badQuery("the query is not UTF-8")
	case q.limit < 0:
		return badQuery("limit must be a positive integer")
	case q.limit == 0:
		q.limit = DefaultSearchLimit
	case q.limit > MaxSearchLimit:
		q.limit = MaxSearchLimit
	}
	return nil
}

// hit is one tool found, at index i of the snapshot's table.
type hit struct {
	i     int
	score float64
}

// search returns the tools of s that match q and that c may call, best
// first. Under Options.Auth each candidate is asked through permits before
// it counts against the limit, so that the limit is filled with callable
// tools and no other is ever returned; at most maxSearchAuthorized are
// asked.
func (g *Gateway) search(ctx context.Context, c *Caller, s *snapshot, q searchQuery) ([]hit, error) {
	f := search.Filter{
		Limit:       q.limit,
		Namespace:   q.v.namespace,
		ReadOnly:    q.readOnly,
		Destructive: q.destructive,
		Category:    q.category,
	}
	if q.v.name != "" {
		f.ToolSet = &spec.ObjectReference{Namespace: q.v.namespace, Name: q.v.name}
	}
	// One budget of authorization questions for the whole request (the
	// MCP middleware has set it already for search_tools).
	ctx = withReviewBudget(ctx, g.opts.MaxReviewsPerRequest)
	var (
		mu      sync.Mutex
		asked   int
		cutOff  bool
		spent   bool
		authErr error
	)
	f.Allow = func(i int) bool {
		if i < 0 || i >= len(s.table.Tools) || (!q.unroutable && s.routes[i] == "") || !q.v.includes(s, i) {
			return false
		}
		if g.opts.Auth == nil {
			return true
		}
		mu.Lock()
		if authErr != nil || spent || asked >= maxSearchAuthorized {
			cutOff = cutOff || (authErr == nil && !spent)
			mu.Unlock()
			return false
		}
		asked++
		mu.Unlock()
		ok, err := g.permits(ctx, c, s, i)
		if err != nil {
			mu.Lock()
			// A spent budget ends the search with what it found: every
			// tool returned was decided, none of the rest is.
			if errors.Is(err, ErrReviewBudget) {
				spent = true
			} else if authErr == nil {
				authErr = err
			}
			mu.Unlock()
			return false
		}
		return ok
	}
	hits := g.searchIndex(s).Search(ctx, q.text, f)
	if authErr != nil {
		return nil, fmt.Errorf("authorizing tools: %w", authErr)
	}
	if cutOff || spent {
		g.logger.Debug("Cut a search short at its bound of authorization questions", "candidates", asked, "budgetSpent", spent)
	}
	out := make([]hit, 0, len(hits))
	for _, h := range hits {
		// The index filters already; checked again here, since a tool
		// outside the view or the caller's grants must never leave.
		if h.Index < 0 || h.Index >= len(s.table.Tools) || !q.v.includes(s, h.Index) {
			continue
		}
		out = append(out, hit{i: h.Index, score: h.Score})
		if len(out) == q.limit {
			break
		}
	}
	g.metrics.listSize.WithLabelValues("search").Observe(float64(len(out)))
	return out, nil
}

// includes reports whether the tool at index i of s belongs to the view,
// routable or not.
func (v view) includes(s *snapshot, i int) bool {
	ref := s.table.Tools[i].ToolSet
	return v.namespace == "" || (ref.Namespace == v.namespace && (v.name == "" || ref.Name == v.name))
}

// searchEntry is a tool found: its table entry, exactly as the table holds
// it, and its score.
type searchEntry struct {
	spec.TableTool
	Score float64 `json:"score"`
}

// searchResult is what GET /v1/search answers and search_tools gives as
// structuredContent.
type searchResult struct {
	// Revision is that of the table searched.
	Revision string        `json:"revision"`
	Tools    []searchEntry `json:"tools"`
	// TTLMs and CacheScope say how long and by whom the result may be
	// reused, as the 2026 cache fields of a list do.
	TTLMs      int    `json:"ttlMs"`
	CacheScope string `json:"cacheScope"`
}

func (g *Gateway) searchResult(s *snapshot, hits []hit) *searchResult {
	res := &searchResult{Revision: s.table.Revision, Tools: make([]searchEntry, len(hits))}
	for k, h := range hits {
		res.Tools[k] = searchEntry{TableTool: s.table.Tools[h.i], Score: roundScore(h.score)}
	}
	res.TTLMs, res.CacheScope = g.cacheFields()
	return res
}

// roundScore keeps a score's JSON short: four significant digits are more
// than a ranking needs.
func roundScore(f float64) float64 {
	v, err := strconv.ParseFloat(strconv.FormatFloat(f, 'g', 4, 64), 64)
	if err != nil {
		return f
	}
	return v
}

// cacheFields are the ttlMs and cacheScope of a result: private to the
// caller when it depends on the caller's grants.
func (g *Gateway) cacheFields() (int, string) {
	ttl := max(0, int(g.opts.ListTTL.Milliseconds()))
	if g.opts.Auth != nil {
		return ttl, "private"
	}
	return ttl, "public"
}

// serveSearch serves GET /v1/search?q=TEXT&limit=N&namespace=NS&toolSet=NS/NAME
// (and readOnly, destructive, category): the tools that match, best
// first, as table entries with a score. A bad request is 400 with a JSON
// error body.
func (g *Gateway) serveSearch(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeJSONError(w, http.StatusMethodNotAllowed, "method_not_allowed", "use GET")
		return
	}
	q, err := parseSearchQuery(r)
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, "bad_request", strings.TrimPrefix(err.Error(), errBadQuery.Error()+": "))
		return
	}
	if !g.Ready() {
		writeJSONError(w, http.StatusServiceUnavailable, "not_ready", "the gateway holds no tool table yet")
		return
	}
	s := g.snapshot()
	hits, err := g.search(r.Context(), callerFromRequest(r), s, q)
	if err != nil {
		g.logger.Error("Authorizing a search failed", "error", err)
		writeJSONError(w, http.StatusServiceUnavailable, "authorization_unavailable", "authorization is unavailable")
		return
	}
	b, err := json.Marshal(g.searchResult(s, hits))
	if err != nil {
		writeJSONError(w, http.StatusInternalServerError, "internal", "encoding the result failed")
		return
	}
	// ttlMs and cacheScope in the body are the hints for a client's own
	// cache; a shared HTTP cache must ask again, as for GET /v1/tools, so
	// that it never serves a tool the gateway has seen removed.
	w.Header().Set("Cache-Control", "no-cache")
	if g.opts.Auth != nil {
		w.Header().Set("Cache-Control", "private, no-cache")
		w.Header().Set("Vary", "Authorization")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(b)
}

// parseSearchQuery reads a search from a URL's query.
func parseSearchQuery(r *http.Request) (searchQuery, error) {
	p := r.URL.Query()
	q := searchQuery{text: p.Get("q")}
	if l := p.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			return q, badQuery("limit must be an integer from 1 to %d", MaxSearchLimit)
		}
		q.limit = n
	}
	ns := p.Get("namespace")
	if len(ns) > 253 {
		return q, badQuery("namespace is too long")
	}
	q.v.namespace = ns
	if ts := p.Get("toolSet"); ts != "" {
		tns, name, ok := strings.Cut(ts, "/")
		if !ok || tns == "" || name == "" || strings.Contains(name, "/") || len(ts) > 512 {
			return q, badQuery("toolSet must be NAMESPACE/NAME")
		}
		if ns != "" && ns != tns {
			return q, badQuery("toolSet %s is not in namespace %s", ts, ns)
		}
		q.v = view{namespace: tns, name: name}
	}
	var err error
	if q.readOnly, err = boolParam(p.Get("readOnly")); err != nil {
		return q, badQuery("readOnly must be true or false")
	}
	if q.destructive, err = boolParam(p.Get("destructive")); err != nil {
		return q, badQuery("destructive must be true or false")
	}
	q.category = p.Get("category")
	if len(q.category) > 128 {
		return q, badQuery("category is too long")
	}
	return q, checkQuery(&q)
}

func boolParam(s string) (*bool, error) {
	if s == "" {
		return nil, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return nil, err
	}
	return &b, nil
}

// writeJSONError writes the JSON error body that toolkit's endpoints
// write: {"error":{"code":…,"message":…}}.
func writeJSONError(w http.ResponseWriter, status int, code, message string) {
	b, _ := json.Marshal(spec.ErrorResponse{Error: spec.ErrorDetail{Code: code, Message: message}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
