package spec_test

import (
	"encoding/json"
	"testing"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// A result from an MCP server other than toolkit passes through a decode
// and an encode unchanged: every content type, with the fields Content does
// not name (annotations, _meta, a resource link's fields).
func TestCallResultPassesContentThroughUnchanged(t *testing.T) {
	const in = `{"content":[` +
		`{"type":"text","text":"hi","annotations":{"audience":["user"],"priority":0.5}},` +
		`{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png","_meta":{"k":1}},` +
		`{"type":"audio","data":"UklGRg==","mimeType":"audio/wav"},` +
		`{"type":"resource","resource":{"uri":"mem://a","mimeType":"text/plain","text":"note","_meta":{"r":true}}},` +
		`{"type":"resource_link","uri":"mem://doc","name":"doc","title":"Doc","size":12},` +
		`{"type":"hologram","frames":[1,2,3]}` +
		`],"structuredContent":{"a":1},"isError":false,"_meta":{"trace":"x"}}`
	var res spec.CallResult
	if err := json.Unmarshal([]byte(in), &res); err != nil {
		t.Fatal(err)
	}
	if res.Content[4].Extra["uri"] == nil || string(res.Content[0].Extra["annotations"]) == "" {
		t.Fatalf("fields Content does not name were dropped: %+v", res.Content)
	}
	out, err := json.Marshal(&res)
	if err != nil {
		t.Fatal(err)
	}
	var want, got any
	_ = json.Unmarshal([]byte(in), &want)
	_ = json.Unmarshal(out, &got)
	wb, _ := json.Marshal(want)
	gb, _ := json.Marshal(got)
	if string(wb) != string(gb) {
		t.Fatalf("re-encoded as\n%s\nwant\n%s", gb, wb)
	}
}

// Extra never overrides a named field, and a text block keeps its
// required text.
func TestContentExtraNeverOverridesNamedFields(t *testing.T) {
	c := spec.Content{Type: spec.ContentText, Text: "", Extra: map[string]json.RawMessage{
		"type": json.RawMessage(`"image"`), "text": json.RawMessage(`"forged"`), "annotations": json.RawMessage(`{}`),
	}}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"annotations":{},"text":"","type":"text"}` {
		t.Fatalf("got %s", b)
	}
}
