package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// Red team of 8dd9d05 (fastanswer.go): the fast path writes a text
// result's answer itself (appendAnswer) instead of the SDK's encoder. Each
// test here sends a hostile workload's reply, or a caller's id, to a
// gateway with the fast path and to one without, and fails when the two
// answers differ (status, Content-Type, Cache-Control, body byte for
// byte), when the fast path's answer is not one SSE event of valid JSON
// where the SDK's is, or when the fast path did not take the call.

// rtAnswerText is a text block of the JSON string lit (quotes included).
func rtAnswerText(lit string) string { return `{"type":"text","text":` + lit + `}` }

// rtAnswerReplies are the workload's replies: the shapes appendAnswer
// writes (text blocks only, structuredContent raw, isError, _meta, resultType)
// and the edges of its checks (plainJSONString, compactAsIs).
func rtAnswerReplies() []string {
	x := rtAnswerText(`"x"`)
	var rs []string
	add := func(r ...string) { rs = append(rs, r...) }

	// Texts: escapes, HTML characters, separators, 0xE2 in other
	// characters, DEL, invalid UTF-8 and lone surrogates.
	for _, lit := range []string{
		`"hello"`, `""`, `" "`, `"a b\tc"`,
		`"\u003c\u003e\u0026"`, `"<b>&amp;</b>"`, `"\/"`, `"a\\b"`, `"q\"q"`,
		`"\u2028\u2029"`, "\"raw \u2028 and \u2029\"", "\"euro \u20ac, quote \u201c\u201d, arrow \u2192\"",
		"\"\u00e9\u4e16\U0001F600\"", `"\ud83d\ude00"`, `"\u00e9"`,
		"\"del \x7f\"", `"del \u007f"`, `"nul \u0000 bs \b ff \f"`, `"\n\r\t"`,
		"\"bad \xff\xfe\"", "\"truncated \xe2\x80\"", `"lone \ud800"`, `"lone \udc00 low"`,
		"\"\xed\xa0\x80\"", "\"\xc0\xaf\"", "\"\xf4\x90\x80\x80\"",
		`"` + strings.Repeat("a", 70<<10) + `"`,
		`"` + strings.Repeat(`\u003c`, 12<<10) + `"`,
		`"` + strings.Repeat("\u2028", 30<<10) + `"`,
		`"event: message\n\ndata: {}"`,
		`"data: x\r\ndata: y"`,
	} {
		add(`{"content":[` + rtAnswerText(lit) + `]}`)
		add(`{"content":[` + rtAnswerText(lit) + `],"isError":true}`)
	}
	add(`{"content":[` + x + `,` + rtAnswerText(`"<"`) + `,` + rtAnswerText(`""`) + `]}`)
	add(`{"content":[]}`, `{"content":[],"isError":false}`, `{"content":[],"structuredContent":{"a":1}}`)
	add(`{ "content" : [ { "type" : "text" , "text" : "spaced" } ] , "isError" : false }`)
	add(`{"content":[{"text":"order","type":"text"}]}`)

	// structuredContent: what compactAsIs passes through, and its edges.
	for _, sc := range []string{
		`{"a":1}`, `{}`, `[]`, `null`, `0`, `-0`, `1E5`, `1e-7`, `-1.5e+300`, `123456789012345678901234567890`,
		`0.1000000000000000055511151231257827`, `true`, `false`, `"s"`, `""`,
		`{"a":"\u003c"}`, `{"a":"\u003e\u0026"}`, `{"a":"\/"}`, `{"a":"\u2028"}`, `{"a":"\u2029"}`,
		`{"a":"<"}`, `{"a":">"}`, `{"a":"&"}`, "{\"a\":\"\u2028\"}", "{\"a\":\"\u2029\"}", "{\"a\":\"\u20ac\"}",
		"{\"a\":\"\u00e9\"}", `{"a":"\u00e9"}`, `{"a":"\ud83d\ude00"}`, `{"a":"\ud800"}`,
		"{\"a\":\"\xff\"}", "{\"a\":\"\xe2\x80\"}", "{\"a\":\"\xe2\x80\xa8\xff\"}",
		`{"a":"\"" ,"b":1}`, `["\"", 1]`, `{"a":"x\\\"" }`, `{"a":"\\" , "b":"\" "}`,
		`{"a":"x y"}`, `{"a":"\\"}`, `{"a":"\\\""}`, `{"a":"\\","b":"c d"}`, `{"a":"\"","b":1}`,
		`{ "a":1}`, `{"a" :1}`, `{"a": 1}`, `{"a":1 }`, "{\"a\":\n1}", "{\"a\":\t1}", "{\"a\":\r1}",
		`[1, 2]`, `[1,2 ]`, `{"a":{"b":[1,{"c":null}]}}`,
		`{"a":1,"a":2}`, `{"":1}`, `{"a\u0000b":1}`, `{"<":1}`, `{"\u003c":1}`,
		`{"n":1e400}`, `{"n":-1e999}`, `{"n":1.7976931348623157e308}`, `{"n":4.9e-324}`, `{"n":1e-400}`,
		strings.Repeat("[", 990) + strings.Repeat("]", 990),
		strings.Repeat("[", 1001) + strings.Repeat("]", 1001),
		`{"s":"` + strings.Repeat("\\u003c", 3000) + `"}`,
		`{"s":"` + strings.Repeat("z", 80<<10) + `"}`,
		`{"s":"data: x\n\nevent: y"}`,
	} {
		add(`{"content":[` + x + `],"structuredContent":` + sc + `}`)
	}
	// White space right around the structured value, inside the result.
	add(`{"content":[`+x+`],"structuredContent": {"a":1} }`, `{"content":[`+x+`],"structuredContent":`+"\n"+`{"a":1}`+"\n"+`,"isError":false}`)
	add(`{"content":[`+x+`],"structuredContent":{"a":1},"isError":true}`, `{"structuredContent":{"a":1},"isError":true,"content":[`+x+`]}`)

	// isError spellings.
	for _, ie := range []string{`true`, `false`, `null`, ` true`, `1`, `"true"`, `0`} {
		add(`{"content":[` + x + `],"isError":` + ie + `}`)
	}

	// _meta on the result and on the blocks.
	for _, m := range []string{
		`{}`, `null`, `{"vendor.example/k":1}`, `{"vendor.example/k":"<&>"}`,
		`{"io.modelcontextprotocol/serverInfo":{"name":"evil","version":"1"}}`,
		`{"io.modelcontextprotocol/serverInfo":null}`,
		`{"toolplane.io/retryAfter":5}`, `{"a/b":1,"io.modelcontextprotocol/serverInfo":1}`,
		`{"progressToken":1}`, `{"x":{"y":[1,2]}}`,
	} {
		add(`{"content":[` + x + `],"_meta":` + m + `}`)
		add(`{"content":[{"type":"text","text":"x","_meta":` + m + `}]}`)
	}
	add(`{"content":[{"type":"text","text":"x","annotations":{"priority":1}}]}`)
	add(`{"content":[{"type":"text","text":"x","annotations":null}]}`)

	// resultType, requestState, inputRequests: the workload's, not the
	// gateway's.
	for _, tail := range []string{
		`"resultType":"complete"`, `"resultType":"input_required"`, `"resultType":"other"`, `"resultType":""`,
		`"resultType":"a<b"`, `"resultType":"\u00e9"`, `"resultType":null`, `"resultType":"complete","isError":true`,
		`"requestState":"s"`, `"requestState":""`, `"inputRequests":{}`, `"inputRequests":null`,
		`"resultType":"input_required","requestState":"s"`, `"resultType":"input_required","inputRequests":{}`,
		`"ResultType":"input_required"`, `"StructuredContent":{"a":1}`, `"IsError":true`,
		`"structuredContent":{"a":1},"STRUCTUREDCONTENT":{"b":2}`,
		`"task":{"taskId":"t"}`, `"unknown":1`,
	} {
		add(`{"content":[` + x + `],` + tail + `}`)
	}
	add(`{"content":[],"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create","params":{"message":"hi","requestedSchema":{"type":"object"}}}}}`)
	add(`{"content":[],"resultType":"input_required","requestState":"st"}`)
	add(`{"content":[],"resultType":"input_required"}`)

	// Duplicates and odd members.
	add(`{"content":[`+x+`],"content":[`+rtAnswerText(`"again"`)+`]}`, `{"content":[`+x+`],"isError":true,"isError":false}`,
		`{"content":[`+x+`],"structuredContent":{"a":1},"structuredContent":{"b":"<"}}`,
		`{"content":[{"type":"text","text":"a","text":"b"}]}`, `{"content":[{"type":"text","type":"text","text":"a"}]}`,
		`{"content":[{"type":"image","data":"AAAA","mimeType":"image/png"},`+x+`]}`,
		`{"content":[`+x+`],"structuredContent":{"a":1},"_meta":{"k/v":1},"isError":true,"resultType":"complete"}`)
	return rs
}

// rtAnswerCompare posts body to both gateways and fails on any
// difference; it returns whether the fast path took the call.
func rtAnswerCompare(t *testing.T, sdk, fast *rtGateway, h map[string]string, body, what string) bool {
	t.Helper()
	before := gateway.FastCalls(fast.g)
	want, _, err1 := rtPost(t, sdk.url+"/mcp", h, body, time.Minute)
	got, _, err2 := rtPost(t, fast.url+"/mcp", h, body, time.Minute)
	if err1 != nil || err2 != nil {
		t.Fatalf("%s: %v / %v", what, err1, err2)
	}
	took := gateway.FastCalls(fast.g) > before
	if got != want {
		t.Errorf("%s: the fast path (took it: %v) answered\n%.2000q\nthe SDK\n%.2000q", what, took,
			fmt.Sprintf("%d %s %s %s", got.Status, got.ContentType, got.CacheControl, got.Body),
			fmt.Sprintf("%d %s %s %s", want.Status, want.ContentType, want.CacheControl, want.Body))
		return took
	}
	// The same, and an SSE answer: one event of valid JSON (as the SDK's
	// is), whose data is a single line.
	if got.ContentType == "text/event-stream" {
		data, ok := strings.CutPrefix(got.Body, "event: message\ndata: ")
		data, ok2 := strings.CutSuffix(data, "\n\n")
		if !ok || !ok2 || strings.ContainsAny(data, "\r\n") || !json.Valid([]byte(data)) {
			t.Errorf("%s: the answer is not one event of valid JSON: %.600q", what, got.Body)
		}
	}
	return took
}

// TestRedTeamAnswerHostileRepliesAsTheSDK: every reply above, in both eras,
// answered by the fast path as by the SDK.
func TestRedTeamAnswerHostileRepliesAsTheSDK(t *testing.T) {
	replies := rtAnswerReplies()
	r := new(routes)
	sdk, fast := rtPair(t, r, table(rawWorkload(t, r, replies)), gateway.Options{})
	if took := rtAnswerEach(t, sdk, fast, "raw", "7", "reply", replies); took != 2*len(replies) {
		t.Errorf("the fast path took %d of %d calls", took, 2*len(replies))
	}
}

// rtAnswerEach compares, in both eras, a call of tool with id for each of
// cases (the workload answers argument {"case":n} with cases[n]), and
// returns how many of the calls the fast path took.
func rtAnswerEach(t *testing.T, sdk, fast *rtGateway, tool, id, what string, cases []string) int {
	t.Helper()
	took := 0
	for _, era := range eras {
		for n := range cases {
			h, body := eraHeader(era, tool), callBody(era, id, tool, fmt.Sprintf(`{"case":%d}`, n), "")
			if rtAnswerCompare(t, sdk, fast, h, body, fmt.Sprintf("%s %s %d %.120q", era, what, n, cases[n])) {
				took++
			}
		}
	}
	return took
}

// TestRedTeamAnswerIDsAsTheSDK: ids of every form a caller may send, with
// results that appendAnswer writes itself (plain text, structured content,
// isError) and one it leaves to the SDK, in both eras.
func TestRedTeamAnswerIDsAsTheSDK(t *testing.T) {
	replies := []string{
		`{"content":[{"type":"text","text":"plain"}]}`,
		`{"content":[{"type":"text","text":"{\"sum\":3}"}],"structuredContent":{"sum":3},"isError":false}`,
		`{"content":[{"type":"text","text":"<x>"}],"isError":true}`,
		`{"content":[{"type":"text","text":"x","_meta":{"k/v":1}}]}`,
	}
	ids := []string{
		`0`, `1`, `-0`, `-1`, `1.0`, `1e3`, `1E3`, `1e+3`, `10e-1`, `0.5`, `1.5`, `-1.5`, `-0.0`, `0e0`,
		`9007199254740993`, `9007199254740992`, `123456789012345`, `1234567890123456`, `12345678901234567890`,
		`9223372036854775807`, `-9223372036854775808`, `9223372036854775808`, `1e19`, `-1e19`, `1e300`, `1e400`,
		`""`, `"a"`, `"1"`, `"<&>"`, `"\u003c"`, `"\u00e9"`, "\"\u00e9\"", `"\/"`, `"a\"b"`, `"a\\b"`,
		`"\u2028"`, "\"\u2028\"", `"\u007f"`, "\"\x7f\"", `"\u0000"`, `" "`, `"x-1"`,
		`"` + strings.Repeat("i", 4096) + `"`, "\"\xff\"", `"\ud800"`,
		`true`, `{}`, `[]`, `null`,
	}
	r := new(routes)
	sdk, fast := rtPair(t, r, table(rawWorkload(t, r, replies)), gateway.Options{})
	for _, era := range eras {
		for _, id := range ids {
			for n := range replies {
				h, body := eraHeader(era, "raw"), callBody(era, id, "raw", fmt.Sprintf(`{"case":%d}`, n), "")
				rtAnswerCompare(t, sdk, fast, h, body, fmt.Sprintf("%s id %.40q reply %d", era, id, n))
			}
		}
	}
}

// TestRedTeamAnswerServerInfoAsTheSDK: a gateway whose name and version
// need escaping (HTML characters, separators, invalid UTF-8) writes its
// serverInfo in a 2026-07-28 answer as the SDK does.
func TestRedTeamAnswerServerInfoAsTheSDK(t *testing.T) {
	replies := []string{
		`{"content":[{"type":"text","text":"plain"}],"structuredContent":{"a":1}}`,
		`{"content":[{"type":"text","text":"x"}],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"evil","version":"1"}}}`,
	}
	for _, o := range []gateway.Options{
		{Name: "gw <&> \u2028\u2029", Version: "v1 \"q\" \\ \xff"},
		{Name: "", Version: ""},
		{Name: "\u00e9\U0001F600", Version: "\x00\x1f\x7f"},
	} {
		r := new(routes)
		sdk, fast := rtPair(t, r, table(rawWorkload(t, r, replies)), o)
		for _, era := range eras {
			for n := range replies {
				h, body := eraHeader(era, "raw"), callBody(era, "3", "raw", fmt.Sprintf(`{"case":%d}`, n), "")
				rtAnswerCompare(t, sdk, fast, h, body, fmt.Sprintf("%s name %q version %q reply %d", era, o.Name, o.Version, n))
			}
		}
	}
}

// rtHostileMCP serves an MCP server of the 2025-11-25 era, without
// sessions, whose tool "hmcp" answers the arguments {"case":n} with the
// JSON-RPC result results[n], byte for byte; it returns its table entry.
func rtHostileMCP(t *testing.T, r *routes, results []string) []spec.TableTool {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost {
			http.Error(w, "no", http.StatusMethodNotAllowed)
			return
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Arguments struct{ Case int } `json:"arguments"`
			} `json:"params"`
		}
		if json.NewDecoder(req.Body).Decode(&msg) != nil {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		if len(msg.ID) == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		var result string
		switch msg.Method {
		case "initialize":
			result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"hostile","version":"1"}}`
		case "tools/call":
			n := msg.Params.Arguments.Case
			if n < 0 || n >= len(results) {
				n = 0
			}
			result = results[n]
		default:
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"error":{"code":-32601,"message":"no"}}`)
			return
		}
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":`+result+`}`)
	}))
	t.Cleanup(srv.Close)
	r.set("hmcp.apps.svc.cluster.local:8080", srv.Listener.Addr().String())
	return mcpTableTools("apps", "hmcp", "/mcp", "hmcp")
}

// TestRedTeamAnswerHostileMCPServerAsTheSDK: an MCP server's results reach
// appendAnswer through the SDK's client, with structuredContent re-read
// from the reply's bytes (toolkit/discovery): answered as the SDK does.
func TestRedTeamAnswerHostileMCPServerAsTheSDK(t *testing.T) {
	x := rtAnswerText(`"x"`)
	var results []string
	for _, lit := range []string{`"plain"`, `"<&>"`, `"\u2028"`, "\"\u2028\"", `"\ud800"`, "\"\xff\"", `"\/"`, "\"\u20ac\""} {
		results = append(results, `{"content":[`+rtAnswerText(lit)+`]}`)
	}
	for _, sc := range []string{
		`{"a":1}`, `{ "a" : 1 }`, `{"a":"<"}`, `{"a":"\u003c"}`, "{\"a\":\"\u2028\"}", `{"a":"\u2028"}`, `[1,2]`, `"s"`, `0`, `-0`, `1E5`,
		"{\"a\":\"\xff\"}", `{"a":1,"a":"<"}`,
	} {
		results = append(results, `{"content":[`+x+`],"structuredContent":`+sc+`}`)
	}
	results = append(results,
		`{"content":[`+x+`],"structuredContent":{"a":1},"StructuredContent":{"b":"c d"}}`,
		`{"content":[`+x+`],"structuredContent":{"a":1},"structuredcontent":{"b":2}}`,
		`{"content":[`+x+`],"structuredContent":{"a":1},"structuredContent":{"b":2}}`,
		`{"content":[`+x+`],"isError":true}`,
		`{"content":[`+x+`],"resultType":"complete"}`,
		`{"content":[`+x+`],"resultType":"other"}`,
		`{"content":[`+x+`],"_meta":{"vendor.example/k":1}}`,
		`{"content":[`+x+`],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"evil","version":"1"}}}`,
		`{"content":[{"type":"text","text":"x","_meta":{}}]}`,
		`{"content":[]}`,
	)
	r := new(routes)
	sdk, fast := rtPair(t, r, table(rtHostileMCP(t, r, results)), gateway.Options{CallTimeout: 20 * time.Second})
	if took := rtAnswerEach(t, sdk, fast, "hmcp", "5", "MCP result", results); took == 0 {
		t.Error("the fast path took none of the calls")
	}
}

// rtAnswerRandomReplies are n replies built at random (a fixed seed) from
// the pieces appendAnswer's checks turn on: strings of quotes, backslashes,
// escapes, HTML characters, separators, other multi-byte characters and
// invalid UTF-8; white space in and out of strings; nesting.
func rtAnswerRandomReplies(n int) []string {
	rng := rand.New(rand.NewPCG(8, 0xdd9d05))
	strPieces := []string{"a", " ", "\t", `\"`, `\\`, `\/`, `\u003c`, `\u2028`, `\u00e9`, `\ud83d\ude00`, `\ud800`, `\n`,
		"<", ">", "&", "\u2028", "\u2029", "\u20ac", "\u00e9", "\x7f", "\xff", "\xe2", "\xe2\x80", `\u0000`, "data:", "\\\\\\\""}
	str := func() string {
		var b strings.Builder
		b.WriteByte('"')
		for range rng.IntN(6) {
			b.WriteString(strPieces[rng.IntN(len(strPieces))])
		}
		b.WriteByte('"')
		return b.String()
	}
	ws := func() string { return []string{"", "", "", " ", "\n", "\t", "\r\n"}[rng.IntN(7)] }
	var value func(depth int) string
	value = func(depth int) string {
		switch k := rng.IntN(8); {
		case depth > 3 || k < 2:
			return []string{"0", "-0", "1.5e3", "1E-2", "true", "false", "null", "123456789012345678"}[rng.IntN(8)]
		case k < 4:
			return str()
		case k < 6:
			var parts []string
			for range rng.IntN(3) {
				parts = append(parts, ws()+str()+ws()+":"+ws()+value(depth+1)+ws())
			}
			return "{" + strings.Join(parts, ",") + "}"
		default:
			var parts []string
			for range rng.IntN(3) {
				parts = append(parts, ws()+value(depth+1)+ws())
			}
			return "[" + strings.Join(parts, ",") + "]"
		}
	}
	out := make([]string, 0, n)
	for range n {
		var blocks []string
		for range 1 + rng.IntN(3) {
			blocks = append(blocks, rtAnswerText(str()))
		}
		r := `{"content":[` + strings.Join(blocks, ",") + `]`
		if rng.IntN(4) != 0 {
			r += `,"structuredContent":` + ws() + value(0) + ws()
		}
		if rng.IntN(2) == 0 {
			r += `,"isError":` + []string{"true", "false"}[rng.IntN(2)]
		}
		if rng.IntN(6) == 0 {
			r += `,"resultType":` + str()
		}
		out = append(out, r+"}")
	}
	return out
}

// TestRedTeamAnswerRandomRepliesAsTheSDK: 600 random replies, both eras.
func TestRedTeamAnswerRandomRepliesAsTheSDK(t *testing.T) {
	replies := rtAnswerRandomReplies(600)
	r := new(routes)
	sdk, fast := rtPair(t, r, table(rawWorkload(t, r, replies)), gateway.Options{})
	if took := rtAnswerEach(t, sdk, fast, "raw", "9", "random reply", replies); took != 2*len(replies) {
		t.Errorf("the fast path took %d of %d calls", took, 2*len(replies))
	}
}
