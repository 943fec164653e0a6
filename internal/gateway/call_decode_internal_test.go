package gateway

import (
	"encoding/json"
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
