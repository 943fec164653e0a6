package discovery_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane/toolkit/discovery"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// tableServer serves a table as the gateway's GET /v1/tools does: ETag,
// 304, gzip. It can fail on demand, and records each If-None-Match.
type tableServer struct {
	mu      sync.Mutex
	body    []byte
	etag    string
	fail    bool
	matches []string
}

func (s *tableServer) set(t *testing.T, names ...string) string {
	tools := make([]spec.TableTool, len(names))
	for i, n := range names {
		tools[i] = spec.TableTool{Name: n, SourceName: n, InputSchema: json.RawMessage(`{"type":"object"}`), ToolSet: spec.ObjectReference{Namespace: "ns", Name: "ts"}}
	}
	tbl := &spec.Table{SchemaVersion: spec.SchemaVersion, Tools: tools, Revision: spec.TableRevision(tools)}
	b, err := json.Marshal(tbl)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.body, s.etag = b, spec.ETag(tbl.Revision)
	s.mu.Unlock()
	return tbl.Revision
}

func (s *tableServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.matches = append(s.matches, r.Header.Get("If-None-Match"))
	if s.fail {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("ETag", s.etag)
	if r.Header.Get("If-None-Match") == s.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	_, _ = w.Write(s.body)
}

func TestLoadURLAndWatchURL(t *testing.T) {
	ts := &tableServer{}
	first := ts.set(t, "a", "b")
	srv := httptest.NewServer(ts)
	defer srv.Close()

	c := &discovery.Client{}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.LoadURL(ctx, srv.URL); err != nil {
		t.Fatal(err)
	}
	if c.Revision() != first || len(c.Table().Tools) != 2 {
		t.Fatalf("loaded %s with %d tools", c.Revision(), len(c.Table().Tools))
	}
	if _, err := discovery.FetchURL(ctx, nil, srv.URL, first); !errors.Is(err, discovery.ErrNotModified) {
		t.Errorf("FetchURL with the current revision: %v", err)
	}

	changed := make(chan *spec.Table, 4)
	c.OnChange = func(t *spec.Table) { changed <- t }
	done := make(chan error, 1)
	go func() { done <- c.WatchURL(ctx, srv.URL, 20*time.Millisecond) }()

	// A failing server keeps the last good table.
	ts.mu.Lock()
	ts.fail = true
	ts.mu.Unlock()
	time.Sleep(100 * time.Millisecond)
	if c.Revision() != first {
		t.Errorf("revision %s while the server fails", c.Revision())
	}
	second := ts.set(t, "a", "b", "c")
	ts.mu.Lock()
	ts.fail = false
	ts.mu.Unlock()
	select {
	case got := <-changed:
		if got.Revision != second || c.Revision() != second {
			t.Errorf("OnChange with %s, client at %s, want %s", got.Revision, c.Revision(), second)
		}
	case <-ctx.Done():
		t.Fatal("WatchURL did not load the new table")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("WatchURL: %v", err)
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	sawConditional := false
	for _, m := range ts.matches {
		sawConditional = sawConditional || m == spec.ETag(first)
	}
	if !sawConditional {
		t.Errorf("WatchURL never sent If-None-Match with the revision it held: %q", ts.matches)
	}
}
