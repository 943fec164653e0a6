package gateway_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/trace/noop"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// BenchmarkCallOnTheWire is one tools/call as make bench-gateway sends it:
// the bytes the Go SDK client posts, replayed by a plain HTTP client (so
// the client's own decoding is not counted), at each era, through a
// gateway without auth (holding the one tool, or 10,000 more too); and, as the baseline, the same arguments posted to
// the workload's invoke endpoint directly, and through a bare
// httputil.ReverseProxy (reverse-proxy: the floor of any Go proxy's hop):
//
//	go test -run '^$' -bench BenchmarkCallOnTheWire -benchtime 2s ./internal/gateway/
//
// cpu-ns/op is the CPU of the client, the gateway and the workload (one
// process) per call; gateway less direct is what the gateway adds, which
// a shared machine distorts less than wall time. allocs/op likewise.
func BenchmarkCallOnTheWire(b *testing.B) {
	wl := newWorkload(b, "crm", "crm-tools", "crm_", echoTool("crm"))
	// The provider cmd/gateway passes without an OTLP endpoint.
	g, gwURL := newGateway(b, new(routes).add(wl), gateway.Options{TracerProvider: noop.NewTracerProvider()})
	if err := g.SetTable(table(wl.tableTools())); err != nil {
		b.Fatal(err)
	}
	// And one that holds 10,000 other tools besides, as make bench-gateway's
	// replicas do: the garbage collector scans the table on every cycle.
	big, bigURL := newGateway(b, new(routes).add(wl), gateway.Options{TracerProvider: noop.NewTracerProvider()})
	if err := big.SetTable(table(bigTable(10_000).Tools, wl.tableTools())); err != nil {
		b.Fatal(err)
	}
	// And the floor of any Go proxy: a bare httputil.ReverseProxy in front
	// of the workload's invoke endpoint, one more server and one more
	// client per call and nothing else.
	wlURL, err := url.Parse(wl.srv.URL)
	if err != nil {
		b.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(wlURL)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 4}
	// Pooled copy buffers, as a careful deployment sets: without, each
	// call allocates 32 KiB, which would flatter the gateway.
	rp.BufferPool = new(copyBuffers)
	proxy := httptest.NewServer(rp)
	b.Cleanup(proxy.Close)
	args := `{"text":"ab","count":3}`
	call2026 := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"crm_echo","arguments":` + args + `,` + meta2026 + `}}`
	call2025 := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"crm_echo","arguments":` + args + `}}`
	for _, tc := range []struct {
		name, url, body string
		header          http.Header
		want            string
	}{
		{"direct", wl.srv.URL + spec.InvokePrefix + "echo", args, http.Header{"Content-Type": {"application/json"}}, `"echo":"ababab"`},
		{"reverse-proxy", proxy.URL + spec.InvokePrefix + "echo", args, http.Header{"Content-Type": {"application/json"}}, `"echo":"ababab"`},
		{"gateway-2026", gwURL + "/mcp", call2026, http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
			"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"crm_echo"}}, `"echo":"ababab"`},
		{"gateway-2026-10k", bigURL + "/mcp", call2026, http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
			"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"crm_echo"}}, `"echo":"ababab"`},
		{"gateway-2025", gwURL + "/mcp", call2025, http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
			"Mcp-Protocol-Version": {"2025-11-25"}}, `"echo":"ababab"`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
			call := func() {
				req, err := http.NewRequest(http.MethodPost, tc.url, strings.NewReader(tc.body))
				if err != nil {
					b.Fatal(err)
				}
				req.Header = tc.header.Clone()
				resp, err := hc.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(tc.want)) || bytes.Contains(body, []byte(`"isError":true`)) {
					b.Fatalf("%d %s %v", resp.StatusCode, body, err)
				}
			}
			call()
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			for b.Loop() {
				call()
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// copyBuffers is an httputil.BufferPool of 32 KiB buffers.
type copyBuffers struct{ p sync.Pool }

func (b *copyBuffers) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, 32<<10)
}

func (b *copyBuffers) Put(buf []byte) { b.p.Put(&buf) }
