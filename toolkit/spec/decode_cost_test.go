package spec_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// decodedBytes is what json.Unmarshal into any keeps live of data.
func decodedBytes(t *testing.T, data []byte) int64 {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(v)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

func repeat(open, item, sep, last, close string, n int) string {
	return open + strings.Repeat(item+sep, n) + last + close
}

// The estimate is at least what the decoder keeps, for the shapes that cost
// the most per byte and for an ordinary tool list.
func TestDecodeCostBoundsTheDecode(t *testing.T) {
	var tools strings.Builder
	tools.WriteString(`{"tools":[`)
	for i := range 2000 {
		if i > 0 {
			tools.WriteString(",")
		}
		fmt.Fprintf(&tools, `{"name":"tool_%d","description":"Looks a customer up.","inputSchema":{"type":"object","properties":{"id":{"type":"string"},"n":{"type":"integer","minimum":1}},"required":["id"]}}`, i)
	}
	tools.WriteString(`]}`)
	var members strings.Builder
	members.WriteString("{")
	for i := range 100000 {
		if i > 0 {
			members.WriteString(",")
		}
		fmt.Fprintf(&members, `"%d":0`, i)
	}
	members.WriteString("}")
	cases := map[string]string{
		"empty arrays":  repeat("[", "[]", ",", "[]", "]", 200000),
		"empty objects": repeat("[", "{}", ",", "{}", "]", 200000),
		"small objects": repeat("[", `{"a":0}`, ",", "{}", "]", 100000),
		"numbers":       repeat("[", "0", ",", "0", "]", 200000),
		"literals":      repeat("[", "true", ",", "null", "]", 200000),
		"strings":       repeat("[", `""`, ",", `""`, "]", 200000),
		"long strings":  repeat("[", `"`+strings.Repeat("x", 1000)+`"`, ",", `""`, "]", 1000),
		"nesting":       strings.Repeat(`{"a":`, 900) + "0" + strings.Repeat("}", 900),
		"members":       members.String(),
		"tool list":     tools.String(),
	}
	for name, text := range cases {
		t.Run(name, func(t *testing.T) {
			data := []byte(text)
			est, got := spec.DecodeCost(data), decodedBytes(t, data)
			if est < got {
				t.Errorf("estimated %d bytes for %d of JSON; the decode kept %d", est, len(data), got)
			}
			t.Logf("%d bytes of JSON: decoded %d, estimated %d", len(data), got, est)
		})
	}
}

// Metering as the bytes stream in gives the estimate of the whole text,
// wherever the text is cut.
func TestDecodeMeterStreams(t *testing.T) {
	data := []byte(`{"tools":[{"name":"a\"b","inputSchema":{"type":"object","x":[1,2.5e3,true,null,"s"]},"_meta":{"k":[{}]}}]}`)
	want := spec.DecodeCost(data)
	for cut := range len(data) {
		var m spec.DecodeMeter
		_, _ = m.Write(data[:cut])
		_, _ = m.Write(data[cut:])
		if m.Cost() != want {
			t.Fatalf("cut at %d: %d, want %d", cut, m.Cost(), want)
		}
	}
}

// With OnlyKey, only the values of that member count, at any depth, and a
// string that merely holds the key's text does not start metering.
func TestDecodeMeterOnlyKey(t *testing.T) {
	meta := `{"k":[[],[],{"a":0}]}`
	doc := func(m string) []byte {
		return []byte(`{"tools":[{"name":"_meta","inputSchema":{"type":"object","properties":{"x":{"type":"array"}}},"_meta":` + m + `},{"name":"b","description":"_meta"}]}`)
	}
	m := spec.DecodeMeter{OnlyKey: "_meta"}
	_, _ = m.Write(doc(meta))
	if want := spec.DecodeCost([]byte(meta)); m.Cost() != want {
		t.Errorf("metered %d, want the _meta value's %d", m.Cost(), want)
	}
	// encoding/json decodes these into the _meta field too.
	for _, name := range []string{`_META`, `_Meta`, `\u005fmeta`, `_m\u0065ta`} {
		m = spec.DecodeMeter{OnlyKey: "_meta"}
		_, _ = m.Write([]byte(`{"tools":[{"name":"a","` + name + `":` + meta + `}]}`))
		if want := spec.DecodeCost([]byte(meta)); m.Cost() < want {
			t.Errorf("%s: metered %d, want at least the value's %d", name, m.Cost(), want)
		}
	}
	m = spec.DecodeMeter{OnlyKey: "_meta"}
	_, _ = m.Write(doc("7"))
	if m.Cost() != spec.DecodeCost([]byte("7")) {
		t.Errorf("metered %d for a scalar _meta", m.Cost())
	}
}

// An SSE stream is metered as its data lines are: a quote on a comment or
// field line ends with its line.
func TestDecodeMeterSSE(t *testing.T) {
	payload := `{"jsonrpc":"2.0","id":1,"result":{"tools":[[],[],[]]}}`
	sse := ": \"a comment with a quote\nevent: message\nid: \"7\ndata: " + payload + "\n\n"
	if got, min := spec.DecodeCost([]byte(sse)), spec.DecodeCost([]byte(payload)); got < min {
		t.Errorf("SSE metered %d, less than its data's %d", got, min)
	}
}
