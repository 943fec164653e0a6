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
