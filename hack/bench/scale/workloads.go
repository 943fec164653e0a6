package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"

	"github.com/toolplane/toolplane/test/harness"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// workloads are a few loopback servers that together serve sets distinct
// tool sets. Set i lives on server i%len(servers) under setPath(i), so each
// ToolSet's spec.path selects one set.
type workloads struct {
	servers []*httptest.Server
	sets    []*harness.Workload
	// tools are the tools each set serves now, and base their descriptions
	// before any change.
	tools [][]spec.Tool
	base  [][]spec.Tool
}

// scrapes counts the spec requests answered, 304s included.
func (w *workloads) scrapes() int {
	n := 0
	for _, s := range w.sets {
		n += s.Scrapes()
	}
	return n
}

func startWorkloads(sets, tools, servers int, distinctSchemas bool) *workloads {
	w := &workloads{}
	muxes := make([]*http.ServeMux, servers)
	for s := range muxes {
		muxes[s] = http.NewServeMux()
	}
	for i := range sets {
		ts := harness.Tools(toolPrefix(i), tools)
		if distinctSchemas {
			for j := range ts {
				own := strings.Replace(string(ts[j].InputSchema), `"What to look for."`, fmt.Sprintf(`"What to look for in set %d."`, i), 1)
				if own == string(ts[j].InputSchema) {
					panic("--distinct-schemas: the harness's schema no longer has the description it rewrites")
				}
				ts[j].InputSchema = json.RawMessage(own)
			}
		}
		wl := harness.NewWorkload(fmt.Sprintf("bench-%04d", i), ts)
		w.sets = append(w.sets, wl)
		w.tools = append(w.tools, ts)
		w.base = append(w.base, slices.Clone(ts))
		muxes[i%servers].Handle(setPath(i), wl)
	}
	for _, mux := range muxes {
		w.servers = append(w.servers, httptest.NewServer(mux))
	}
	return w
}

// changeTool gives tool j of set i the description of change seq, and with
// it a new revision, so that the manager's conditional scrape gets the new
// document instead of a 304.
func (w *workloads) changeTool(i, j, seq int) {
	before := w.sets[i].ETag()
	w.tools[i][j].Description = churnDescription(w.base[i][j].Description, seq)
	w.sets[i].SetTools(w.tools[i])
	if w.sets[i].ETag() == before {
		panic(fmt.Sprintf("changing tool %s left the ETag of set %d at %s", toolName(i, j), i, before))
	}
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
