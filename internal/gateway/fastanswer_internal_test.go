package gateway

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sdkAnswer is what the SDK's connection writes for id and res: the
// envelope of EncodeMessage around res's MarshalJSON.
func sdkAnswer(t testing.TB, id jsonrpc.ID, res *mcp.CallToolResult) string {
	t.Helper()
	raw, err := res.MarshalJSON()
	if err != nil {
		t.Fatalf("MarshalJSON: %v", err)
	}
	data, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Result: raw})
	if err != nil {
		t.Fatalf("EncodeMessage: %v", err)
	}
	return string(data)
}

// intID is the id of a request whose id was the number n, as the SDK
// decodes it.
func intID(n float64) jsonrpc.ID {
	id, err := jsonrpc.MakeID(n)
	if err != nil {
		panic(err)
	}
	return id
}

func stringID(s string) jsonrpc.ID {
	id, err := jsonrpc.MakeID(s)
	if err != nil {
		panic(err)
	}
	return id
}

// resultOf decodes a result as a workload's or an MCP server's arrives,
// resultType and all.
func resultOf(t testing.TB, wire string) *mcp.CallToolResult {
	t.Helper()
	var res mcp.CallToolResult
	if err := json.Unmarshal([]byte(wire), &res); err != nil {
		t.Fatalf("decoding %s: %v", wire, err)
	}
	return &res
}

// checkAnswer compares appendAnswer with the SDK for id and res: the same
// bytes when it writes them, and dst untouched when it does not. It
// returns whether appendAnswer wrote the answer.
func checkAnswer(t testing.TB, id jsonrpc.ID, res *mcp.CallToolResult, impl *mcp.Implementation) bool {
	t.Helper()
	meta := answerMeta(impl)
	prefix := []byte("event: message\ndata: ")
	got, ok := appendAnswer(append([]byte(nil), prefix...), id, res, impl, meta)
	if !ok {
		if string(got) != string(prefix) {
			t.Errorf("appendAnswer declined %+v, yet changed dst to %q", res, got)
		}
		return false
	}
	if want := string(prefix) + sdkAnswer(t, id, res); string(got) != want {
		t.Errorf("appendAnswer of id %v and %+v:\n got %s\nwant %s", id.Raw(), res, got, want)
	}
	return true
}

func TestAppendAnswerWritesWhatTheSDKWrites(t *testing.T) {
	if resultTypeField < 0 {
		t.Fatal("mcp.CallToolResult has no resultType string field: every fast answer would go to the SDK's encoder")
	}
	impl := &mcp.Implementation{Name: "toolplane-gateway", Version: "v1.2.3 <&>"}
	texts := []string{"3", "", "plain text, with spaces: and {braces} [ok]", `a "quote"`, `back\slash`, "<b>&amp;</b>",
		"line\nbreak\ttab\r\b\f", "\x00\x01\x1f\x7f", "é ü 世界 😀", "sep\u2028ara\u2029tors", "bad \xff\xfe utf-8", "\xed\xa0\x80"}
	ids := []jsonrpc.ID{intID(0), intID(1), intID(-7), intID(1 << 53), intID(-(1 << 62)), intID(math.MaxInt64),
		stringID("abc-1"), stringID(""), stringID(`q"uote`), stringID("<&>"), stringID("ü")}
	structured := []any{nil, json.RawMessage(`{"sum":3}`), json.RawMessage(`{"echo":"hello world","n":[1,2.5,-3e4],"ok":true,"z":null}`),
		json.RawMessage(`{"s":"a\"b\\c \u00e9"}`), json.RawMessage(`null`), json.RawMessage(`[]`),
		json.RawMessage(`{"a": 1}`), json.RawMessage("{\"a\":1}\n"), json.RawMessage(`{"a":"<x>"}`), json.RawMessage(`{"a":"\u2028"}`), json.RawMessage("{\"a\":\"\u2028\"}"),
		json.RawMessage(`{"a":"é"}`), map[string]any{"sum": 3}}
	var wrote, declined int
	count := func(ok bool) {
		if ok {
			wrote++
		} else {
			declined++
		}
	}
	for _, id := range ids {
		for _, text := range texts {
			for _, sc := range structured {
				for _, isError := range []bool{false, true} {
					res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: sc, IsError: isError}
					count(checkAnswer(t, id, res, impl))
					// 2026-07-28: resultType complete, and the serverInfo.
					modern := stampComplete(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: sc, IsError: isError})
					modern.Meta = mcp.Meta{mcp.MetaKeyServerInfo: impl}
					count(checkAnswer(t, id, modern, impl))
				}
			}
		}
	}
	// Shapes around the text block.
	for _, res := range []*mcp.CallToolResult{
		{Content: []mcp.Content{}},
		{Content: nil},
		{Content: []mcp.Content{&mcp.TextContent{Text: "a"}, &mcp.TextContent{Text: "b <"}, &mcp.TextContent{Text: ""}}},
		{Content: []mcp.Content{&mcp.TextContent{Text: "a", Meta: mcp.Meta{"k": "v"}}}},
		{Content: []mcp.Content{&mcp.TextContent{Text: "a", Meta: mcp.Meta{}}}},
		{Content: []mcp.Content{&mcp.TextContent{Text: "a", Annotations: &mcp.Annotations{Priority: 1}}}},
		{Content: []mcp.Content{&mcp.ImageContent{Data: []byte("x"), MIMEType: "image/png"}}},
		{Content: []mcp.Content{&mcp.TextContent{Text: "a"}}, Meta: mcp.Meta{}},
		{Content: []mcp.Content{&mcp.TextContent{Text: "a"}}, Meta: mcp.Meta{"vendor/k": 1}},
		{Content: []mcp.Content{&mcp.TextContent{Text: "a"}}, Meta: mcp.Meta{mcp.MetaKeyServerInfo: &mcp.Implementation{Name: "other"}}},
		{Content: []mcp.Content{&mcp.TextContent{Text: "a"}}, Meta: mcp.Meta{mcp.MetaKeyServerInfo: impl, "vendor/k": 1}},
		{Content: []mcp.Content{&mcp.TextContent{Text: "a"}}, RequestState: "s"},
		{Content: []mcp.Content{&mcp.TextContent{Text: "a"}}, InputRequests: mcp.InputRequestMap{}},
		resultOf(t, `{"content":[{"type":"text","text":"a"}],"resultType":"input_required"}`),
		resultOf(t, `{"content":[{"type":"text","text":"a"}],"resultType":"complete"}`),
		resultOf(t, `{"content":[{"type":"text","text":"a"}],"resultType":"odd \"one\""}`),
		resultOf(t, `{"content":[{"type":"text","text":"a"}],"structuredContent":{"x":1},"isError":true}`),
	} {
		for _, id := range ids {
			count(checkAnswer(t, id, res, impl))
		}
	}
	// Neither side of the comparison may be vacuous.
	if wrote < 2000 || declined < 500 {
		t.Errorf("appendAnswer wrote %d answers and declined %d: the comparison covers too little of one side", wrote, declined)
	}
	// The answers the fast path gives most are written, not declined.
	for _, res := range []*mcp.CallToolResult{
		{Content: []mcp.Content{&mcp.TextContent{Text: `{"sum":3}`}}, StructuredContent: json.RawMessage(`{"sum":3}`)},
		func() *mcp.CallToolResult {
			r := stampComplete(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "3"}}, StructuredContent: json.RawMessage(`{"sum":3}`)})
			r.Meta = mcp.Meta{mcp.MetaKeyServerInfo: impl}
			return r
		}(),
	} {
		if !checkAnswer(t, intID(2), res, impl) {
			t.Errorf("appendAnswer declined the common result %+v", res)
		}
	}
}

// FuzzAppendAnswer compares appendAnswer with the SDK over any text,
// structured content, string id and error flag, in both eras.
func FuzzAppendAnswer(f *testing.F) {
	f.Add("3", `{"sum":3}`, "7", false, true)
	f.Add("<&>\u2028\xff", `{"a":"b c","d":[1, 2]}`, `"q`, true, false)
	f.Add("", "null", "", false, false)
	impl := &mcp.Implementation{Name: "g", Version: "1"}
	f.Fuzz(func(t *testing.T, text, structured, id string, isError, modern bool) {
		res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}, &mcp.TextContent{Text: id}}, IsError: isError}
		if json.Valid([]byte(structured)) {
			res.StructuredContent = json.RawMessage(structured)
		}
		if modern {
			res = stampComplete(res)
			res.Meta = mcp.Meta{mcp.MetaKeyServerInfo: impl}
		}
		checkAnswer(t, stringID(id), res, impl)
		checkAnswer(t, intID(float64(len(text))), res, impl)
	})
}

// BenchmarkAnswer weighs appendAnswer against the SDK's encoding of the
// same answer, the fast path's most common one (both eras).
func BenchmarkAnswer(b *testing.B) {
	impl := &mcp.Implementation{Name: "toolplane-gateway", Version: "v1"}
	meta := answerMeta(impl)
	modern := stampComplete(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"sum":3}`}}, StructuredContent: json.RawMessage(`{"sum":3}`)})
	modern.Meta = mcp.Meta{mcp.MetaKeyServerInfo: impl}
	results := map[string]*mcp.CallToolResult{
		"2025": {Content: []mcp.Content{&mcp.TextContent{Text: `{"sum":3}`}}, StructuredContent: json.RawMessage(`{"sum":3}`)},
		"2026": modern,
	}
	id := intID(42)
	for _, era := range []string{"2025", "2026"} {
		res := results[era]
		b.Run("sdk-"+era, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				raw, _ := res.MarshalJSON()
				if _, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Result: raw}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("fast-"+era, func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, 512)
			for b.Loop() {
				var ok bool
				if buf, ok = appendAnswer(buf[:0], id, res, impl, meta); !ok {
					b.Fatal("declined")
				}
			}
		})
	}
}
