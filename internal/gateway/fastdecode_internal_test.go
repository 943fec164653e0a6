package gateway

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

const plainCall = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"crm_echo","arguments":{"text":"ab"}}}`

// plainRequest takes the calls the SDK's clients send, and leaves to the
// SDK every message it might read otherwise.
func TestPlainRequestTakesOnlyWhatTheSDKReadsAlike(t *testing.T) {
	deep := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"a":` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}}`
	for _, tc := range []struct {
		body string
		fast bool
	}{
		{plainCall, true},
		{` {"jsonrpc":"2.0","id":"x-1","method":"tools/call","params":{}}` + "\n", true},
		{`{"params":{"name":"a"},"method":"tools/list","id":0,"jsonrpc":"2.0"}`, true},
		{"{ \"jsonrpc\" : \"2.0\" ,\n\t\"id\" : 42 \r\n, \"method\":\"tools/call\" , \"params\" : { \"name\" : \"a\" , \"arguments\" : { \"n\" : 1.5e3 , \"b\" : true } } \n}\n", true},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"t":true,"f":false,"n":null,"x":-0.5}}}`, true},
		{`{"jsonrpc":"2.0","id":123456789012345,"method":"m","params":{}}`, true},
		{`{"jsonrpc":"2.0","id":1234567890123456,"method":"m","params":{}}`, false}, // past a float64's exact integers
		{`{"jsonrpc":"2.0","id":1.5,"method":"m","params":{}}`, false},
		{`{"jsonrpc":"2.0","id":-1,"method":"m","params":{}}`, false},
		{`{"jsonrpc":"2.0","id":1e3,"method":"m","params":{}}`, false},
		{`{"jsonrpc":"2.0","id":null,"method":"m","params":{}}`, false},
		{`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"m","params":[]}`, false},
		{`{"jsonrpc":"2.0","id":1,"Method":"m","params":{}}`, false},
		{`{"jsonrpc":"2.0","id":1,"meth\u006fd":"m","params":{}}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{}}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"m","method":"n","params":{}}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"m","params":{}}{"x":1}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"m","params":{}}garbage`, false},
		{`{"jsonrpc":"1.0","id":1,"method":"m","params":{}}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"m","params":{},"extra":1}`, false},
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, false},
		{deep, false},
	} {
		req := plainRequest([]byte(tc.body))
		if got := req != nil; got != tc.fast {
			t.Errorf("%.80s: read without the SDK %v, want %v", tc.body, got, tc.fast)
		}
		sameAsTheSDK(t, []byte(tc.body), req)
		// readRequest, whoever reads it, gives what the SDK gives.
		got := readRequest([]byte(tc.body))
		m, err := jsonrpc.DecodeMessage([]byte(tc.body))
		want, _ := m.(*jsonrpc.Request)
		if err != nil {
			want = nil
		}
		if (got == nil) != (want == nil) || got != nil && !sameRequest(got, want) {
			t.Errorf("%.80s: readRequest %+v, the SDK %+v (%v)", tc.body, got, want, err)
		}
	}
}

// sameAsTheSDK fails t if req, plainRequest's reading of body, is not
// the SDK's.
func sameAsTheSDK(t *testing.T, body []byte, req *jsonrpc.Request) {
	t.Helper()
	if req == nil {
		return
	}
	m, err := jsonrpc.DecodeMessage(body)
	if err != nil {
		t.Fatalf("%q: read without the SDK, which refuses it: %v", body, err)
	}
	want, ok := m.(*jsonrpc.Request)
	if !ok || !sameRequest(req, want) {
		t.Fatalf("%q: read as %+v, the SDK reads %+v", body, req, m)
	}
}

func sameRequest(a, b *jsonrpc.Request) bool {
	return a.Method == b.Method && a.ID == b.ID && bytes.Equal(a.Params, b.Params)
}

func FuzzPlainRequest(f *testing.F) {
	f.Add([]byte(plainCall))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x","arguments":{"s":"\u00e9\ud800"},"_meta":{"k":[1,2.5e10,-0,true,null]}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}  `))
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"a\":\"\xff\xfe\"}}"))
	f.Fuzz(func(t *testing.T, body []byte) {
		sameAsTheSDK(t, body, plainRequest(body))
	})
}

// objectMembers gives each value as sent, white space around it left out.
func TestObjectMembersGiveTheValuesAsSent(t *testing.T) {
	raw := []byte("{ \"a\" : 12 , \"b\":\t\"s\"\n, \"c\" : [ 1 , 2 ] , \"d\":true ,\"e\" : { } }")
	members, ok := objectMembers(raw, make([]member, 0, 5))
	if !ok {
		t.Fatal("not read")
	}
	want := map[string]string{"a": "12", "b": `"s"`, "c": "[ 1 , 2 ]", "d": "true", "e": "{ }"}
	for _, m := range members {
		if string(m.value) != want[string(m.key)] {
			t.Errorf("%s = %q, want %q", m.key, m.value, want[string(m.key)])
		}
	}
	if len(members) != len(want) {
		t.Errorf("%d members, want %d", len(members), len(want))
	}
}

// objectMembers allocates nothing: its keys and values are slices of the
// bytes it reads, held in the caller's array. They stay what they were
// after its pooled decoder has read other bytes, and belong to those bytes
// alone.
func TestObjectMembersAreSlicesOfTheBytesRead(t *testing.T) {
	raw := []byte(`{"name":"crm_echo","arguments":{"text":"ab"},"_meta":{}}`)
	var known [3]member
	members, ok := objectMembers(raw, known[:0])
	if !ok || len(members) != 3 {
		t.Fatalf("not read: %v", ok)
	}
	// The decoder goes back to the pool and reads other bytes.
	var other [2]member
	if _, ok := objectMembers([]byte(`{"XXXX":"YYYYYYYY","ZZZZZZZZZ":[0,0,0,0,0,0]}`), other[:0]); !ok {
		t.Fatal("the other object is not read")
	}
	want := [][2]string{{"name", `"crm_echo"`}, {"arguments", `{"text":"ab"}`}, {"_meta", `{}`}}
	for i, m := range members {
		if string(m.key) != want[i][0] || string(m.value) != want[i][1] {
			t.Errorf("member %d is %s: %s after the decoder read other bytes, want %s: %s", i, m.key, m.value, want[i][0], want[i][1])
		}
		for _, b := range [][]byte{m.key, m.value} {
			if len(b) > 0 && !within(raw, b) {
				t.Errorf("member %d: %q is not a slice of the bytes read", i, b)
			}
		}
	}
	// objectMembers' decoder comes from a pool, which the race detector
	// empties at random.
	if n := testing.AllocsPerRun(100, func() {
		var known [3]member
		objectMembers(raw, known[:0])
	}); n != 0 && !raceEnabled {
		t.Errorf("objectMembers of a params object: %.0f allocations, want none", n)
	}
}

// within reports whether b lies inside raw's bytes.
func within(raw, b []byte) bool {
	for i := range raw {
		if &raw[i] == &b[0] {
			return i+len(b) <= len(raw)
		}
	}
	return false
}

// fastMeta reads a 2026-07-28 call's _meta as metaFast's map read it: the
// SDK's triple checked and left out, every other member decoded, and
// anything it does not serve refused; the SDK client's own _meta costs no
// allocation.
func TestFastMetaChecksTheTripleAndKeepsTheRest(t *testing.T) {
	const pv = "2026-07-28"
	triple := `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}`
	for _, tc := range []struct {
		meta   string
		modern bool
		ok     bool
		kept   map[string]any
	}{
		{`{` + triple + `}`, true, true, nil},
		{`{` + triple + `,"traceparent":"00-x","com.example/n":[1.5,{"a":null}]}`, true, true, map[string]any{"traceparent": "00-x", "com.example/n": []any{1.5, map[string]any{"a": nil}}}},
		{`{"traceparent":"00-x"}`, false, true, map[string]any{"traceparent": "00-x"}},
		{`{}`, false, true, nil},
		{`{}`, true, false, nil},
		{`{` + triple + `}`, false, false, nil},
		{`{` + triple + `,"progressToken":1}`, true, false, nil},
		{`{"progressToken":"p"}`, false, false, nil},
		{`{` + triple + `,"io.modelcontextprotocol/logLevel":"debug"}`, true, false, nil},
		{`{` + strings.Replace(triple, `"2026-07-28"`, `"2026-08-01"`, 1) + `}`, true, false, nil},
		{`{` + strings.Replace(triple, `"2026-07-28"`, `20260728`, 1) + `}`, true, false, nil},
		{`{` + strings.Replace(triple, `"version":"1"`, `"version":1`, 1) + `}`, true, false, nil},
		{`{` + strings.Replace(triple, `"version":"1"`, `"icons":"x"`, 1) + `}`, true, false, nil},
		{`{` + strings.Replace(triple, `{"name":"t","version":"1"}`, `null`, 1) + `}`, true, false, nil},
		{`{` + strings.Replace(triple, `"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},`, ``, 1) + `}`, true, true, nil},
		{`{` + strings.Replace(triple, `"io.modelcontextprotocol/clientCapabilities":{}`, `"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true},"experimental":{},"extensions":{"x":{}}}`, 1) + `}`, true, true, nil},
		{`{` + strings.Replace(triple, `"io.modelcontextprotocol/clientCapabilities":{}`, `"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":1}}`, 1) + `}`, true, false, nil},
		{`{` + strings.Replace(triple, `"io.modelcontextprotocol/clientCapabilities":{}`, `"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}`, 1) + `}`, true, false, nil},
		{`{` + strings.Replace(triple, `"io.modelcontextprotocol/clientCapabilities":{}`, `"io.modelcontextprotocol/clientCapabilities":{"experimental":null}`, 1) + `}`, true, false, nil},
		{`{` + strings.Replace(triple, `"io.modelcontextprotocol/clientCapabilities":{}`, `"io.modelcontextprotocol/clientCapabilities":[]`, 1) + `}`, true, false, nil},
		{`{` + strings.Replace(triple, `"io.modelcontextprotocol/clientCapabilities":{}`, ``, 1) + `"}`, true, false, nil},
		{`{"a":1,"a":2}`, false, false, nil},
		{`[]`, false, false, nil},
	} {
		meta, ok := fastMeta([]byte(tc.meta), pv, tc.modern)
		if ok != tc.ok {
			t.Errorf("%s (modern %v): ok %v, want %v", tc.meta, tc.modern, ok, tc.ok)
			continue
		}
		if ok && !reflect.DeepEqual(meta, tc.kept) {
			t.Errorf("%s: kept %#v, want %#v", tc.meta, meta, tc.kept)
		}
	}
	raw := []byte(`{` + triple + `}`)
	if n := testing.AllocsPerRun(100, func() { fastMeta(raw, pv, true) }); n != 0 && !raceEnabled {
		t.Errorf("fastMeta of the SDK client's _meta: %.0f allocations, want none", n)
	}
}
