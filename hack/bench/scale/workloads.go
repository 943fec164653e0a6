package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// workloads are a few loopback servers that together serve sets distinct
// tool sets. Set i lives on server i%len(servers) under setPath(i), so each
// ToolSet's spec.path selects one set.
type workloads struct {
	servers []*httptest.Server
	// scrapes counts the spec requests answered, 304s included.
	scrapes atomic.Int64
}

func startWorkloads(sets, tools, servers int) (*workloads, error) {
	w := &workloads{}
	muxes := make([]*http.ServeMux, servers)
	for s := range muxes {
		muxes[s] = http.NewServeMux()
	}
	for i := range sets {
		h, err := w.setHandler(i, tools)
		if err != nil {
			return nil, err
		}
		muxes[i%servers].Handle(setPath(i), h)
	}
	for _, mux := range muxes {
		srv := httptest.NewUnstartedServer(mux)
		// Keep-alive connections from the manager are many; the default
		// listener backlog is enough, but say so rather than rely on it.
		srv.Config.MaxHeaderBytes = 16 << 10
		srv.Start()
		w.servers = append(w.servers, srv)
	}
	return w, nil
}

// target returns the port and spec path of set i.
func (w *workloads) target(i int) (int, string) {
	_, port, _ := net.SplitHostPort(w.servers[i%len(w.servers)].Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	return p, setPath(i)
}

func (w *workloads) close() {
	for _, s := range w.servers {
		s.Close()
	}
}

func setPath(i int) string { return fmt.Sprintf("/sets/%04d%s", i, spec.DefaultPath) }

// toolName is the name of tool j of set i: distinct across every set, so the
// table holds sets×tools tools and no conflicts.
func toolName(i, j int) string { return fmt.Sprintf("set%04d_tool%02d", i, j) }

// setHandler serves set i's spec document as a toolkit workload does: with
// its revision as ETag, answering a matching If-None-Match with 304.
func (w *workloads) setHandler(i, tools int) (http.Handler, error) {
	doc := spec.Document{SchemaVersion: spec.SchemaVersion, Server: spec.Server{Name: fmt.Sprintf("bench-%04d", i), Version: "1.0.0"}}
	for j := range tools {
		doc.Tools = append(doc.Tools, spec.Tool{
			Name:        toolName(i, j),
			Description: fmt.Sprintf("Looks up records of kind %d in catalogue %d; returns at most limit matches.", j, i),
			InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"What to look for."},"limit":{"type":"integer","minimum":1,"maximum":100,"default":10}},"required":["query"]}`),
			Annotations: &spec.Annotations{ReadOnlyHint: ptr(true)},
		})
	}
	spec.SortTools(doc.Tools)
	doc.Revision = spec.Revision(doc.Tools)
	body, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	etag := spec.ETag(doc.Revision)
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.scrapes.Add(1)
		rw.Header().Set("ETag", etag)
		if r.Header.Get("If-None-Match") == etag {
			rw.WriteHeader(http.StatusNotModified)
			return
		}
		rw.Header().Set("Content-Type", "application/json")
		_, _ = rw.Write(body)
	}), nil
}

func ptr[T any](v T) *T { return &v }
