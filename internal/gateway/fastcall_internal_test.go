package gateway

import (
	"bytes"
	"encoding/json"
	"mime"
	"net"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// loopbackAddr says of a TCP address what isLoopback says of its string.
func TestLoopbackAddrIsIsLoopbackOfTheString(t *testing.T) {
	for _, a := range []net.Addr{
		&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 80},
		&net.TCPAddr{IP: net.IPv4(127, 9, 8, 7), Port: 80},
		&net.TCPAddr{IP: net.ParseIP("::1"), Port: 443},
		&net.TCPAddr{IP: net.ParseIP("::1"), Port: 443, Zone: "lo"},
		&net.TCPAddr{IP: net.ParseIP("::ffff:127.0.0.1"), Port: 1},
		&net.TCPAddr{IP: net.ParseIP("10.0.0.1"), Port: 1},
		&net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 1, Zone: "eth0"},
		&net.TCPAddr{IP: net.ParseIP("0.0.0.0"), Port: 1},
		&net.TCPAddr{IP: net.ParseIP("::"), Port: 1},
		&net.TCPAddr{Port: 1},
		&net.TCPAddr{IP: net.IP{1, 2, 3}, Port: 1},
		&net.UnixAddr{Name: "/run/x.sock", Net: "unix"},
	} {
		if got, want := loopbackAddr(a), isLoopback(a.String()); got != want {
			t.Errorf("%s: %v, isLoopback of its string %v", a, got, want)
		}
	}
}

// marshalResult writes the bytes the SDK's connection writes of a result:
// its encoder's, which does not escape HTML, less the newline.
func TestMarshalResultIsTheConnectionsEncoding(t *testing.T) {
	text := func(s string) []mcp.Content { return []mcp.Content{&mcp.TextContent{Text: s}} }
	for _, res := range []*mcp.CallToolResult{
		nil,
		{Content: text("plain")},
		{Content: text("<b>&amp;</b> \u2028 \u2029 é \x7f \"q\" \\ \n\t"), IsError: true},
		{Content: []mcp.Content{}, StructuredContent: json.RawMessage(`{ "a" : [1, 2.50, "<x>"], "big":9007199254740993 }`)},
		{Content: text("m"), Meta: mcp.Meta{"io.modelcontextprotocol/serverInfo": &mcp.Implementation{Name: "g&w", Version: "1"}, "k": []any{1.5, "<", nil}}},
		stampComplete(&mcp.CallToolResult{Content: text("stamped")}),
	} {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(res); err != nil {
			t.Fatal(err)
		}
		want := bytes.TrimRight(buf.Bytes(), "\n")
		got, err := marshalResult(res)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("marshalResult:\n got %s (%v)\nwant %s", got, err, want)
		}
	}
}

// baseMediaType's shortcut answers as mime.ParseMediaType does.
func TestBaseMediaTypeOfTheCommonSpelling(t *testing.T) {
	for _, v := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON", "application/json ", "", "application/"} {
		want := ""
		if mt, _, err := mime.ParseMediaType(v); err == nil {
			want = mt
		}
		if got := baseMediaType(v); got != want {
			t.Errorf("%q: %q, want %q", v, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { baseMediaType("application/json") }); n != 0 {
		t.Errorf("%.0f allocations, want none", n)
	}
	if n := testing.AllocsPerRun(100, func() { acceptsJSONAndStream([]string{"application/json, text/event-stream"}) }); n != 0 {
		t.Errorf("acceptsJSONAndStream: %.0f allocations, want none", n)
	}
}

// TestNumbersFitReadsStringsAsStrings: numbersFit looks at numbers only,
// never at digits inside a string, whatever its escapes.
func TestNumbersFitReadsStringsAsStrings(t *testing.T) {
	for raw, want := range map[string]bool{
		`{"a":1,"b":[-2.5e10,0,1e-300]}`:         true,
		`{"a":1e400}`:                            false,
		`{"a":[1,2,-1e999]}`:                     false,
		`{"a":"1e400"}`:                          true,
		`{"a":"\"1e400","b":1}`:                  true,
		`{"a":"x\\","b":1e400}`:                  false,
		`{"a":"x\\\"1e400\"","b":2}`:             true,
		`{"a":-0e999}`:                           true,
		`{"a":` + strings.Repeat("9", 309) + `}`: false,
		`{"1e400":{"b":true}}`:                   true,
	} {
		if got := numbersFit([]byte(raw)); got != want {
			t.Errorf("numbersFit(%s) = %t, want %t", raw, got, want)
		}
	}
}
