package gateway

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// serveTable serves GET /v1/tools: the table as one JSON document in the
// format of the table ConfigMap's tools.json, with the revision as ETag,
// 304 for a matching If-None-Match, and gzip for clients that accept it.
// With Options.Auth the document holds only the tools the caller may call,
// and its revision is that of those tools, so that a change of the caller's
// grants is a new ETag too.
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
	doc, zdoc, revision, n := s.doc, s.docGzip, s.table.Revision, len(s.table.Tools)
	w.Header().Set("Vary", "Accept-Encoding")
	w.Header().Set("Cache-Control", "no-cache")
	if g.opts.Auth != nil {
		w.Header().Set("Vary", "Accept-Encoding, Authorization")
		w.Header().Set("Cache-Control", "private, no-cache")
		idx := make([]int, len(s.table.Tools))
		for i := range idx {
			idx[i] = i
		}
		ok, err := g.permitted(r.Context(), callerFromRequest(r), s, idx)
		if err != nil {
			g.logger.Error("Authorizing the table failed", "error", err)
			http.Error(w, "authorization is unavailable", http.StatusServiceUnavailable)
			return
		}
		t := &spec.Table{SchemaVersion: spec.SchemaVersion, Tools: make([]spec.TableTool, 0)}
		for i, allowed := range ok {
			if allowed {
				t.Tools = append(t.Tools, s.table.Tools[i])
			}
		}
		t.Revision = spec.TableRevision(t.Tools)
		n = len(t.Tools)
		var b []byte
		if b, err = json.Marshal(t); err != nil {
			http.Error(w, "encoding the table failed", http.StatusInternalServerError)
			return
		}
		doc, zdoc, revision = b, nil, t.Revision
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
	body := doc
	if acceptsGzip(r) {
		if zdoc == nil {
			var err error
			if zdoc, err = gzipBytes(doc); err != nil {
				http.Error(w, "compressing the table failed", http.StatusInternalServerError)
				return
			}
		}
		w.Header().Set("Content-Encoding", "gzip")
		body = zdoc
	}
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(body)
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
