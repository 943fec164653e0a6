package gateway

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// decodeTextResult must read what it takes exactly as the SDK's decoder
// does, and leave to it everything else.
func TestDecodeTextResultAgreesWithTheSDK(t *testing.T) {
	for _, tc := range []struct {
		body string
		fast bool
	}{
		{`{"content":[{"type":"text","text":"{\"echo\":\"ab\"}"}],"structuredContent":{"echo":"ab","big":9007199254740993}}`, true},
		{`{"content":[{"type":"text","text":"a"},{"type":"text","text":""}],"isError":true}`, true},
		{`{"content":[],"_meta":{"k":1.5,"s":"v"}}`, true},
		{`{"content":[{"type":"text","text":"a"}],"structuredContent":null}`, true},
		{`{"content":[{"type":"text","text":"a","annotations":{"priority":1}}]}`, false},
		{`{"content":[{"type":"image","data":"AAAA","mimeType":"image/png"}]}`, false},
		{`{"content":[{"type":"text"}]}`, false},
		{`{"Content":[{"type":"text","text":"a"}]}`, false},
		{`{"content":[{"type":"text","text":"a"}],"resultType":"complete"}`, false},
		{`{"content":null}`, false},
		{`{"isError":"yes","content":[]}`, false},
		// The SDK refuses these two (red team, 2026-12-06): the fast path
		// passed them on, and the caller's SDK could not read the answer.
		{`{"content":[{"type":"text","text":"x"}],"structuredContent":` + strings.Repeat("[", 1001) + strings.Repeat("]", 1001) + `}`, false},
		{`{"content":[{"type":"text","text":"x"}],"structuredContent":{"n":1e400}}`, false},
		{`{"content":[{"type":"text","text":"x"}],"structuredContent":{"n":[1.5e300,-1e-400,123456789012345678901234]}}`, true},
	} {
		if got := decodeTextResult([]byte(tc.body)) != nil; got != tc.fast {
			t.Errorf("%s: read without the SDK %v, want %v", tc.body, got, tc.fast)
		}
		fast, ferr := decodeResult([]byte(tc.body))
		slow, serr := decodeAnyResult([]byte(tc.body))
		if (ferr == nil) != (serr == nil) {
			t.Errorf("%s: error %v, the SDK's %v", tc.body, ferr, serr)
			continue
		}
		if ferr != nil {
			continue
		}
		fb, err1 := json.Marshal(fast)
		sb, err2 := json.Marshal(slow)
		if err1 != nil || err2 != nil || string(fb) != string(sb) {
			t.Errorf("%s:\n got %s (%v)\nwant %s (%v)", tc.body, fb, err1, sb, err2)
		}
	}
}

// FuzzDecodeResult holds decodeResult, which reads the plainest results
// without the SDK, to the SDK's decoder: the same result, or an error from
// both.
//
//	go test -run '^$' -fuzz FuzzDecodeResult -fuzztime 60s ./internal/gateway/
func FuzzDecodeResult(f *testing.F) {
	f.Add([]byte(`{"content":[{"type":"text","text":"{\"echo\":\"ab\"}"}],"structuredContent":{"echo":"ab","big":9007199254740993}}`))
	f.Add([]byte(`{"content":[{"type":"text","text":"a\u00e9\ud800\"\\"},{"text":"","type":"text"}],"isError":true,"_meta":{"k":[1,null]}}`))
	f.Add([]byte(`{"content":[{"type":"text","text":"a"}],"content":[]}`))
	f.Add([]byte("{\"content\":[{\"type\":\"text\",\"text\":\"\xff\"}]}"))
	f.Add([]byte(`{"content":[{"type":"te\u0078t","text":"a"}],"isError":null} `))
	f.Fuzz(func(t *testing.T, body []byte) {
		fast, ferr := decodeResult(body)
		slow, serr := decodeAnyResult(body)
		if (ferr == nil) != (serr == nil) {
			t.Fatalf("%q: error %v, the SDK's %v", body, ferr, serr)
		}
		if ferr != nil {
			return
		}
		fb, err1 := json.Marshal(fast)
		sb, err2 := json.Marshal(slow)
		if err1 != nil || err2 != nil || string(fb) != string(sb) {
			t.Fatalf("%q:\n got %s (%v)\nwant %s (%v)", body, fb, err1, sb, err2)
		}
	})
}

// TestObjectMembersAllocatesNothingPerKey: a request whose arguments are
// one object of many keys costs objectMembers no more than a small one.
// It failed before its fix (red team, 2026-12-06): jsontext looked for
// repeated keys at every depth, and kept a string of each of the 10,000
// keys below (112,000 allocations and 16 MiB for a body of 1 MiB).
func TestObjectMembersAllocatesNothingPerKey(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{`)
	for i := range 10_000 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"k` + strings.Repeat("a", i%7) + string(rune('0'+i%10)) + `x` + strconv.Itoa(i) + `":1`)
	}
	b.WriteString(`}}}`)
	msg := []byte(b.String())
	if plainRequest(msg) == nil {
		t.Fatal("the request is not read")
	}
	if n := testing.AllocsPerRun(20, func() { plainRequest(msg) }); n > 20 {
		t.Errorf("plainRequest of a 10,000-key request: %.0f allocations, want at most 20", n)
	}
	// A key twice at the top is still left to the SDK.
	if _, ok := objectMembers([]byte(`{"a":1,"b":{"c":1,"c":2},"a":2}`), make([]member, 0, 3)); ok {
		t.Error("a repeated key was read")
	}
	if _, ok := objectMembers([]byte(`{"a":1,"b":{"c":1,"c":2}}`), make([]member, 0, 3)); !ok {
		t.Error("a key repeated inside a value, which encoding/json reads too, was refused")
	}
}
