package gateway

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// serveTable serves GET /v1/tools: the table as one JSON document in the
// format of the table ConfigMap's tools.json, with the revision as ETag,
// 304 for a matching If-None-Match, and gzip for clients that accept it.
// With Options.Auth the document holds only the tools the caller may call,
// and its revision is that of those tools, so that a change of the caller's
// grants is a new ETag too.
//
// Under auth the request asks at most Options.MaxReviewsPerRequest
// questions that cost a review; what the caller may see of this table is
// then kept for the Authorizer's [DecisionCache.DecisionTTL], for every
// caller of its [Caller.Key], so that a poll (304 or not) asks nothing. A
// caller who may see every tool is served the table's own document, and
// any other its part of it, written from the table's own bytes: no request
// encodes or copies the table.
func (g *Gateway) serveTable(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "use GET", http.StatusMethodNotAllowed)
		return
	}
	if !g.Ready() {
		http.Error(w, "the gateway holds no tool table yet", http.StatusServiceUnavailable)
		return
	}
	s := g.snapshot()
	w.Header().Set("Vary", "Accept-Encoding")
	w.Header().Set("Cache-Control", "no-cache")
	a := allAccess
	if g.opts.Auth != nil {
		w.Header().Set("Vary", "Accept-Encoding, Authorization")
		w.Header().Set("Cache-Control", "private, no-cache")
		var err error
		a, err = g.tableAccess(r.Context(), callerFromRequest(r), s)
		switch {
		case errors.Is(err, ErrReviewBudget):
			// Not a table with tools missing: the answers given so far are
			// kept, and the retry goes further.
			w.Header().Set("Retry-After", "1")
			http.Error(w, "authorizing the table for this caller takes more than one request: retry", http.StatusServiceUnavailable)
			return
		case err != nil:
			g.logger.Error("Authorizing the table failed", "error", err)
			http.Error(w, "authorization is unavailable", http.StatusServiceUnavailable)
			return
		}
	}
	revision, n := s.table.Revision, len(s.table.Tools)
	if !a.all {
		revision, n = a.revision, len(a.idx)
	}
	etag := spec.ETag(revision)
	w.Header().Set("ETag", etag)
	if match := r.Header.Get("If-None-Match"); match != "" && etagMatches(match, etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	g.metrics.listSize.WithLabelValues("table").Observe(float64(n))
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	gz := acceptsGzip(r)
	if gz && !a.all && r.Method != http.MethodHead {
		// A part of the table is compressed as it is written: at most
		// maxFilteredGzips at once, so that callers who poll large parts
		// cannot spend every core on it; the others get it plain.
		select {
		case filteredGzips <- struct{}{}:
			defer func() { <-filteredGzips }()
		default:
			gz = false
		}
	}
	if gz {
		w.Header().Set("Content-Encoding", "gzip")
	}
	if a.all {
		body := s.doc
		if gz {
			body = s.docGzip
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		if r.Method != http.MethodHead {
			_, _ = w.Write(body)
		}
		return
	}
	if !gz {
		w.Header().Set("Content-Length", strconv.Itoa(a.size))
	}
	if r.Method == http.MethodHead {
		return
	}
	if !gz {
		_ = a.write(w, s)
		return
	}
	zw := gzipWriters.Get().(*gzip.Writer)
	zw.Reset(w)
	if err := a.write(zw, s); err == nil {
		_ = zw.Close()
	}
	zw.Reset(io.Discard)
	gzipWriters.Put(zw)
}

// gzipWriters are reused: each holds about a megabyte of compressor state.
// They compress at BestSpeed, a third of the default level's CPU, since
// every request that wants a part of the table gzipped costs it again.
var gzipWriters = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
	return zw
}}

// maxFilteredGzips bounds the parts of the table compressed at once, across
// every request.
const maxFilteredGzips = 2

var filteredGzips = make(chan struct{}, maxFilteredGzips)

// tableAccess is what one caller may see of one table: every tool, or the
// tools at idx, whose document has revision and size.
type tableAccess struct {
	all      bool
	idx      []int32
	revision string
	size     int
}

var allAccess = &tableAccess{all: true}

// write writes the document of a's tools of s: the table's head with a's
// revision, then each tool's JSON as s holds it. It is byte for byte
// json.Marshal of the table of those tools.
func (a *tableAccess) write(w io.Writer, s *snapshot) error {
	if _, err := w.Write(tableHead(s.table.SchemaVersion, a.revision)); err != nil {
		return err
	}
	for k, i := range a.idx {
		if k > 0 {
			if _, err := w.Write([]byte{','}); err != nil {
				return err
			}
		}
		if _, err := w.Write(s.entries[i]); err != nil {
			return err
		}
	}
	_, err := w.Write([]byte(tableTail))
	return err
}

// tableAccess returns what c may see of s: kept per [Caller.Key] and table
// revision for the Authorizer's DecisionTTL, and decided once for
// concurrent requests of one key, within the budget of the request that
// decides it.
func (g *Gateway) tableAccess(ctx context.Context, c *Caller, s *snapshot) (*tableAccess, error) {
	if c == nil {
		return g.accessOf(s, nil), nil
	}
	key := c.Key() + "\x00" + s.table.Revision
	if a, ok := g.access.get(key); ok && (a.all || len(a.idx) == 0 || int(a.idx[len(a.idx)-1]) < len(s.table.Tools)) {
		return a, nil
	}
	ctx = withReviewBudget(ctx, g.opts.MaxReviewsPerRequest)
	v, err, _ := share(ctx, &g.accessFlight, key, func(ctx context.Context) (any, error) {
		idx := make([]int, len(s.table.Tools))
		for i := range idx {
			idx[i] = i
		}
		ok, err := g.permitted(ctx, c, s, idx)
		if err != nil {
			return nil, err
		}
		a := g.accessOf(s, ok)
		if dc, isCache := g.opts.Auth.(DecisionCache); isCache {
			g.access.put(key, a, dc.DecisionTTL())
		}
		return a, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*tableAccess), nil
}

// accessOf is the access of the tools of s that ok allows.
func (g *Gateway) accessOf(s *snapshot, ok []bool) *tableAccess {
	a := &tableAccess{}
	for i, allowed := range ok {
		if allowed {
			a.idx = append(a.idx, int32(i))
		}
	}
	if len(a.idx) == len(s.table.Tools) && len(a.idx) > 0 {
		return allAccess
	}
	// The revision hashes the tools array's JSON, "[" + tools joined by
	// "," + "]", as spec.TableRevision does.
	h := sha256.New()
	h.Write([]byte{'['})
	n := 0
	for k, i := range a.idx {
		if k > 0 {
			h.Write([]byte{','})
			n++
		}
		h.Write(s.entries[i])
		n += len(s.entries[i])
	}
	h.Write([]byte{']'})
	a.revision = "sha256:" + hex.EncodeToString(h.Sum(nil))
	a.size = len(tableHead(s.table.SchemaVersion, a.revision)) + n + len(tableTail)
	return a
}

const tableTail = "]}"

// maxAccessCacheTools bounds the tool indexes that the access cache holds
// across every caller and revision: 4 MiB of them, 250 callers who may
// see 4,000 tools (and not all), any number who may see all.
const maxAccessCacheTools = 1 << 20

// accessCache keeps tableAccess values until they expire, bounded in the
// tool indexes they hold (each counts one more): when full it drops the
// expired ones, and if that is not enough, all of them, which costs the
// callers their next request's questions and nothing else.
type accessCache struct {
	mu      sync.Mutex
	max     int
	size    int
	entries map[string]accessEntry
}

type accessEntry struct {
	a       *tableAccess
	expires time.Time
}

func newAccessCache(max int) *accessCache {
	return &accessCache{max: max, entries: map[string]accessEntry{}}
}

func (c *accessCache) get(key string) (*tableAccess, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || time.Now().After(e.expires) {
		return nil, false
	}
	return e.a, true
}

func (c *accessCache) put(key string, a *tableAccess, ttl time.Duration) {
	cost := 1 + len(a.idx)
	if ttl <= 0 || cost > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if old, ok := c.entries[key]; ok {
		c.size -= 1 + len(old.a.idx)
		delete(c.entries, key)
	}
	if c.size+cost > c.max {
		for k, e := range c.entries {
			if now.After(e.expires) {
				c.size -= 1 + len(e.a.idx)
				delete(c.entries, k)
			}
		}
		if c.size+cost > c.max {
			clear(c.entries)
			c.size = 0
		}
	}
	c.entries[key] = accessEntry{a: a, expires: now.Add(ttl)}
	c.size += cost
}

// tableHead is the JSON of a table up to its first tool, as json.Marshal
// writes it.
func tableHead(schemaVersion, revision string) []byte {
	head, _ := json.Marshal(struct {
		SchemaVersion string `json:"schemaVersion"`
		Revision      string `json:"revision"`
	}{schemaVersion, revision})
	return append(head[:len(head)-1], `,"tools":[`...)
}

// encodeTable returns t's JSON as json.Marshal writes it (but tools [] for
// none), and each tool's JSON within it.
func encodeTable(t *spec.Table) ([]byte, [][]byte, error) {
	parts := make([][]byte, len(t.Tools))
	n := 0
	for i := range t.Tools {
		b, err := spec.MarshalTableEntry(&t.Tools[i])
		if err != nil {
			return nil, nil, fmt.Errorf("encoding the table: %w", err)
		}
		parts[i] = b
		n += len(b) + 1
	}
	head := tableHead(t.SchemaVersion, t.Revision)
	doc := make([]byte, 0, len(head)+n+len(tableTail))
	doc = append(doc, head...)
	entries := make([][]byte, len(parts))
	for i, b := range parts {
		if i > 0 {
			doc = append(doc, ',')
		}
		start := len(doc)
		doc = append(doc, b...)
		entries[i] = doc[start:len(doc):len(doc)]
	}
	return append(doc, tableTail...), entries, nil
}

func callerFromRequest(r *http.Request) *Caller {
	return callerFrom(authTokenInfo(r))
}

func etagMatches(header, etag string) bool {
	for _, m := range strings.Split(header, ",") {
		m = strings.TrimSpace(m)
		if m == "*" || strings.TrimPrefix(m, "W/") == etag {
			return true
		}
	}
	return false
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") && strings.ReplaceAll(strings.TrimSpace(params), " ", "") != "q=0" {
			return true
		}
	}
	return false
}
