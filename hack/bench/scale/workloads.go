package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"

	"github.com/toolplane/toolplane/test/harness"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// workloads are a few loopback servers that together serve sets distinct
// tool sets. Set i lives on server i%len(servers) under setPath(i), so each
// ToolSet's spec.path selects one set.
type workloads struct {
	servers []*httptest.Server
	sets    []*harness.Workload
}

// scrapes counts the spec requests answered, 304s included.
func (w *workloads) scrapes() int {
	n := 0
	for _, s := range w.sets {
		n += s.Scrapes()
	}
	return n
}

func startWorkloads(sets, tools, servers int) *workloads {
	w := &workloads{}
	muxes := make([]*http.ServeMux, servers)
	for s := range muxes {
		muxes[s] = http.NewServeMux()
	}
	for i := range sets {
		wl := harness.NewWorkload(fmt.Sprintf("bench-%04d", i), harness.Tools(toolPrefix(i), tools))
		w.sets = append(w.sets, wl)
		muxes[i%servers].Handle(setPath(i), wl)
	}
	for _, mux := range muxes {
		w.servers = append(w.servers, httptest.NewServer(mux))
	}
	return w
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

// toolPrefix names the tools of set i: set0042_tool00 … set0042_tool09,
// distinct across every set, so that the table holds sets×tools tools and
// no conflict.
func toolPrefix(i int) string { return fmt.Sprintf("set%04d_tool", i) }

func toolName(i, j int) string { return fmt.Sprintf("%s%02d", toolPrefix(i), j) }
