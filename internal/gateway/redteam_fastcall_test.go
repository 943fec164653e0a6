package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// Attacks on the fast path of tools/call (fastcall.go) by a
// hostile caller and a hostile workload. Each compares the fast path with
// the SDK's (gateway.SetFastCall), or holds it to a bound.

// rtGateway is one gateway of a pair, with its audit log.
type rtGateway struct {
	g     *gateway.Gateway
	url   string
	audit *syncBuffer
}

// rtPair returns two gateways over r serving tbl with opts: one with the
// fast path off, one with it on.
func rtPair(t *testing.T, r *routes, tbl *spec.Table, opts gateway.Options) (sdk, fast *rtGateway) {
	t.Helper()
	var pair [2]*rtGateway
	for i := range pair {
		o := opts
		buf := &syncBuffer{}
		o.AuditLog = buf
		g, url := newGateway(t, r, o)
		gateway.SetFastCall(g, i == 1)
		if err := g.SetTable(tbl); err != nil {
			t.Fatal(err)
		}
		pair[i] = &rtGateway{g: g, url: url, audit: buf}
	}
	return pair[0], pair[1]
}

// auditOf closes g, which writes out its audit lines, and returns them.
func (g *rtGateway) auditOf(t *testing.T) []auditLine {
	t.Helper()
	_ = g.g.Close()
	return auditLines(t, g.audit.String())
}

// rtPost posts body to url with header, and gives up after timeout.
func rtPost(t *testing.T, url string, header map[string]string, body string, timeout time.Duration) (rawAnswer, time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return rawAnswer{}, time.Since(start), err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return rawAnswer{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), CacheControl: resp.Header.Get("Cache-Control"), Body: string(b)}, time.Since(start), err
}

// rawWorkload serves the tool "raw" of ToolSet apps/raw, whose reply to
// the arguments {"case":n} is replies[n], byte for byte.
func rawWorkload(t *testing.T, r *routes, replies []string) []spec.TableTool {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var in struct{ Case int }
		if json.NewDecoder(req.Body).Decode(&in) != nil || in.Case < 0 || in.Case >= len(replies) {
			http.Error(w, "no such case", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, replies[in.Case])
	}))
	t.Cleanup(srv.Close)
	r.set("raw.apps.svc.cluster.local:8080", srv.Listener.Addr().String())
	return []spec.TableTool{{
		Name: "raw", SourceName: "raw", InputSchema: json.RawMessage(`{"type":"object"}`),
		ToolSet:   spec.ObjectReference{Namespace: "apps", Name: "raw"},
		Endpoints: &spec.Endpoints{Invoke: "http://raw.apps.svc.cluster.local:8080" + spec.InvokePrefix + "raw"},
	}}
}

// manyMembers is prefix, then distinct members "k0":0,"k1":0,… until the
// text is size bytes long, then suffix.
func manyMembers(prefix string, size int, suffix string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for i := 0; b.Len() < size; i++ {
		b.WriteString(`,"k` + strconv.Itoa(i) + `":0`)
	}
	b.WriteString(suffix)
	return b.String()
}

// TestRedteamManyMembersCostWhatTheSDKCosts: an object of many distinct
// members (in the request's envelope, in a tools/call's params, or in a
// workload's result) costs the gateway about what the same bytes cost in
// one string. It failed before its fix: the fast path's objectMembers
// compared each key of a tools/call's params with every key before it, and
// params of 256 KiB took seconds of CPU (a hundred times the SDK's
// decoder; 1 MiB took a minute and a half). The plain envelope and result
// readers the fast path had for a while (envelope.go) did the same, at
// every MCP POST and every workload's result; the envelope and result
// cases guard against their return.
func TestRedteamManyMembersCostWhatTheSDKCosts(t *testing.T) {
	const size = 256 << 10
	fx := newFastFixture(t)
	r := new(routes).add(fx.crm)
	text := strings.Repeat("a", size)
	replies := []string{
		`{"content":[{"type":"text","text":"` + text + `"}]}`,
		manyMembers(`{"content":[{"type":"text","text":"x"}]`, size, `}`),
		manyMembers(`{"content":[{"type":"text","text":"x"`, size, `}]}`),
	}
	tbl := table(fx.crm.tableTools(), rawWorkload(t, r, replies))
	_, fast := rtPair(t, r, tbl, gateway.Options{})
	h := eraHeader("2025-11-25", "")
	post := func(body string, timeout time.Duration) (rawAnswer, time.Duration, error) {
		return rtPost(t, fast.url+"/mcp", h, body, timeout)
	}
	// The same bytes, in one string: of an argument, and of a result;
	// the quickest of a few tries of each, the machine being shared.
	var baseline time.Duration
	for _, body := range []string{
		callBody("2025-11-25", "1", "crm_echo", `{"text":"`+text+`"}`, ""),
		callBody("2025-11-25", "1", "raw", `{"case":0}`, ""),
	} {
		quickest := time.Minute
		for range 5 {
			a, took, err := post(body, time.Minute)
			if err != nil || a.Status != http.StatusOK {
				t.Fatalf("baseline: %v %d %.200s", err, a.Status, a.Body)
			}
			quickest = min(quickest, took)
		}
		baseline = max(baseline, quickest)
	}
	limit := time.Second + 10*baseline
	for name, body := range map[string]string{
		"envelope": manyMembers(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"crm_echo","arguments":{"text":"x"}}`, size, `}`),
		"params":   manyMembers(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"crm_echo","arguments":{"text":"x"}`, size, `}}`),
		"result":   callBody("2025-11-25", "1", "raw", `{"case":1}`, ""),
		"block":    callBody("2025-11-25", "1", "raw", `{"case":2}`, ""),
	} {
		a, took, err := post(body, limit)
		if err != nil {
			t.Errorf("%s of many members: no answer within %s (10 times the %s of the same bytes in a string, and a second): %v", name, limit, baseline, err)
			continue
		}
		if a.Status != http.StatusOK {
			t.Errorf("%s of many members: %d %.300s", name, a.Status, a.Body)
		}
		t.Logf("%s of many members: answered in %s (the same bytes in a string: %s)", name, took, baseline)
	}
}

// TestRedteamEmptyNameWithoutMcpNameIsRefusedAsByTheSDK: a 2026-07-28
// tools/call of the name "" without an Mcp-Name header is refused by the
// SDK's standard headers' check (-32020, no call, no audit line). It failed
// before its fix: the fast path compared the absent header, "", with the
// name, found them equal, and answered and audited a call of "".
func TestRedteamEmptyNameWithoutMcpNameIsRefusedAsByTheSDK(t *testing.T) {
	fx := newFastFixture(t)
	r := new(routes).add(fx.crm)
	sdk, fast := rtPair(t, r, table(fx.crm.tableTools()), gateway.Options{})
	h := eraHeader("2026-07-28", "")
	body := callBody("2026-07-28", "1", "", `{}`, "")
	want, _, err1 := rtPost(t, sdk.url+"/mcp", h, body, time.Minute)
	got, _, err2 := rtPost(t, fast.url+"/mcp", h, body, time.Minute)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if got != want {
		t.Errorf("the fast path answered\n%+v\nthe SDK\n%+v", got, want)
	}
	if n := gateway.FastCalls(fast.g); n != 0 {
		t.Errorf("the fast path took %d calls", n)
	}
	if a, b := sdk.auditOf(t), fast.auditOf(t); len(a) != len(b) {
		t.Errorf("audit lines: the fast path wrote %d (%+v), the SDK %d", len(b), b, len(a))
	}
}

// hostileCalls are requests spelled to make the fast path
// read otherwise than the SDK: ids, escapes, repeats, trailing data,
// nesting at the bounds, encodings, headers and _meta of each era.
func hostileCalls() []rawCall {
	var cs []rawCall
	ok := `{"text":"a<b>","count":1}`
	for _, era := range eras {
		modern := era >= "2026-07-28"
		meta := ""
		if modern {
			meta = `,"_meta":` + modernMeta("")
		}
		add := func(name string, hdr map[string]string, body string) {
			h := eraHeader(era, "crm_echo")
			for k, v := range hdr {
				h[k] = v
			}
			cs = append(cs, rawCall{name: era + " " + name, target: "plain", path: "/mcp", header: h, body: body})
		}
		env := func(id, params string) string {
			return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":` + params + `}`
		}
		p := func(name, args string) string { return `{"name":"` + name + `","arguments":` + args + meta + `}` }
		call := env("1", p("crm_echo", ok))
		swap := func(old, new string) string { return strings.Replace(call, old, new, 1) }
		for _, id := range []string{"0", "-0", "-0.0", "1e2", "1E2", "1.0", "0.1", "-1", "123456789012345", "1234567890123456",
			"99999999999999999999999", "1e400", "00", "+1", "true", "{}", "[]", `""`, `"` + strings.Repeat("x", 5000) + `"`, `"\u0031"`} {
			add("id "+id[:min(len(id), 20)], nil, env(id, p("crm_echo", ok)))
		}
		for _, params := range []string{"null", `"x"`, "1", "[]", `["crm_echo"]`, "{}"} {
			add("params "+params, nil, env("1", params))
		}
		add("BOM", nil, "\xef\xbb\xbf"+call)
		add("leading space", nil, " \r\n\t"+call)
		add("trailing space", nil, call+" \n")
		add("trailing garbage", nil, call+" x")
		add("a second message after", nil, call+env("2", p("hr_echo", ok)))
		add("trailing NUL", nil, call+"\x00")
		add("escaped method key", nil, swap(`"method"`, `"\u006dethod"`))
		add("escaped version", nil, swap(`"2.0"`, `"2\u002e0"`))
		add("escaped method", nil, swap(`"tools/call"`, `"tools\/call"`))
		add("escaped name", map[string]string{"Mcp-Name": "crm_echo"}, swap(`"crm_echo"`, `"crm\u005fecho"`))
		add("escaped name key", nil, swap(`"name"`, `"n\u0061me"`))
		add("Method too", nil, swap(`"method":"tools/call"`, `"method":"tools/call","Method":"tools/list"`))
		add("method twice", nil, swap(`"method":"tools/call"`, `"method":"tools/list","method":"tools/call"`))
		add("params twice", nil, swap(`"params":`, `"params":{"name":"hr_echo","arguments":{}},"params":`))
		add("id twice", nil, swap(`"id":1`, `"id":1,"id":2`))
		add("jsonrpc twice", nil, swap(`"jsonrpc":"2.0"`, `"jsonrpc":"1.0","jsonrpc":"2.0"`))
		add("jsonrpc a number", nil, swap(`"2.0"`, `2.0`))
		add("jsonrpc missing", nil, swap(`"jsonrpc":"2.0",`, ``))
		add("a result too", nil, swap(`"id":1`, `"id":1,"result":{}`))
		add("invalid UTF-8", nil, env("1", p("crm_echo", "{\"text\":\"\xff\xfe\"}")))
		add("NUL escaped", nil, env("1", p("crm_echo", `{"text":"a\u0000b"}`)))
		add("NUL raw", nil, env("1", p("crm_echo", "{\"text\":\"a\x00b\"}")))
		add("lone surrogate", nil, env("1", p("crm_echo", `{"text":"\ud800"}`)))
		add("argument twice", nil, env("1", p("crm_echo", `{"text":"a","text":"b"}`)))
		add("argument Text", nil, env("1", p("crm_echo", `{"Text":"a"}`)))
		add("count 2e0", nil, env("1", p("crm_echo", `{"text":"a","count":2e0}`)))
		add("big beyond float", nil, env("1", p("crm_echo", `{"text":"a","big":9007199254740993}`)))
		for _, d := range []int{62, 63, 64, 65, 997, 998, 999, 1000} {
			add(fmt.Sprintf("nested %d", d), nil, env("1", p("crm_echo", `{"text":"a","x":`+strings.Repeat("[", d)+strings.Repeat("]", d)+`}`)))
		}
		add("long argument", nil, env("1", p("crm_echo", `{"text":"`+strings.Repeat("a", 1000_000)+`"}`)))
		add("past the body bound", nil, env("1", p("crm_echo", `{"text":"`+strings.Repeat("a", 1<<20)+`"}`)))
		add("non-ASCII name", map[string]string{"Mcp-Name": "crm_échо"}, env("1", p("crm_échо", ok)))
		add("Content-Type with charset", map[string]string{"Content-Type": "application/json; charset=utf-8"}, call)
		add("Content-Type in capitals", map[string]string{"Content-Type": "Application/JSON"}, call)
		add("Content-Type malformed", map[string]string{"Content-Type": "application/json;;"}, call)
		add("Accept q=0", map[string]string{"Accept": "application/json;q=0, text/event-stream;q=0"}, call)
		add("Accept wildcards", map[string]string{"Accept": "application/*, text/*"}, call)
		add("Mcp-Session-Id", map[string]string{"Mcp-Session-Id": "abc"}, call)
		add("Last-Event-ID", map[string]string{"Last-Event-ID": "x"}, call)
		add("Mcp-Method in capitals", map[string]string{"Mcp-Method": "TOOLS/CALL"}, call)
		add("protocol version of the future", map[string]string{"Mcp-Protocol-Version": "2026-08-01"}, call)
		if modern {
			m := func(meta string) string {
				return env("1", `{"name":"crm_echo","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",`+meta+`}}`)
			}
			caps := `"io.modelcontextprotocol/clientCapabilities":`
			add("no clientInfo", nil, m(caps+`{}`))
			add("clientInfo {}", nil, m(caps+`{},"io.modelcontextprotocol/clientInfo":{}`))
			add("clientInfo null", nil, m(caps+`{},"io.modelcontextprotocol/clientInfo":null`))
			add("clientInfo of invalid UTF-8", nil, m(caps+"{},\"io.modelcontextprotocol/clientInfo\":{\"name\":\"\xff\"}"))
			add("capabilities null", nil, m(caps+`null`))
			add("experimental capability", nil, m(caps+`{"experimental":{"a":1}}`))
			add("extension", nil, m(caps+`{"extensions":{"a":1}}`))
			add("roots {}", nil, m(caps+`{"roots":{}}`))
			add("protocol version twice", nil, strings.Replace(m(caps+`{}`), `"io.modelcontextprotocol/protocolVersion"`, `"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/protocolVersion"`, 1))
			add("elicitation, then none", nil, m(caps+`{"elicitation":{}},`+caps+`{}`))
			add("none, then elicitation", nil, m(caps+`{},`+caps+`{"elicitation":{}}`))
			add("escaped log level", nil, m(caps+`{},"io.modelcontextprotocol/log\u004cevel":"debug"`))
			add("escaped progress token", nil, m(caps+`{},"progress\u0054oken":1`))
			add("task of _meta", nil, m(caps+`{},"io.modelcontextprotocol/related-task":{"taskId":"x"}`))
			add("escaped task", nil, strings.Replace(m(caps+`{}`), `"arguments":{}`, `"arguments":{},"t\u0061sk":{"ttl":1000}`, 1))
		} else {
			add("_meta {}", nil, env("1", `{"name":"crm_echo","arguments":{},"_meta":{}}`))
			add("_meta null", nil, env("1", `{"name":"crm_echo","arguments":{},"_meta":null}`))
			add("traceparent a number", nil, env("1", `{"name":"crm_echo","arguments":{},"_meta":{"traceparent":5}}`))
			add("escaped progress token", nil, env("1", `{"name":"crm_echo","arguments":{},"_meta":{"progress\u0054oken":1}}`))
		}
	}
	return cs
}

// TestRedteamHostileRequestsAnswerAsTheSDK: whatever the spelling, the fast
// path answers as the SDK does, or leaves the request to it.
func TestRedteamHostileRequestsAnswerAsTheSDK(t *testing.T) {
	fx := newFastFixture(t)
	sdk, fast := newFastWorld(t, fx, false), newFastWorld(t, fx, true)
	took := 0
	for _, c := range hostileCalls() {
		before := fastTotal(fast)
		want, got := sdk.do(t, fx, c), fast.do(t, fx, c)
		if fastTotal(fast) > before {
			took++
		}
		if got != want {
			t.Errorf("%s: the fast path answered\n%.600q\nthe SDK\n%.600q", c.name, fmt.Sprintf("%+v", got), fmt.Sprintf("%+v", want))
		}
	}
	if took == 0 {
		t.Error("the fast path took none of the requests")
	}
}

// TestRedteamHostileRepliesAnswerAsTheSDK: whatever a workload replies,
// the fast path passes it on as the SDK does, in both eras.
func TestRedteamHostileRepliesAnswerAsTheSDK(t *testing.T) {
	text := `{"type":"text","text":"x"}`
	replies := []string{
		`{"content":[{"type":"text","text":"<b>&amp;\u2028"}]}`,
		`{"content":[` + text + `],"structuredContent":` + strings.Repeat("[", 998) + strings.Repeat("]", 998) + `}`,
		`{"content":[` + text + `],"structuredContent":{"a":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}}`,
		"{\"content\":[{\"type\":\"text\",\"text\":\"\xff\xfe\"}]}",
		`{"content":[` + text + `],"structuredContent":{"n":1e400,"m":123456789012345678901234567890,"a":1,"a":2}}`,
		`{"content":[` + text + `],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"not the gateway","version":"1"}}}`,
		`{"content":[` + text + `],"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create","params":{"message":"hi","requestedSchema":{"type":"object"}}}}}`,
		`{"content":[],"resultType":"input_required"}`,
		`{"content":[` + text + `],"resultType":"complete"}`,
		`{"content":[` + text + `],"resultType":"other"}`,
		`{"content":[{"type":"image","data":"AAAA","mimeType":"image/png"}]}`,
		`{"content":[{"type":"bogus"}]}`,
		`{"content":[]}`,
		`{"isError":true}`,
		`{"content":null}`,
		`not JSON`,
		`{"content":[` + text + `]} trailing`,
		`{"content":[` + text + `],"content":[{"type":"text","text":"again"}]}`,
		`{"content":[{"type":"text","text":"x","type":"image"}]}`,
		`{"Content":[` + text + `]}`,
		`{"content":[` + text + `],"task":{"taskId":"t"}}`,
		`{"content":[` + text + `],"_meta":{"progressToken":1}}`,
	}
	r := new(routes)
	sdk, fast := rtPair(t, r, table(rawWorkload(t, r, replies)), gateway.Options{})
	for _, era := range eras {
		for n := range replies {
			h, body := eraHeader(era, "raw"), callBody(era, "1", "raw", fmt.Sprintf(`{"case":%d}`, n), "")
			want, _, err1 := rtPost(t, sdk.url+"/mcp", h, body, time.Minute)
			got, _, err2 := rtPost(t, fast.url+"/mcp", h, body, time.Minute)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if got != want {
				t.Errorf("%s reply %.80q: the fast path answered\n%.600q\nthe SDK\n%.600q", era, replies[n], got.Body, want.Body)
			}
		}
	}
	if n := gateway.FastCalls(fast.g); n != int64(2*len(replies)) {
		t.Errorf("the fast path took %d of %d calls", n, 2*len(replies))
	}
}

// TestRedteamGuardsHoldOnTheFastPath: what the SDK's path refuses before a
// call (a foreign Host on loopback, a missing or bad bearer token, a tool
// outside the view, one the caller may not call), the fast path refuses
// alike, and every call is audited once, with the same tool, caller and
// decision.
func TestRedteamGuardsHoldOnTheFastPath(t *testing.T) {
	fx := newFastFixture(t)
	r := new(routes).add(fx.crm, fx.hr)
	tbl := table(fx.crm.tableTools(), fx.hr.tableTools())
	type guard struct {
		name, path, host, bearer, tool string
	}
	guards := []guard{
		{name: "allowed", path: "/mcp", tool: "crm_echo"},
		{name: "foreign Host on loopback", path: "/mcp", host: "rebound.example", tool: "crm_echo"},
		{name: "foreign Host with a port", path: "/mcp", host: "rebound.example:80", tool: "crm_echo"},
		{name: "loopback Host", path: "/mcp", host: "localhost:1", tool: "crm_echo"},
		{name: "outside the view", path: "/mcp/namespaces/crm", tool: "hr_echo"},
		{name: "inside the view", path: "/mcp/namespaces/crm", tool: "crm_echo"},
		{name: "outside the ToolSet view", path: "/mcp/toolsets/crm/crm-tools", tool: "hr_echo"},
		{name: "unknown tool", path: "/mcp", tool: "nope"},
	}
	authGuards := []guard{
		{name: "auth: no token", path: "/mcp", tool: "crm_echo"},
		{name: "auth: a bad token", path: "/mcp", bearer: "not-a-token", tool: "crm_echo"},
		{name: "auth: allowed", path: "/mcp", bearer: fx.bearer, tool: "crm_echo"},
		{name: "auth: not permitted", path: "/mcp", bearer: fx.bearer, tool: "hr_echo"},
		{name: "auth: foreign Host", path: "/mcp", host: "rebound.example", bearer: fx.bearer, tool: "crm_echo"},
	}
	for _, tc := range []struct {
		opts   gateway.Options
		guards []guard
	}{
		{gateway.Options{}, guards},
		{gateway.Options{AllowAnyHostOnLoopback: true}, guards[:3]},
		{gateway.Options{Auth: &gateway.KubernetesAuth{Client: fx.f}}, authGuards},
	} {
		sdk, fast := rtPair(t, r, tbl, tc.opts)
		for _, era := range eras {
			for _, gd := range tc.guards {
				var answers [2]rawAnswer
				for i, g := range []*rtGateway{sdk, fast} {
					req, err := http.NewRequestWithContext(bounded(t), http.MethodPost, g.url+gd.path, strings.NewReader(callBody(era, "1", gd.tool, `{"text":"a"}`, "")))
					if err != nil {
						t.Fatal(err)
					}
					for k, v := range eraHeader(era, gd.tool) {
						req.Header.Set(k, v)
					}
					if gd.host != "" {
						req.Host = gd.host
					}
					if gd.bearer != "" {
						req.Header.Set("Authorization", "Bearer "+gd.bearer)
					}
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					answers[i] = rawAnswer{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Body: string(b)}
				}
				if answers[0] != answers[1] {
					t.Errorf("%s %s (AllowAnyHostOnLoopback %v): the fast path answered\n%+v\nthe SDK\n%+v", era, gd.name, tc.opts.AllowAnyHostOnLoopback, answers[1], answers[0])
				}
			}
		}
		a, b := sdk.auditOf(t), fast.auditOf(t)
		if len(a) != len(b) {
			t.Fatalf("audit lines: the fast path wrote %d, the SDK %d", len(b), len(a))
		}
		for i := range a {
			user := func(l auditLine) string {
				if l.Caller == nil {
					return ""
				}
				return l.Caller.User
			}
			if a[i].Tool != b[i].Tool || user(a[i]) != user(b[i]) || a[i].Decision != b[i].Decision || a[i].Reason != b[i].Reason || a[i].View != b[i].View || a[i].Outcome != b[i].Outcome {
				t.Errorf("audit line %d: the fast path's %+v, the SDK's %+v", i, b[i], a[i])
			}
		}
		if gateway.FastCalls(fast.g) == 0 {
			t.Error("the fast path took none of the calls")
		}
	}
}

// TestRedteamAClientThatLeavesEndsItsCallAsWithTheSDK: a 2026-07-28 call
// ends at the workload when its client goes away; a 2025 one runs on to
// the call timeout, in the SDK's session as on the fast path; no goroutine
// is left behind either way.
func TestRedteamAClientThatLeavesEndsItsCallAsWithTheSDK(t *testing.T) {
	const timeout = 4 * time.Second
	started, ended := make(chan struct{}, 1), make(chan time.Time, 1)
	wait := toolkit.MustNew("wait", "Waits for its call to end", func(ctx context.Context, _ struct{}) (string, error) {
		started <- struct{}{}
		<-ctx.Done()
		ended <- time.Now()
		return "", ctx.Err()
	})
	wl := newWorkload(t, "apps", "waiter", "w_", wait)
	sdk, fast := rtPair(t, new(routes).add(wl), table(wl.tableTools()), gateway.Options{CallTimeout: timeout})
	base := runtime.NumGoroutine()
	for _, era := range eras {
		var after [2]time.Duration
		for i, g := range []*rtGateway{sdk, fast} {
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.url+"/mcp", strings.NewReader(callBody(era, "1", "w_wait", "{}", "")))
			for k, v := range eraHeader(era, "w_wait") {
				req.Header.Set(k, v)
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}()
			select {
			case <-started:
			case <-time.After(time.Minute):
				t.Fatal("the call did not reach the workload")
			}
			left := time.Now()
			cancel()
			<-done
			select {
			case end := <-ended:
				after[i] = end.Sub(left)
			case <-time.After(time.Minute):
				t.Fatal("the workload's call did not end")
			}
		}
		if n := gateway.FastCalls(fast.g); n == 0 {
			t.Fatalf("%s: the fast path took no call", era)
		}
		sdkEarly, fastEarly := after[0] < timeout/2, after[1] < timeout/2
		if sdkEarly != fastEarly || sdkEarly != (era >= "2026-07-28") {
			t.Errorf("%s: the workload's call ended %s after its client left through the SDK, %s through the fast path (call timeout %s)", era, after[0], after[1], timeout)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for runtime.NumGoroutine() > base+2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base+2 {
		t.Errorf("%d goroutines left, %d before the calls", n, base)
	}
}
