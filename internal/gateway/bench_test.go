package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit/server"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// BenchmarkCall calls the same tool with the same arguments straight at
// the workload's /mcp, through a gateway without auth, and through a
// gateway with --auth=kubernetes (the caller's token review and access
// decision cached, as they are for every call but the first of a TTL) that
// mints a transaction token the workload verifies, with the Go SDK client
// at 2026-07-28 in each case, in one run:
//
//	go test -run '^$' -bench BenchmarkCall -benchtime 3s ./internal/gateway/
//
// The goal is gateway ≤ 1.3 × direct, auth on or off; gateway-auth-ES256
// shows what a P-256 key costs over the chart's Ed25519 one. The workload
// verifies tokens in every case (a call without one is anonymous), as it
// would in a cluster. The client, the gateway and the workload share this
// process: cpu-ns/op is the CPU of all three per call, which a busy
// machine distorts less than ns/op.
func BenchmarkCall(b *testing.B) {
	f := newFakeAPI()
	f.grant("bench", "crm", "")
	tok := f.token("bench")
	bearer := &http.Client{Transport: headerTransport{"Authorization": "Bearer " + tok}}
	// One authenticating gateway, and its workload, per signing algorithm:
	// the chart's key is Ed25519; ES256 is the other the gateway takes.
	authURL := map[string]string{}
	var wl *workload
	for alg, key := range map[string][]byte{"EdDSA": edKey(b), "ES256": pemKey(b)} {
		dir := b.TempDir()
		writeKeys(b, dir, key, nil)
		tokens, err := gateway.NewTxnTokens(gateway.TxnTokenOptions{KeyDir: dir})
		if err != nil {
			b.Fatal(err)
		}
		r := new(routes)
		g, url := newGateway(b, r, gateway.Options{Auth: &gateway.KubernetesAuth{Client: f, TTL: time.Hour}, TxnTokens: tokens})
		w := newVerifyingWorkload(b, "crm", "crm-tools", "crm_", server.TxnTokenOptions{JWKSURL: url + gateway.JWKSPath},
			echoTool("crm"), identityTool())
		r.add(w)
		if err := g.SetTable(table(w.tableTools())); err != nil {
			b.Fatal(err)
		}
		authURL[alg] = url
		if alg == "EdDSA" {
			wl = w
		}
	}
	g, url := newGateway(b, new(routes).add(wl), gateway.Options{})
	if err := g.SetTable(table(wl.tableTools())); err != nil {
		b.Fatal(err)
	}
	args := map[string]any{"text": "ab", "count": 3}
	for _, tc := range []struct {
		name, endpoint, tool string
		hc                   *http.Client
	}{
		{"direct", wl.srv.URL + "/mcp", "echo", nil},
		{"gateway", url + "/mcp", "crm_echo", nil},
		{"gateway-auth-EdDSA", authURL["EdDSA"] + "/mcp", "crm_echo", bearer},
		{"gateway-auth-ES256", authURL["ES256"] + "/mcp", "crm_echo", bearer},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cs := connect(b, tc.endpoint, "2026-07-28", nil, tc.hc)
			ctx := context.Background()
			call := func() {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: args})
				if err != nil || res.IsError {
					b.Fatalf("%v %+v", err, res)
				}
			}
			call() // warm the connections, the caches and the workload's keys
			if tc.hc != nil {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "crm_whoami", Arguments: map[string]any{}})
				if err != nil || res.IsError || !strings.Contains(text(res), saUser("bench")) {
					b.Fatalf("the workload did not verify the caller: %v %+v", err, res)
				}
			}
			reviews := f.tokenReviews.Load() + f.accessReviews.Load()
			b.ReportAllocs()
			b.ResetTimer()
			// CPU time per call as well as wall time: on a shared machine
			// the wall time of two hops is mostly waiting for a core.
			cpu0 := processCPU()
			for b.Loop() {
				call()
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
			if n := f.tokenReviews.Load() + f.accessReviews.Load() - reviews; n != 0 {
				b.Errorf("%d reviews while calling: the decisions were not cached", n)
			}
		})
	}
}

// BenchmarkTableMemory reports the heap that a gateway holding a table of
// 10,000 tools with realistic schemas keeps live, and the time to take a
// new table:
//
//	go test -run '^$' -bench BenchmarkTableMemory -benchtime 3x ./internal/gateway/
//
// The goal is 150 MiB or less.
func BenchmarkTableMemory(b *testing.B) {
	tbl := bigTable(10_000)
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		g := gateway.New(nil)
		start := time.Now()
		if err := g.SetTable(tbl); err != nil {
			b.Fatal(err)
		}
		// The first search of a revision builds its index: count it in.
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/search?q=weather", nil))
		if rec.Code != http.StatusOK {
			b.Fatalf("GET /v1/search = %d", rec.Code)
		}
		took := time.Since(start)
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB-live")
		b.ReportMetric(took.Seconds()*1000, "ms-SetTable+index")
		runtime.KeepAlive(g)
		g.Close()
	}
	// The table's own bytes, decoded, for scale.
	raw, _ := json.Marshal(tbl)
	b.ReportMetric(float64(len(raw))/(1<<20), "MiB-json")
}

// processCPU is the user and system CPU time of this process so far: the
// client, the gateway and the workload all run in it.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// bigTable is n tools with schemas like a real service's: a few described
// properties with bounds, an output schema and annotations.
func bigTable(n int) *spec.Table {
	tools := make([]spec.TableTool, n)
	yes := true
	for i := range tools {
		name := fmt.Sprintf("team%02d_lookup_records_%05d", i%50, i)
		ns := fmt.Sprintf("team-%02d", i%50)
		tools[i] = spec.TableTool{
			Name: name, SourceName: fmt.Sprintf("lookup_records_%05d", i),
			Title:        "Look up records",
			Description:  fmt.Sprintf("Looks up records of kind %d by a free-text query and returns at most limit matches, newest first.", i),
			InputSchema:  json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"What to look for.","minLength":1,"maxLength":256},"limit":{"type":"integer","minimum":1,"maximum":100,"default":10,"description":"The most records returned."},"since":{"type":"string","format":"date-time","description":"Only records changed after this time."}},"required":["query"],"additionalProperties":false}`),
			OutputSchema: json.RawMessage(`{"type":"object","properties":{"records":{"type":"array","items":{"type":"object","properties":{"id":{"type":"string"},"summary":{"type":"string"}}}}}}`),
			Annotations:  &spec.Annotations{ReadOnlyHint: &yes},
			ToolSet:      spec.ObjectReference{Namespace: ns, Name: "records"},
			Endpoints: &spec.Endpoints{
				Invoke: fmt.Sprintf("http://records.%s.svc:8080/tools/lookup_records_%05d", ns, i),
				MCP:    fmt.Sprintf("http://records.%s.svc:8080/mcp", ns),
			},
		}
	}
	return table(tools)
}
