package harness

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// Workload serves one spec document as a toolkit workload does, with its
// revision as ETag and 304 for a matching If-None-Match, and records when
// it was scraped. Its tools can change while it serves.
type Workload struct {
	mu      sync.Mutex
	name    string
	body    []byte
	etag    string
	scrapes []time.Time
}

// NewWorkload returns a workload named server that serves tools.
func NewWorkload(server string, tools []spec.Tool) *Workload {
	w := &Workload{name: server}
	w.SetTools(tools)
	return w
}

// SetTools replaces the tools served, and so the revision.
func (w *Workload) SetTools(tools []spec.Tool) {
	doc := spec.Document{SchemaVersion: spec.SchemaVersion, Server: spec.Server{Name: w.name, Version: "1.0.0"}}
	doc.Tools = append([]spec.Tool{}, tools...)
	spec.SortTools(doc.Tools)
	doc.Revision = spec.Revision(doc.Tools)
	body, err := json.Marshal(doc)
	if err != nil {
		panic(fmt.Sprintf("encoding the spec document of %s: %v", w.name, err))
	}
	w.mu.Lock()
	w.body, w.etag = body, spec.ETag(doc.Revision)
	w.mu.Unlock()
}

// ServeHTTP answers a scrape.
func (w *Workload) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	w.mu.Lock()
	w.scrapes = append(w.scrapes, time.Now())
	body, etag := w.body, w.etag
	w.mu.Unlock()
	rw.Header().Set("ETag", etag)
	if r.Header.Get("If-None-Match") == etag {
		rw.WriteHeader(http.StatusNotModified)
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	_, _ = rw.Write(body)
}

// ETag returns the ETag the workload answers with now: its revision.
func (w *Workload) ETag() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.etag
}

// Scrapes returns how many times the workload was scraped.
func (w *Workload) Scrapes() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.scrapes)
}

// LongestGap returns the longest time between two scrapes since since, the
// time from since to the first scrape after it and from the last scrape to
// now included: how late the workload's scrapes have been at worst.
func (w *Workload) LongestGap(since time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	prev, gap := since, time.Duration(0)
	for _, t := range w.scrapes {
		if t.Before(since) {
			continue
		}
		gap = max(gap, t.Sub(prev))
		prev = t
	}
	return max(gap, time.Since(prev))
}

// Gaps returns the times between the workload's scrapes from since to until.
func (w *Workload) Gaps(since, until time.Time) []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var gaps []time.Duration
	var prev time.Time
	for _, t := range w.scrapes {
		if t.Before(since) || t.After(until) {
			continue
		}
		if !prev.IsZero() {
			gaps = append(gaps, t.Sub(prev))
		}
		prev = t
	}
	return gaps
}

// Tools returns n tools named <prefix>00, <prefix>01, … with a small
// object schema each.
func Tools(prefix string, n int) []spec.Tool {
	tools := make([]spec.Tool, n)
	for j := range tools {
		tools[j] = spec.Tool{
			Name:        fmt.Sprintf("%s%02d", prefix, j),
			Description: fmt.Sprintf("Looks up records of kind %d; returns at most limit matches.", j),
			InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"What to look for."},"limit":{"type":"integer","minimum":1,"maximum":100,"default":10}},"required":["query"]}`),
			Annotations: &spec.Annotations{ReadOnlyHint: ptr(true)},
		}
	}
	return tools
}

func ptr[T any](v T) *T { return &v }
