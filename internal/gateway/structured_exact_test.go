package gateway_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/internal/gateway"
)

// exactCases are results with structuredContent spelled exactly, beside a
// member whose name differs only in case. The SDK matches member names
// exactly (once their escapes are read), so the exact member is the
// result's structured content, the last one if it comes twice; the other
// is an unknown member, dropped. Each case's want is that content.
var exactCases = []struct{ result, want string }{
	{`"structuredContent":{"a":1},"StructuredContent":{"b":2}`, `{"a":1}`},
	{`"StructuredContent":{"b":2},"structuredContent":{"a":1}`, `{"a":1}`},
	{`"STRUCTUREDCONTENT":{"b":2},"structuredContent":{"a":1},"structuredcontent":{"c":3}`, `{"a":1}`},
	{`"structuredContent":{"a":1},"StructuredContent":{"b":2},"resultType":"complete"`, `{"a":1}`},
	{`"resultType":"complete","StructuredContent":{"b":2},"structuredContent":{"a":1}`, `{"a":1}`},
	{`"structuredContent":{"a":1},"StructuredContent":{"b":2},"_meta":{"k/v":1}`, `{"a":1}`},
	{`"structuredContent":{"a":1},"structured\u0043ontent":{"e":5},"StructuredContent":{"b":2}`, `{"e":5}`},
	{`"structuredContent":{"a":1},"structuredContent":[1,9007199254740993]`, `[1,9007199254740993]`},
	{`"StructuredContent":{"b":2}`, ``},
	{`"StructuredContent":{"b":2},"resultType":"complete"`, ``},
}

// answerStructured is the structuredContent member of the result of the
// JSON-RPC answer body (JSON, or one SSE event of it), read by exact name;
// "" when there is none.
func answerStructured(t *testing.T, body string) string {
	t.Helper()
	if data, ok := strings.CutPrefix(body, "event: message\ndata: "); ok {
		body = strings.TrimSpace(data)
	}
	var msg map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &msg); err != nil {
		t.Fatalf("answer %.300q: %v", body, err)
	}
	var result map[string]json.RawMessage
	if err := json.Unmarshal(msg["result"], &result); err != nil {
		t.Fatalf("answer %.300q has no result: %v", body, err)
	}
	return string(result["structuredContent"])
}

// TestStructuredContentIsReadByItsExactName: a workload's or an MCP
// server's result that carries structuredContent beside a member of the
// same name in another case reaches the caller with the exact member's
// value, as the SDK reads it, on the fast path and the SDK's, in both eras.
// encoding/json matches names without regard to case and keeps the last
// match: read with it, "StructuredContent" won when it came last.
func TestStructuredContentIsReadByItsExactName(t *testing.T) {
	x := rtAnswerText(`"x"`)
	var results []string
	for _, c := range exactCases {
		results = append(results, `{"content":[`+x+`],`+c.result+`}`)
	}
	r := new(routes)
	invoke, mcpTools := rawWorkload(t, r, results), rtHostileMCP(t, r, results)
	sdk, fast := rtPair(t, r, table(invoke, mcpTools), gateway.Options{CallTimeout: 20 * time.Second})
	checked := 0
	for _, gw := range []*rtGateway{sdk, fast} {
		for _, tool := range []string{"raw", "hmcp"} {
			for _, era := range eras {
				for n, c := range exactCases {
					what := fmt.Sprintf("%s %s %d %s", era, tool, n, c.result)
					got, _, err := rtPost(t, gw.url+"/mcp", eraHeader(era, tool), callBody(era, "1", tool, fmt.Sprintf(`{"case":%d}`, n), ""), time.Minute)
					if err != nil {
						t.Fatalf("%s: %v", what, err)
					}
					if got.Status != 200 {
						t.Fatalf("%s: status %d: %.300q", what, got.Status, got.Body)
					}
					if sc := answerStructured(t, got.Body); sc != c.want {
						t.Errorf("%s: structuredContent %q, want %q", what, sc, c.want)
					}
					checked++
				}
			}
		}
	}
	if checked != 2*2*len(eras)*len(exactCases) {
		t.Errorf("checked %d answers", checked)
	}
}
