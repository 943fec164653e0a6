package gateway

import (
	"encoding/json"
	"reflect"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The fast path's answer is what jsonrpc.EncodeMessage writes for a
// Response whose Result is the result's MarshalJSON. For the result it
// answers most, a toolkit workload's text blocks, that costs the SDK an
// encoding of every block, of the result around them, and of the
// envelope, each scanned again by the next: 1.8 to 2.8 µs and 8 to 11
// allocations a call, against 0.15 µs and 2 here (BenchmarkAnswer).
// appendAnswer writes those bytes directly for that result, and only for
// it: every string whose encoding is not its own bytes between quotes is
// encoded by encoding/json, and anything else of the result goes to the
// SDK's encoder. fastanswer_internal_test.go compares the two, byte for
// byte, over every member and kind of string, and fuzzes them;
// redteam_answer_test.go compares whole answers with the SDK path's.

// resultTypeField is the index of CallToolResult's unexported resultType,
// which its MarshalJSON writes and nothing exported reads; -1 if the SDK
// has no such string field, and then every answer is the SDK's to encode.
var resultTypeField = func() int {
	f, ok := reflect.TypeFor[mcp.CallToolResult]().FieldByName("resultType")
	if !ok || len(f.Index) != 1 || f.Type.Kind() != reflect.String {
		return -1
	}
	return f.Index[0]
}()

// answerMeta is the _meta of a 2026-07-28 result that annotateServerInfo
// gave the gateway's serverInfo, as the result's encoding writes it,
// with the comma after it.
func answerMeta(impl *mcp.Implementation) []byte {
	key, err := json.Marshal(mcp.MetaKeyServerInfo)
	if err != nil {
		return nil
	}
	val, err := json.Marshal(impl)
	if err != nil {
		return nil
	}
	b := append([]byte(`"_meta":{`), key...)
	b = append(b, ':')
	b = append(b, val...)
	return append(b, "},"...)
}

// appendAnswer appends to dst the JSON-RPC response that answers id with
// res, as the SDK writes it, and reports whether it could: ok is false,
// and dst unchanged, for an id or a result that it does not write (see
// above). meta is the gateway's answerMeta, and impl the serverInfo it
// holds.
func appendAnswer(dst []byte, id jsonrpc.ID, res *mcp.CallToolResult, impl *mcp.Implementation, meta []byte) ([]byte, bool) {
	if res == nil || resultTypeField < 0 || res.Content == nil || res.InputRequests != nil || res.RequestState != "" {
		return dst, false
	}
	start := len(dst)
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	switch v := id.Raw().(type) {
	case int64:
		dst = strconv.AppendInt(dst, v, 10)
	case string:
		if !plainJSONString(v) {
			return dst[:start], false
		}
		dst = append(append(append(dst, '"'), v...), '"')
	default:
		return dst[:start], false
	}
	dst = append(dst, `,"result":{`...)
	switch len(res.Meta) {
	case 0:
	case 1:
		if v, _ := res.Meta[mcp.MetaKeyServerInfo].(*mcp.Implementation); v == nil || v != impl || meta == nil {
			return dst[:start], false
		}
		dst = append(dst, meta...)
	default:
		return dst[:start], false
	}
	dst = append(dst, `"content":[`...)
	for i, c := range res.Content {
		t, ok := c.(*mcp.TextContent)
		if !ok || t == nil || len(t.Meta) > 0 || t.Annotations != nil {
			return dst[:start], false
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"type":"text","text":`...)
		if plainJSONString(t.Text) {
			dst = append(append(append(dst, '"'), t.Text...), '"')
		} else {
			s, err := json.Marshal(t.Text)
			if err != nil {
				return dst[:start], false
			}
			dst = append(dst, s...)
		}
		dst = append(dst, '}')
	}
	dst = append(dst, ']')
	switch sc := res.StructuredContent.(type) {
	case nil:
	case json.RawMessage:
		if !compactAsIs(sc) {
			return dst[:start], false
		}
		dst = append(append(dst, `,"structuredContent":`...), sc...)
	default:
		return dst[:start], false
	}
	if res.IsError {
		dst = append(dst, `,"isError":true`...)
	}
	if rt := reflect.ValueOf(res).Elem().Field(resultTypeField).String(); rt != "" {
		if !plainJSONString(rt) {
			return dst[:start], false
		}
		dst = append(append(append(dst, `,"resultType":"`...), rt...), '"')
	}
	return append(dst, "}}"...), true
}

// plainJSONString reports whether encoding/json writes s as its own bytes
// between quotes: printable ASCII, and none of the quote, the backslash
// and the three characters that json.Marshal escapes for HTML.
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// compactAsIs reports whether encoding/json writes the JSON value raw
// (a json.RawMessage within a value it marshals) as raw itself: when raw
// has no white space outside its strings, is not empty, and holds none of
// what it escapes for HTML (<, >, &, U+2028, U+2029). raw is valid JSON
// here (decodeTextResult read it); the check does not validate it.
func compactAsIs(raw []byte) bool {
	if len(raw) == 0 {
		return false
	}
	inString := false
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '<', c == '>', c == '&', c == 0xe2:
			// 0xe2 leads U+2028 and U+2029, and many other characters:
			// rare enough in structured content to leave to the SDK.
			return false
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case !inString && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return false
		}
	}
	return true
}
