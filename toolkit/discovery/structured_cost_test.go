package discovery_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/toolkit/discovery"
)

// manyMembers is a result of --max-result-bytes (4 MiB) that is some
// 700,000 small members beside its structuredContent: a red team's input
// against a reader that walked the members one by one with encoding/json's
// Decoder (7 million allocations, 145 MB, 17 times what the SDK's decoding
// allocates).
func manyMembers() []byte {
	head := `{"content":[{"type":"image","data":"","mimeType":"image/png"}],"structuredContent":{"a":1}`
	return []byte(head + strings.Repeat(`,"a":0`, (4<<20-len(head))/6) + "}")
}

// TestRawStructuredContentAllocatesPerResultNotPerMember: reading
// structuredContent again costs a few allocations (the copy of the value),
// however many members the result has.
func TestRawStructuredContentAllocatesPerResultNotPerMember(t *testing.T) {
	b := manyMembers()
	if got := string(discovery.RawStructuredContent(b)); got != `{"a":1}` {
		t.Fatalf("structuredContent %q", got)
	}
	if n := testing.AllocsPerRun(3, func() { discovery.RawStructuredContent(b) }); n > 4 {
		t.Errorf("%v allocations for one result of %d bytes", n, len(b))
	}
}

// BenchmarkRawStructuredContent: reading structuredContent again, against the
// SDK's own decoding of the same result, for a result of many members.
func BenchmarkRawStructuredContent(b *testing.B) {
	result := manyMembers()
	b.Run("sdk", func(b *testing.B) {
		b.SetBytes(int64(len(result)))
		for b.Loop() {
			var r mcp.CallToolResult
			if err := json.Unmarshal(result, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("again", func(b *testing.B) {
		b.SetBytes(int64(len(result)))
		for b.Loop() {
			discovery.RawStructuredContent(result)
		}
	})
}

// TestRawStructuredContentLeavesInvalidUTF8ToTheSDK: a structuredContent
// that is not valid UTF-8 is not handed on as sent (it would not be valid
// JSON text); the SDK's value, with U+FFFD, is.
func TestRawStructuredContentLeavesInvalidUTF8ToTheSDK(t *testing.T) {
	for _, result := range []string{
		"{\"content\":[],\"structuredContent\":{\"a\":\"\xff\"}}",
		"{\"content\":[],\"structuredContent\":{\"a\":1},\"structuredContent\":[\"\xed\xa0\x80\"]}",
	} {
		if raw := discovery.RawStructuredContent([]byte(result)); raw != nil {
			t.Errorf("%q: %q handed on as sent", result, raw)
		}
	}
	if raw := discovery.RawStructuredContent([]byte(`{"content":[],"structuredContent":{"a":"\ud800","b":"é"}}`)); string(raw) != `{"a":"\ud800","b":"é"}` {
		t.Errorf("valid UTF-8 (an escaped lone surrogate is) not handed on as sent: %q", raw)
	}
}
