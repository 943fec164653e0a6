package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit"
)

// gatedTool blocks each call, after telling started, until release closes.
func gatedTool(name string, started chan<- struct{}, release <-chan struct{}) *toolkit.Tool {
	return toolkit.MustNew(name, "Waits to be released", func(ctx context.Context, _ struct{}) (string, error) {
		started <- struct{}{}
		select {
		case <-release:
			return "released", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
}

// A tool leaves the table and comes back while one of its calls runs: the
// call ends ok with the tool in the table, and counts. (The CounterVec
// counted it by name; callCounter counted it in the toolCalls of the
// first table, which the second dropped and the third did not get back,
// until countCall looked the tool up in the table served when the call
// ends.)
func TestRedTeamCallInFlightAcrossAToolsFlapIsCounted(t *testing.T) {
	started, release := make(chan struct{}, 1), make(chan struct{})
	w := newWorkload(t, "apps", "slow-tools", "slow_", gatedTool("gate", started, release))
	other := newWorkload(t, "apps", "other-tools", "other_", echoTool("other"))
	reg := prometheus.NewRegistry()
	g, url := newGateway(t, new(routes).add(w, other), gateway.Options{Registerer: reg})
	full := table(w.tableTools(), other.tableTools())
	if err := g.SetTable(full); err != nil {
		t.Fatal(err)
	}
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			before := callsCounted(t, reg)[[2]string{"slow_gate", "ok"}]
			cs := connect(t, url+"/mcp", era, nil, nil)
			done := make(chan error, 1)
			go func() {
				res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "slow_gate", Arguments: map[string]any{}})
				if err == nil && (res.IsError || text(res) != "released") {
					err = fmt.Errorf("result %q isError %v", text(res), res.IsError)
				}
				done <- err
			}()
			<-started
			// The ToolSet's tools leave the table (its Pods roll, say) and
			// come back before the call ends.
			if err := g.SetTable(table(other.tableTools())); err != nil {
				t.Fatal(err)
			}
			if err := g.SetTable(full); err != nil {
				t.Fatal(err)
			}
			release <- struct{}{}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			got := callsCounted(t, reg)
			if n := got[[2]string{"slow_gate", "ok"}]; n != 1 {
				// before is 0 in both eras: the flap dropped the first era's count too.
				t.Errorf("slow_gate ok calls after a call that ended ok with slow_gate in the table: %v, want 1 (before the call: %v; all: %v)", n, before, got)
			}
		})
	}
}

// calls run while the table is replaced over and over with
// the same tools in other places (a tool sorting before them comes and
// goes) and /metrics is scraped over HTTP: every call is counted once,
// under its own tool, and every scrape succeeds.
func TestRedTeamCallsCountedWhileTablesReorderAndScrapes(t *testing.T) {
	a := newWorkload(t, "apps", "a-tools", "b_", echoTool("a"))
	b := newWorkload(t, "apps", "c-tools", "c_", echoTool("c"))
	z := newWorkload(t, "apps", "z-tools", "a_", echoTool("z")) // sorts first: moves b_ and c_
	reg := prometheus.NewRegistry()
	g, url := newGateway(t, new(routes).add(a, b, z), gateway.Options{Registerer: reg})
	t1, t2 := table(a.tableTools(), b.tableTools()), table(z.tableTools(), a.tableTools(), b.tableTools())
	if err := g.SetTable(t1); err != nil {
		t.Fatal(err)
	}
	metrics := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(metrics.Close)

	stop := make(chan struct{})
	var bg sync.WaitGroup
	var scrapes, swaps atomic.Int64
	var scrapeErr atomic.Value
	bg.Add(2)
	go func() {
		defer bg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			tt := t1
			if i%2 == 1 {
				tt = t2
			}
			if err := g.SetTable(tt); err != nil {
				scrapeErr.Store(err)
				return
			}
			swaps.Add(1)
		}
	}()
	go func() {
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			resp, err := http.Get(metrics.URL)
			if err != nil {
				scrapeErr.Store(err)
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				scrapeErr.Store(fmt.Errorf("scrape: %s: %s", resp.Status, body))
				return
			}
			scrapes.Add(1)
		}
	}()
	const perClient = 40
	var calls sync.WaitGroup
	for _, era := range eras {
		for _, name := range []string{"b_echo", "c_echo"} {
			cs := connect(t, url+"/mcp", era, nil, nil)
			calls.Add(1)
			go func() {
				defer calls.Done()
				for range perClient {
					res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: name, Arguments: map[string]any{"text": "x"}})
					if err != nil || res.IsError {
						t.Errorf("%s: %v", name, err)
						return
					}
				}
			}()
		}
	}
	calls.Wait()
	close(stop)
	bg.Wait()
	if err := scrapeErr.Load(); err != nil {
		t.Fatal(err)
	}
	got := callsCounted(t, reg)
	want := float64(perClient * len(eras))
	if got[[2]string{"b_echo", "ok"}] != want || got[[2]string{"c_echo", "ok"}] != want {
		t.Errorf("counted %v, want %v each of b_echo and c_echo ok", got, want)
	}
	t.Logf("%d tables set and %d scrapes during the calls", swaps.Load(), scrapes.Load())
}

// gatedAskingServer2025 is askingServer2025 whose tool asks only once
// gate closes, telling started when the call arrives.
func gatedAskingServer2025(name string, started chan<- struct{}, gate <-chan struct{}) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "ask-gated"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: name}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		started <- struct{}{}
		<-gate
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Which color?", RequestedSchema: askSchema})
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s %v", res.Action, res.Content["color"])}}}, nil, nil
	})
	return s
}

// "A tool that leaves the table leaves the metric" holds for input_required
// too: a call in flight as its tool leaves, answered input_required after
// the new table, leaves no series of a tool the table no longer holds.
// (input_required had no place in toolCalls and counted in
// callCounter.other, which setTable had pruned before the answer.)
func TestRedTeamInputRequiredOfALeftToolLeavesTheMetric(t *testing.T) {
	defer gateway.SetParkTimeout(300 * time.Millisecond)()
	started, gate := make(chan struct{}, 1), make(chan struct{})
	r := new(routes)
	r.set("askg.apps.svc.cluster.local:8080", mcpBackend(t, gatedAskingServer2025("ask_gated", started, gate), false))
	other := newWorkload(t, "apps", "other-tools", "other_", echoTool("other"))
	r.add(other)
	reg := prometheus.NewRegistry()
	g, url := newGateway(t, r, gateway.Options{Registerer: reg})
	if err := g.SetTable(table(mcpTableTools("apps", "askg", "/mcp", "ask_gated"), other.tableTools())); err != nil {
		t.Fatal(err)
	}
	const meta = `"_meta":{"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}`
	done := make(chan map[string]any, 1)
	go func() {
		res, _ := replyOf(t, postCall(t, url+"/mcp", "ask_gated", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask_gated",`+meta+`}}`))["result"].(map[string]any)
		done <- res
	}()
	select {
	case <-started:
	case res := <-done:
		t.Fatalf("the backend was not called: %v", res)
	}
	if err := g.SetTable(table(other.tableTools())); err != nil {
		t.Fatal(err)
	}
	close(gate)
	if res := <-done; res["resultType"] != "input_required" {
		t.Fatalf("answer %v", res)
	}
	got := callsCounted(t, reg)
	for k := range got {
		if k[0] == "ask_gated" {
			t.Errorf("series %v of ask_gated, which left the table before this scrape: %v", k, got)
		}
	}
}
