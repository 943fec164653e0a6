package gateway_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// changingTables gives the tables of workloads a and b with the
// descriptions of a's tools (if a) and b's (if b) changed to version n.
func changingTables(wa, wb *workload) func(n int, a, b bool) *spec.Table {
	base := map[string][]spec.TableTool{"a": wa.tableTools(), "b": wb.tableTools()}
	cur := map[string]int{"a": 0, "b": 0}
	return func(n int, a, b bool) *spec.Table {
		if a {
			cur["a"] = n
		}
		if b {
			cur["b"] = n
		}
		var all [][]spec.TableTool
		for _, ns := range []string{"a", "b"} {
			tools := append([]spec.TableTool(nil), base[ns]...)
			for i := range tools {
				tools[i].Description = fmt.Sprintf("%s, version %d", tools[i].Description, cur[ns])
			}
			all = append(all, tools)
		}
		return table(all...)
	}
}

// warmUp changes what every listener sees until each has heard of a
// change: a client's stream may open some time after it connected.
func warmUp(t *testing.T, g *gateway.Gateway, tables func(int, bool, bool) *spec.Table, n *int, chans ...chan struct{}) {
	t.Helper()
	heard := make([]bool, len(chans))
	deadline := time.Now().Add(60 * time.Second)
	for {
		*n++
		if err := g.SetTable(tables(*n, true, true)); err != nil {
			t.Fatal(err)
		}
		wait := time.After(500 * time.Millisecond)
	collect:
		for {
			all := true
			for _, h := range heard {
				all = all && h
			}
			if all {
				break
			}
			for i, c := range chans {
				select {
				case <-c:
					heard[i] = true
					continue collect
				default:
				}
			}
			select {
			case <-wait:
				break collect
			case <-time.After(5 * time.Millisecond):
			}
		}
		done := true
		for _, h := range heard {
			done = done && h
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not every listener heard a change within 60s: %v", heard)
		}
	}
	// Drain what further changes of the warm-up sent.
	drain(t, chans...)
}

// drain empties chans once the notifications in flight have arrived:
// until none arrives for a while (bounded: the channels hold one each).
func drain(t *testing.T, chans ...chan struct{}) {
	t.Helper()
	for range 3 {
		for _, c := range chans {
			select {
			case <-c:
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestListChangedReachesOnlyTheViewsItChanged(t *testing.T) {
	wa := newWorkload(t, "a", "tools", "a_", echoTool("a"))
	wb := newWorkload(t, "b", "tools", "b_", echoTool("b"))
	reg := prometheus.NewRegistry()
	g, url := newGateway(t, new(routes).add(wa, wb), gateway.Options{Registerer: reg, Sessions: true})
	tables := changingTables(wa, wb)
	n := 0
	if err := g.SetTable(tables(n, true, true)); err != nil {
		t.Fatal(err)
	}
	inA, inB, inAll, sessionB := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{}, 1)
	connect(t, url+"/mcp/namespaces/a", "2026-07-28", inA, nil)
	connect(t, url+"/mcp/toolsets/b/tools", "2026-07-28", inB, nil)
	connect(t, url+"/mcp", "2026-07-28", inAll, nil)
	connect(t, url+"/mcp/namespaces/b", "2025-11-25", sessionB, nil) // a session of the 2025 era
	warmUp(t, g, tables, &n, inA, inB, inAll, sessionB)

	skipped := counterValue(t, reg, "toolplane_gateway_list_changed_total", map[string]string{"result": "skipped"})
	n++
	if err := g.SetTable(tables(n, true, false)); err != nil { // a's tools only
		t.Fatal(err)
	}
	waitFor(t, "the listener of namespace a hears of its change", func() bool {
		select {
		case <-inA:
			return true
		default:
			return false
		}
	})
	waitFor(t, "the listener of every tool hears of it", func() bool {
		select {
		case <-inAll:
			return true
		default:
			return false
		}
	})
	waitFor(t, "the listeners of ToolSet b/tools and of namespace b are skipped", func() bool {
		return counterValue(t, reg, "toolplane_gateway_list_changed_total", map[string]string{"result": "skipped"}) >= skipped+2
	})
	for _, c := range []chan struct{}{inB, sessionB} {
		select {
		case <-c:
			t.Fatal("a listener of b's tools heard of a change to namespace a")
		default:
		}
	}
	if got := counterValue(t, reg, "toolplane_gateway_list_changed_total", map[string]string{"result": "skipped"}); got != skipped+2 {
		t.Errorf("%v listeners skipped, want 2", got-skipped)
	}

	// A table whose change no tools/list shows (an endpoint's port)
	// concerns nobody.
	moved := tables(n, false, false)
	for i := range moved.Tools {
		moved.Tools[i].CallsPerMinute = 7
	}
	moved.Revision = spec.TableRevision(moved.Tools)
	if err := g.SetTable(moved); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every listener is skipped for a change no list shows", func() bool {
		return counterValue(t, reg, "toolplane_gateway_list_changed_total", map[string]string{"result": "skipped"}) >= skipped+6
	})
}

func TestListChangedUnderAuthReachesOnlyThoseWhoMayCallAChangedTool(t *testing.T) {
	wa := newWorkload(t, "a", "tools", "a_", echoTool("a"))
	wb := newWorkload(t, "b", "tools", "b_", echoTool("b"))
	f := newFakeAPI()
	f.grant("alice", "a", "")
	f.grant("bob", "b", "")
	reg := prometheus.NewRegistry()
	g, url := newGateway(t, new(routes).add(wa, wb), gateway.Options{Registerer: reg, Auth: &gateway.KubernetesAuth{Client: f}})
	tables := changingTables(wa, wb)
	n := 0
	if err := g.SetTable(tables(n, true, true)); err != nil {
		t.Fatal(err)
	}
	alice, bob := make(chan struct{}, 1), make(chan struct{}, 1)
	connect(t, url+"/mcp", "2026-07-28", alice, &http.Client{Transport: headerTransport{"Authorization": "Bearer " + f.token("alice")}})
	connect(t, url+"/mcp", "2026-07-28", bob, &http.Client{Transport: headerTransport{"Authorization": "Bearer " + f.token("bob")}})
	warmUp(t, g, tables, &n, alice, bob)

	skipped := counterValue(t, reg, "toolplane_gateway_list_changed_total", map[string]string{"result": "skipped"})
	n++
	if err := g.SetTable(tables(n, true, false)); err != nil { // a's tools only
		t.Fatal(err)
	}
	waitFor(t, "alice, who may call a's tools, hears of their change", func() bool {
		select {
		case <-alice:
			return true
		default:
			return false
		}
	})
	waitFor(t, "bob is skipped", func() bool {
		return counterValue(t, reg, "toolplane_gateway_list_changed_total", map[string]string{"result": "skipped"}) >= skipped+1
	})
	select {
	case <-bob:
		t.Fatal("bob, who may call none of a's tools, heard of their change")
	default:
	}
}
