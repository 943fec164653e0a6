package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit"
)

// The fast path of tools/call (fastcall.go) must answer exactly as the SDK
// does. These tests send the same requests to gateways with it and to
// gateways without it, and compare the answers: status, the header that a
// client reads, and the body byte for byte.

// fastWorld is a set of gateways over the same workloads: plain, with
// auth (alice may call the crm ToolSet, not hr), and with a per-caller
// limit of two calls a minute.
type fastWorld struct {
	gateways             []*gateway.Gateway
	plain, authed, limit string
}

type fastFixture struct {
	crm, hr *workload
	f       *fakeAPI
	bearer  string
}

func newFastWorld(t testing.TB, fx *fastFixture, fast bool) *fastWorld {
	t.Helper()
	w := &fastWorld{}
	r := new(routes).add(fx.crm, fx.hr)
	tbl := table(fx.crm.tableTools(), fx.hr.tableTools())
	for _, opts := range []gateway.Options{
		{},
		{Auth: &gateway.KubernetesAuth{Client: fx.f}},
		{MaxCallsPerCallerPerMinute: 2},
	} {
		g, url := newGateway(t, r, opts)
		gateway.SetFastCall(g, fast)
		if err := g.SetTable(tbl); err != nil {
			t.Fatal(err)
		}
		w.gateways = append(w.gateways, g)
		switch {
		case opts.Auth != nil:
			w.authed = url
		case opts.MaxCallsPerCallerPerMinute != 0:
			w.limit = url
		default:
			w.plain = url
		}
	}
	return w
}

func newFastFixture(t testing.TB) *fastFixture {
	t.Helper()
	fail := toolkit.MustNew("fail", "Fails", func(context.Context, echoIn) (string, error) {
		return "", errors.New("it failed <as asked> & more")
	})
	fx := &fastFixture{
		crm: newWorkload(t, "crm", "crm-tools", "crm_", echoTool("crm"), fail),
		hr:  newWorkload(t, "hr", "hr-tools", "hr_", echoTool("hr")),
		f:   newFakeAPI(),
	}
	fx.f.grant("alice", "crm", "")
	fx.bearer = fx.f.token("alice")
	return fx
}

// rawCall is one request as sent.
type rawCall struct {
	name   string
	target string // plain, authed, limit
	path   string
	header map[string]string // over the era's; "" deletes
	body   string
	fast   bool // the fast path should take it
}

type rawAnswer struct {
	Status       int
	ContentType  string
	CacheControl string
	Body         string
}

func modernMeta(extra string) string {
	return `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1.0.0"},"io.modelcontextprotocol/clientCapabilities":{}` + extra + `}`
}

func eraHeader(era, tool string) map[string]string {
	h := map[string]string{
		"Content-Type":         "application/json",
		"Accept":               "application/json, text/event-stream",
		"Mcp-Protocol-Version": era,
	}
	if era >= "2026-07-28" {
		h["Mcp-Method"] = "tools/call"
		h["Mcp-Name"] = tool
	}
	return h
}

func callBody(era, id, tool, args, metaExtra string) string {
	meta := ""
	switch {
	case era >= "2026-07-28":
		meta = `,"_meta":` + modernMeta(metaExtra)
	case metaExtra != "":
		meta = `,"_meta":{` + strings.TrimPrefix(metaExtra, ",") + `}`
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":%s%s}}`, id, tool, args, meta)
}

func fastCalls(eras []string) []rawCall {
	var cs []rawCall
	for _, era := range append(eras, "2025-06-18") {
		add := func(c rawCall, tool string) {
			c.name = era + " " + c.name
			h := eraHeader(era, tool)
			for k, v := range c.header {
				h[k] = v
			}
			c.header = h
			if c.target == "" {
				c.target = "plain"
			}
			if c.path == "" {
				c.path = "/mcp"
			}
			cs = append(cs, c)
		}
		ok := `{"text":"a<b>&c","count":2}`
		add(rawCall{name: "ok", body: callBody(era, "1", "crm_echo", ok, ""), fast: true}, "crm_echo")
		add(rawCall{name: "ok, string id", body: callBody(era, `"x-1"`, "crm_echo", ok, ""), fast: true}, "crm_echo")
		add(rawCall{name: "ok, big id", body: callBody(era, "9007199254740993", "crm_echo", ok, ""), fast: true}, "crm_echo")
		add(rawCall{name: "ok, fractional id", body: callBody(era, "1.5", "crm_echo", ok, ""), fast: true}, "crm_echo")
		add(rawCall{name: "ok, trace context", body: callBody(era, "1", "crm_echo", ok, `,"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"`), fast: true}, "crm_echo")
		add(rawCall{name: "ok, no arguments", body: fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"crm_echo"%s}}`,
			map[bool]string{true: `,"_meta":` + modernMeta(""), false: ""}[era >= "2026-07-28"]), fast: true}, "crm_echo")
		add(rawCall{name: "isError", body: callBody(era, "3", "crm_fail", `{"text":"x"}`, ""), fast: true}, "crm_fail")
		add(rawCall{name: "invalid arguments", body: callBody(era, "4", "crm_echo", `{"count":{"a":1}}`, ""), fast: true}, "crm_echo")
		add(rawCall{name: "unknown tool", body: callBody(era, "5", "nope", `{}`, ""), fast: true}, "nope")
		add(rawCall{name: "view: in it", path: "/mcp/namespaces/crm", body: callBody(era, "6", "crm_echo", ok, ""), fast: true}, "crm_echo")
		add(rawCall{name: "view: not in it", path: "/mcp/namespaces/crm", body: callBody(era, "7", "hr_echo", ok, ""), fast: true}, "hr_echo")
		add(rawCall{name: "ToolSet view", path: "/mcp/toolsets/hr/hr-tools", body: callBody(era, "8", "hr_echo", ok, ""), fast: true}, "hr_echo")
		add(rawCall{name: "auth: allowed", target: "authed", body: callBody(era, "9", "crm_echo", ok, ""), fast: true}, "crm_echo")
		add(rawCall{name: "auth: denied", target: "authed", body: callBody(era, "10", "hr_echo", ok, ""), fast: true}, "hr_echo")
		for i := range 3 {
			add(rawCall{name: fmt.Sprintf("limited %d", i), target: "limit", body: callBody(era, "11", "crm_echo", ok, ""), fast: true}, "crm_echo")
		}

		// What the fast path leaves to the SDK.
		add(rawCall{name: "progress token", body: callBody(era, "20", "crm_echo", ok, `,"progressToken":"p"`)}, "crm_echo")
		add(rawCall{name: "task", body: fmt.Sprintf(`{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"crm_echo","arguments":{},"task":{"ttl":1000}%s}}`,
			map[bool]string{true: `,"_meta":` + modernMeta(""), false: ""}[era >= "2026-07-28"])}, "crm_echo")
		add(rawCall{name: "duplicate name", body: strings.Replace(callBody(era, "22", "crm_echo", ok, ""), `"name":"crm_echo"`, `"name":"hr_echo","name":"crm_echo"`, 1)}, "crm_echo")
		add(rawCall{name: "name spelled otherwise", body: strings.Replace(callBody(era, "23", "crm_echo", ok, ""), `"name":`, `"Name":`, 1)}, "crm_echo")
		add(rawCall{name: "name escaped", body: strings.Replace(callBody(era, "24", "crm_echo", ok, ""), `"name":`, `"na\u006de":`, 1)}, "crm_echo")
		add(rawCall{name: "arguments null", body: callBody(era, "25", "crm_echo", "null", "")}, "crm_echo")
		add(rawCall{name: "arguments an array", body: callBody(era, "26", "crm_echo", "[1]", "")}, "crm_echo")
		add(rawCall{name: "no id", body: strings.Replace(callBody(era, "0", "crm_echo", ok, ""), `"id":0,`, "", 1)}, "crm_echo")
		add(rawCall{name: "null id", body: callBody(era, "null", "crm_echo", ok, "")}, "crm_echo")
		add(rawCall{name: "method empty", body: strings.Replace(callBody(era, "27", "crm_echo", ok, ""), `"tools/call"`, `""`, 1)}, "crm_echo")
		add(rawCall{name: "deep arguments", body: callBody(era, "28", "crm_echo", strings.Repeat(`{"a":`, 1200)+"1"+strings.Repeat("}", 1200), "")}, "crm_echo")
		add(rawCall{name: "Accept without a stream", header: map[string]string{"Accept": "application/json"}, body: callBody(era, "29", "crm_echo", ok, "")}, "crm_echo")
		add(rawCall{name: "Content-Type text", header: map[string]string{"Content-Type": "text/plain"}, body: callBody(era, "30", "crm_echo", ok, "")}, "crm_echo")
		add(rawCall{name: "Accept */*", header: map[string]string{"Accept": "*/*"}, body: callBody(era, "31", "crm_echo", ok, ""), fast: true}, "crm_echo")
		if era >= "2026-07-28" {
			add(rawCall{name: "log level", body: callBody(era, "40", "crm_echo", ok, `,"io.modelcontextprotocol/logLevel":"info"`)}, "crm_echo")
			add(rawCall{name: "elicitation", body: strings.Replace(callBody(era, "41", "crm_echo", ok, ""), `clientCapabilities":{}`, `clientCapabilities":{"elicitation":{}}`, 1)}, "crm_echo")
			add(rawCall{name: "roots", body: strings.Replace(callBody(era, "42", "crm_echo", ok, ""), `clientCapabilities":{}`, `clientCapabilities":{"roots":{"listChanged":true}}`, 1), fast: true}, "crm_echo")
			add(rawCall{name: "roots malformed", body: strings.Replace(callBody(era, "43", "crm_echo", ok, ""), `clientCapabilities":{}`, `clientCapabilities":{"roots":{"listChanged":"yes"}}`, 1)}, "crm_echo")
			add(rawCall{name: "no capabilities", body: strings.Replace(callBody(era, "44", "crm_echo", ok, ""), `,"io.modelcontextprotocol/clientCapabilities":{}`, "", 1)}, "crm_echo")
			add(rawCall{name: "no _meta", body: strings.Replace(callBody(era, "45", "crm_echo", ok, ""), `,"_meta":`+modernMeta(""), "", 1)}, "crm_echo")
			add(rawCall{name: "_meta of another version", body: strings.Replace(callBody(era, "46", "crm_echo", ok, ""), `protocolVersion":"2026-07-28"`, `protocolVersion":"2026-08-01"`, 1)}, "crm_echo")
			add(rawCall{name: "no Mcp-Name", header: map[string]string{"Mcp-Name": ""}, body: callBody(era, "47", "crm_echo", ok, "")}, "crm_echo")
			add(rawCall{name: "another Mcp-Name", header: map[string]string{"Mcp-Name": "hr_echo"}, body: callBody(era, "48", "crm_echo", ok, "")}, "crm_echo")
			add(rawCall{name: "clientInfo malformed", body: strings.Replace(callBody(era, "49", "crm_echo", ok, ""), `"name":"raw"`, `"name":1`, 1)}, "crm_echo")
		} else {
			add(rawCall{name: "_meta protocol version", body: callBody(era, "50", "crm_echo", ok, `,"io.modelcontextprotocol/protocolVersion":"`+era+`"`)}, "crm_echo")
		}
	}
	h := eraHeader("2025-11-25", "")
	delete(h, "Mcp-Protocol-Version")
	cs = append(cs,
		rawCall{name: "no protocol version", target: "plain", path: "/mcp", header: h, body: callBody("2025-11-25", "60", "crm_echo", `{}`, "")},
		rawCall{name: "unsupported protocol version", target: "plain", path: "/mcp", header: eraHeader("2024-01-01", ""), body: callBody("2025-11-25", "61", "crm_echo", `{}`, "")},
		rawCall{name: "ping", target: "plain", path: "/mcp", header: eraHeader("2025-11-25", ""), body: `{"jsonrpc":"2.0","id":62,"method":"ping"}`},
	)
	return cs
}

func (w *fastWorld) do(t testing.TB, fx *fastFixture, c rawCall) rawAnswer {
	t.Helper()
	base := map[string]string{"plain": w.plain, "authed": w.authed, "limit": w.limit}[c.target]
	req, err := http.NewRequestWithContext(bounded(t), http.MethodPost, base+c.path, strings.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range c.header {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	if c.target == "authed" {
		req.Header.Set("Authorization", "Bearer "+fx.bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return rawAnswer{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), CacheControl: resp.Header.Get("Cache-Control"), Body: string(b)}
}

func TestFastCallAnswersAsTheSDK(t *testing.T) {
	fx := newFastFixture(t)
	sdk, fast := newFastWorld(t, fx, false), newFastWorld(t, fx, true)
	for _, c := range fastCalls(eras) {
		before := fastTotal(fast)
		want := sdk.do(t, fx, c)
		got := fast.do(t, fx, c)
		took := fastTotal(fast) > before
		if got != want {
			t.Errorf("%s: the fast path answered\n%+v\nthe SDK\n%+v", c.name, got, want)
		}
		if took != c.fast {
			t.Errorf("%s: the fast path took it: %v, want %v (answer %+v)", c.name, took, c.fast, got)
		}
	}
	for _, g := range sdk.gateways {
		if n := gateway.FastCalls(g); n != 0 {
			t.Errorf("the fast path answered %d calls where it is off", n)
		}
	}
}

func fastTotal(w *fastWorld) int64 {
	var n int64
	for _, g := range w.gateways {
		n += gateway.FastCalls(g)
	}
	return n
}

// recordingTransport keeps the tools/call requests a client sends.
type recordingTransport struct {
	mu   sync.Mutex
	reqs []rawCall
}

func (rt *recordingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		if bytes.Contains(b, []byte(`"tools/call"`)) {
			h := map[string]string{}
			for k := range r.Header {
				h[k] = r.Header.Get(k)
			}
			rt.mu.Lock()
			rt.reqs = append(rt.reqs, rawCall{header: h, body: string(b)})
			rt.mu.Unlock()
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// The Go SDK client's own requests, in both eras, take the fast path and
// are answered alike; and the client reads the answers.
func TestFastCallServesTheGoSDKClient(t *testing.T) {
	fx := newFastFixture(t)
	sdk, fast := newFastWorld(t, fx, false), newFastWorld(t, fx, true)
	for _, era := range eras {
		rt := &recordingTransport{}
		cs := connect(t, fast.plain+"/mcp", era, nil, &http.Client{Transport: rt})
		res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "crm_echo", Arguments: map[string]any{"text": "ab", "count": 2}})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", era, err, res)
		}
		var out struct{ Echo string }
		if b, _ := json.Marshal(res.StructuredContent); json.Unmarshal(b, &out) != nil || out.Echo != "abab" {
			t.Errorf("%s: structuredContent %s", era, b)
		}
		if _, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "nope", Arguments: map[string]any{}}); err == nil || !strings.Contains(err.Error(), `unknown tool "nope"`) {
			t.Errorf("%s: calling an unknown tool: %v", era, err)
		}
		if len(rt.reqs) != 2 {
			t.Fatalf("%s: recorded %d calls", era, len(rt.reqs))
		}
		before := fastTotal(fast)
		for i, c := range rt.reqs {
			c.name, c.target, c.path = fmt.Sprintf("%s Go SDK call %d", era, i), "plain", "/mcp"
			want, got := sdk.do(t, fx, c), fast.do(t, fx, c)
			if got != want {
				t.Errorf("%s: the fast path answered\n%+v\nthe SDK\n%+v", c.name, got, want)
			}
		}
		if n := fastTotal(fast) - before; n != 2 {
			t.Errorf("%s: the fast path took %d of the Go SDK client's 2 calls", era, n)
		}
	}
}

// FuzzFastCall sends random bodies, with the header of either era, to a
// gateway with the fast path and one without, and requires the same
// answer. The seeds are the cases of TestFastCallAnswersAsTheSDK:
//
//	go test -run '^$' -fuzz FuzzFastCall -fuzztime 60s ./internal/gateway/
func FuzzFastCall(f *testing.F) {
	for _, c := range fastCalls(eras) {
		if c.target == "plain" && c.path == "/mcp" {
			f.Add([]byte(c.body), c.header["Mcp-Protocol-Version"] >= "2026-07-28")
		}
	}
	fx := newFastFixture(f)
	sdk, fast := newFastWorld(f, fx, false), newFastWorld(f, fx, true)
	f.Fuzz(func(t *testing.T, body []byte, modern bool) {
		era := "2025-11-25"
		if modern {
			era = "2026-07-28"
		}
		c := rawCall{name: "fuzz", target: "plain", path: "/mcp", header: eraHeader(era, "crm_echo"), body: string(body)}
		if want, got := sdk.do(t, fx, c), fast.do(t, fx, c); got != want {
			t.Errorf("body %q: the fast path answered\n%+v\nthe SDK\n%+v", body, got, want)
		}
	})
}

// Calls that the fast path answers at once each get their own answer: the
// buffers it pools (answerBuffer) are never shared by two calls, nor
// reused while an answer is written. Results of many sizes interleave,
// some past what the pool keeps.
func TestFastCallsAtOnceEachGetTheirOwnAnswer(t *testing.T) {
	fx := newFastFixture(t)
	w := newFastWorld(t, fx, true)
	before := fastTotal(w)
	const callers, calls = 8, 25
	errs := make(chan error, callers*calls)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range calls {
				era := eras[(i+j)%len(eras)]
				text := fmt.Sprintf("[%d-%d]", i, j) + strings.Repeat("x", (i*j*4099)%(100<<10))
				req, err := http.NewRequest(http.MethodPost, w.plain+"/mcp", strings.NewReader(callBody(era, strconv.Itoa(i*1000+j), "crm_echo", fmt.Sprintf(`{"text":%q,"count":1}`, text), "")))
				if err != nil {
					errs <- err
					return
				}
				for k, v := range eraHeader(era, "crm_echo") {
					req.Header.Set(k, v)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					errs <- err
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				want := fmt.Sprintf(`"id":%d,`, i*1000+j)
				if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(b), want) ||
					strings.Count(string(b), `"echo":"`+text+`"`) != 1 || !strings.HasSuffix(string(b), "}\n\n") {
					errs <- fmt.Errorf("call %d-%d (%s): %d %.300s: %w", i, j, era, resp.StatusCode, b, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := fastTotal(w) - before; n != callers*calls {
		t.Errorf("the fast path answered %d of %d calls", n, callers*calls)
	}
}

// scribblingWriter records an answer, and before it copies each write,
// writes over the buffer the next fast call would take from the pool.
type scribblingWriter struct{ *httptest.ResponseRecorder }

func (w scribblingWriter) Write(p []byte) (int, error) {
	gateway.ScribbleOnAPooledAnswer()
	return w.ResponseRecorder.Write(p)
}

// The fast path's pooled buffer is not back in the pool while its answer
// is written: one that were would be written over by the next call's use
// of it (here, on the same goroutine, while the answer is copied).
func TestFastCallWritesItsAnswerBeforeItsBufferIsReused(t *testing.T) {
	fx := newFastFixture(t)
	w := newFastWorld(t, fx, true)
	g := w.gateways[0] // plain
	for _, era := range eras {
		for _, size := range []int{1, 4 << 10, 40 << 10} {
			before := gateway.FastCalls(g)
			text := strings.Repeat("y", size)
			req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(callBody(era, "1", "crm_echo", `{"text":"`+text+`","count":1}`, "")))
			for k, v := range eraHeader(era, "crm_echo") {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			g.ServeHTTP(scribblingWriter{rec}, req)
			body := rec.Body.String()
			if gateway.FastCalls(g) != before+1 {
				t.Fatalf("%s, %d bytes: not a fast call: %d %.300s", era, size, rec.Code, body)
			}
			if rec.Code != http.StatusOK || strings.Contains(body, "#") || !strings.Contains(body, `"echo":"`+text+`"`) {
				t.Errorf("%s, %d bytes: the answer was written over: %d %.300s", era, size, rec.Code, body)
			}
		}
	}
}
