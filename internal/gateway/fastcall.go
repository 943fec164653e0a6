package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// The fast path answers the hot request, one stateless tools/call, from the
// table without the SDK's stateless session: the SDK decodes such a request
// about fourteen times, each with a fresh 32 KiB decoder buffer, and the
// garbage was 40% of a replica's CPU. It answers through the same funnel as
// the SDK's middleware (answerCall: decision, limits, audit, auth, circuit,
// tracing, Txn-Token), and writes what the SDK would write: the status,
// the header, and the body, byte for byte (fastcall_test.go compares them).
//
// It takes only the requests for which that is certain, and leaves every
// other to the SDK: a request the SDK would refuse (a header, the
// protocol version, the _meta triple of 2026-07-28), one that asks for
// anything that needs the SDK's session or stream (a progress token, a log
// level, a client that can answer elicitation or sampling, a task,
// input responses), a params member it does not know, or a spelling the
// SDK's decoder would read otherwise (keys are matched exactly, as the
// SDK's decoder matches them; a key twice goes to the SDK).

// fastProtocols are the protocol versions the fast path answers: the
// stateless era, and the 2025 versions that a client sends on a stateless
// call after its initialize. The SDK supports each (an older one, or no
// header, goes to it).
var fastProtocols = map[string]bool{modernProtocol: true, "2025-11-25": true, "2025-06-18": true}

// Keys of params._meta the SDK reads.
const (
	metaPrefix        = "io.modelcontextprotocol/"
	metaProgressToken = "progressToken"
)

// fastCall is the tools/call the fast path takes, as serveFastCall read it.
type fastCall struct {
	id     jsonrpc.ID
	params *mcp.CallToolParamsRaw
	modern bool
}

// serveFastCall answers r if it is a tools/call the fast path takes (see
// above), and reports whether it did. serveMCP calls it for the requests
// that would go to the stateless handler.
func (g *Gateway) serveFastCall(w http.ResponseWriter, r *http.Request) bool {
	if g.noFastCall.Load() {
		return false
	}
	fc := g.fastCallOf(r)
	if fc == nil {
		return false
	}
	g.fastCalls.Add(1)
	req := &mcp.CallToolRequest{Params: fc.params, Extra: &mcp.RequestExtra{TokenInfo: auth.TokenInfoFromContext(r.Context()), Header: r.Header}}
	stamp := func(res *mcp.CallToolResult) *mcp.CallToolResult { return res }
	if fc.modern {
		stamp = stampComplete
	}
	// As the SDK's session: a 2026-07-28 call ends when its request does
	// (PropagateRequestCancellation); a 2025 one runs on to its answer,
	// since the SDK's stateless session waits for its calls as it closes.
	ctx := r.Context()
	if !fc.modern {
		ctx = context.WithoutCancel(ctx)
	}
	ctx = withReviewBudget(ctx, g.opts.MaxReviewsPerRequest)
	res, err := g.answerCall(ctx, req, stamp)
	if err == nil && fc.modern {
		g.annotateServerInfo(res)
	}
	// The SDK's header of a POST that carries a call, and its SEP-2575
	// status of a protocol-level error; any other answer is one SSE
	// message event.
	h := w.Header()
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("Content-Type", "text/event-stream")
	h.Set("Connection", "keep-alive")
	ab := getAnswerBuffer()
	defer ab.put()
	ab.b = append(ab.b[:0], "event: message\ndata: "...)
	var ok bool
	if err == nil {
		ab.b, ok = appendAnswer(ab.b, fc.id, res, g.impl, g.answerMeta)
	}
	if !ok {
		resp := &jsonrpc.Response{ID: fc.id, Error: err}
		if err == nil {
			raw, merr := marshalResult(res)
			if merr != nil {
				// As the SDK's connection does with a result it cannot encode.
				resp.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "encoding the result failed"}
			}
			resp.Result = raw
		}
		data, err := jsonrpc.EncodeMessage(resp)
		if err != nil {
			data, _ = jsonrpc.EncodeMessage(&jsonrpc.Response{ID: fc.id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "encoding the answer failed"}})
		}
		if status := errorStatus(fc.modern, resp.Error); status != 0 {
			h.Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write(data)
			return true
		}
		ab.b = append(ab.b, data...)
	}
	ab.b = append(ab.b, "\n\n"...)
	// Unlike the SDK, no flush: the event is the whole answer, and the
	// server writes it as the handler returns, in one write with a
	// Content-Length rather than two chunked ones (a tenth of a replica's
	// CPU in make bench-gateway's profile). Write keeps nothing of the
	// bytes, which go back to the pool as serveFastCall returns.
	_, _ = w.Write(ab.b)
	return true
}

// answerBuffer holds a fast call's answer as an SSE event until it is
// written: a buffer a call that the pool keeps. Nothing that holds its
// bytes outlives the call's put.
type answerBuffer struct {
	b []byte
}

var answerBuffers = sync.Pool{New: func() any { return &answerBuffer{} }}

// maxPooledAnswer bounds the buffer an answerBuffer keeps in the pool:
// one large result must not hold its size for good.
const maxPooledAnswer = 64 << 10

func getAnswerBuffer() *answerBuffer { return answerBuffers.Get().(*answerBuffer) }

// put gives ab back to the pool, empty; ab and what its bytes were are
// not to be used after.
func (ab *answerBuffer) put() {
	if cap(ab.b) > maxPooledAnswer {
		return
	}
	ab.b = ab.b[:0]
	answerBuffers.Put(ab)
}

// marshalResult encodes res as the SDK's connection does, with an encoder
// that does not escape HTML: that encoder calls res's MarshalJSON and
// compacts what it returns, which json.Marshal wrote compact already, so
// the bytes are MarshalJSON's own. Calling it directly spares the
// encoder's scan and copy of every result.
func marshalResult(res *mcp.CallToolResult) (json.RawMessage, error) {
	if res == nil {
		return json.RawMessage("null"), nil
	}
	return res.MarshalJSON()
}

// fastCallOf returns r's tools/call if the fast path takes it, else nil.
func (g *Gateway) fastCallOf(r *http.Request) *fastCall {
	h := r.Header
	switch {
	// Last-Event-Id as http.Header stores it: Values would canonicalize
	// "Last-Event-ID" into a new string at every call.
	case r.Method != http.MethodPost, h.Get("Mcp-Session-Id") != "", len(h["Last-Event-Id"]) > 0:
		return nil
	case !g.opts.AllowAnyHostOnLoopback && hostRefused(r):
		return nil
	}
	pv := h.Get("Mcp-Protocol-Version")
	if !fastProtocols[pv] || baseMediaType(h.Get("Content-Type")) != "application/json" || !acceptsJSONAndStream(h.Values("Accept")) {
		return nil
	}
	req := noteOf(r).req
	if req == nil || !req.IsCall() || req.Method != "tools/call" || len(req.Params) == 0 || req.Params[0] != '{' {
		return nil
	}
	modern := pv >= modernProtocol
	p, ok := fastParams(req.Params, pv, modern)
	if !ok || p.Name == placeholderTool("").Name {
		return nil
	}
	// An absent Mcp-Name is refused by the SDK even for the name "".
	if modern && (h.Get("Mcp-Method") != req.Method || p.Name == "" || h.Get("Mcp-Name") != p.Name) {
		return nil // the SDK's standard headers' check answers
	}
	return &fastCall{id: req.ID, params: p, modern: modern}
}

// fastParams reads the params of a tools/call: name, arguments (an
// object) and _meta, each at most once and spelled exactly; ok is false for
// anything else, or for a _meta that the SDK acts on (see fastMeta).
func fastParams(raw json.RawMessage, pv string, modern bool) (*mcp.CallToolParamsRaw, bool) {
	if !numbersFit(raw) {
		return nil, false
	}
	var known [3]member // name, arguments, _meta
	members, ok := objectMembers(raw, known[:0])
	if !ok {
		return nil, false
	}
	p := &mcp.CallToolParamsRaw{}
	// A 2026-07-28 call must carry its _meta triple.
	named, metaOK := false, !modern
	for _, m := range members {
		switch string(m.key) {
		case "name":
			name, ok := plainString(m.value)
			if !ok {
				return nil, false
			}
			p.Name, named = name, true
		case "arguments":
			if m.value[0] != '{' {
				return nil, false
			}
			p.Arguments = m.value
		case "_meta":
			meta, ok := fastMeta(m.value, pv, modern)
			if !ok {
				return nil, false
			}
			p.Meta, metaOK = meta, true
		default:
			return nil, false
		}
	}
	return p, named && metaOK
}

// numbersFit reports whether every number in raw, which is valid JSON, is
// one spec.NumberFits: the SDK decodes a call's params, its arguments and
// the capabilities in its _meta, into Go values, and a number that no
// float64 holds (1e400) fails that decoding, which the SDK answers with an
// error where the fast path would call the tool. Such a call is the SDK's.
// NumberFits is stricter than a float64's range (no nonzero number below
// the smallest float64, at most MaxNumberDigits digits), which sends a few
// more calls to the SDK, never fewer. It reads raw once; a number of more
// than 32 bytes allocates its string.
func numbersFit(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '"':
			for i++; i < len(raw) && raw[i] != '"'; i++ {
				if raw[i] == '\\' {
					i++
				}
			}
		case c == '-' || '0' <= c && c <= '9':
			j := i + 1
			for j < len(raw) && strings.IndexByte("0123456789.eE+-", raw[j]) >= 0 {
				j++
			}
			if !spec.NumberFits(string(raw[i:j])) {
				return false
			}
			i = j - 1
		}
	}
	return true
}

// maxFastMeta bounds the members of a _meta the fast path reads: the
// SDK's triple and a trace context are six; a longer one goes to the SDK.
const maxFastMeta = 16

// fastMeta reads a call's _meta, and reports whether it leaves the SDK
// nothing to do that the fast path does not: no progress token (the
// relay's), and of the SDK's own keys, in the 2025 era none, in 2026-07-28
// the protocol version of the header, a plain clientInfo, and
// clientCapabilities without elicitation or sampling (the relay's) that the
// SDK decodes. The meta it returns holds the other members, decoded as
// encoding/json decodes them (a trace context, a vendor's keys), nil if
// there are none: the SDK's triple is checked here and read by nothing
// after, and decoding it was a tenth of the allocations of a 2026-07-28
// call (BenchmarkCallOnTheWire). Keys are matched exactly, each at most
// once; anything else goes to the SDK.
func fastMeta(raw []byte, pv string, modern bool) (map[string]any, bool) {
	var known [maxFastMeta]member
	members, ok := objectMembers(raw, known[:0])
	if !ok {
		return nil, false
	}
	var meta map[string]any
	versioned, capable := false, false
	for _, m := range members {
		// string(m.key) compared is not copied; kept, it is.
		switch {
		case string(m.key) == metaProgressToken:
			return nil, false
		case !bytes.HasPrefix(m.key, []byte(metaPrefix)):
			var v any
			if json.Unmarshal(m.value, &v) != nil {
				return nil, false
			}
			if meta == nil {
				meta = make(map[string]any, len(members))
			}
			meta[string(m.key)] = v
		case !modern:
			return nil, false
		case string(m.key) == mcp.MetaKeyProtocolVersion:
			v, ok := plainBytes(m.value)
			if !ok || string(v) != pv {
				return nil, false
			}
			versioned = true
		case string(m.key) == mcp.MetaKeyClientInfo:
			if !stringMembers(m.value, "name", "title", "description", "version", "websiteUrl") {
				return nil, false
			}
		case string(m.key) == mcp.MetaKeyClientCapabilities:
			if !plainCapabilities(m.value) {
				return nil, false
			}
			capable = true
		default:
			return nil, false
		}
	}
	if modern && (!versioned || !capable) {
		return nil, false
	}
	return meta, true
}

// stringMembers reports whether the JSON value raw is an object of string
// members with keys among keys, each at most once.
func stringMembers(raw []byte, keys ...string) bool {
	var known [8]member
	if len(keys) > len(known) {
		return false
	}
	members, ok := objectMembers(raw, known[:len(keys):len(keys)][:0])
	if !ok {
		return false
	}
	for _, m := range members {
		if m.value[0] != '"' || !slices.Contains(keys, string(m.key)) {
			return false
		}
	}
	return true
}

// plainCapabilities reports whether the JSON value raw is a client's
// capabilities that the fast path serves: an object of experimental and
// extensions (objects) and roots (an object of at most listChanged, a
// boolean), each at most once.
func plainCapabilities(raw []byte) bool {
	var known [3]member
	members, ok := objectMembers(raw, known[:0])
	if !ok {
		return false
	}
	for _, m := range members {
		switch string(m.key) {
		case "experimental", "extensions":
			if m.value[0] != '{' {
				return false
			}
		case "roots":
			var listChanged [1]member
			roots, ok := objectMembers(m.value, listChanged[:0])
			if !ok {
				return false
			}
			for _, r := range roots {
				if string(r.key) != "listChanged" || (string(r.value) != "true" && string(r.value) != "false") {
					return false
				}
			}
		default:
			return false // elicitation, sampling, or one the fast path does not know
		}
	}
	return true
}

// member is one member of an object that objectMembers read: its key,
// unquoted, and its value, each a slice of the object's bytes.
type member struct {
	key   []byte
	value json.RawMessage
}

// objectMembers returns the members of the JSON object raw, in order,
// with keys spelled as sent, appended to into (whose length is zero); ok
// is false if raw is not an object (or has anything but white space after
// it), has one of its keys twice, holds invalid UTF-8, or has more than
// cap(into) members. cap(into) is the number of keys the caller knows: a
// member past them is one it leaves to the SDK anyway, and it bounds the
// search for a repeated key. Keys and values are slices of raw, and into
// is the caller's (an array on its stack): a call allocates nothing.
//
// It reads raw with jsontext, the tokenizer of encoding/json/v2, which
// allocates nothing of its own, where encoding/json's streaming Decoder
// was a tenth of a replica's CPU in make bench-gateway (a new 512-byte
// buffer, an error built and dropped after every value). jsontext refuses
// more than encoding/json reads (invalid UTF-8, a lone surrogate escape);
// the callers leave each such request to the SDK, which reads it as
// before. Keys repeated inside the values are left as encoding/json leaves
// them (memberOptions): jsontext's own search for them builds a map of
// every key of a large object, 16 MiB for a request of 1 MiB.
func objectMembers(raw []byte, into []member) ([]member, bool) {
	mr := readerOf(raw)
	defer mr.release()
	dec := mr.dec
	if t, err := dec.ReadToken(); err != nil || t.Kind() != '{' {
		return nil, false
	}
	out, max := into[:0], cap(into)
	for dec.PeekKind() == '"' {
		if len(out) == max {
			return nil, false
		}
		// The key as sent: without escapes, which decoders read alike. A
		// slice of raw, as the value below: whatever the decoder's own
		// buffer holds goes back to the pool with it.
		name, err := dec.ReadValue()
		if err != nil {
			return nil, false
		}
		nameEnd := int(dec.InputOffset())
		key, ok := plainBytes(raw[nameEnd-len(name) : nameEnd : nameEnd])
		if !ok {
			return nil, false
		}
		v, err := dec.ReadValue()
		if err != nil {
			return nil, false
		}
		for _, m := range out {
			if bytes.Equal(m.key, key) {
				return nil, false
			}
		}
		// The value as sent, a slice of raw: the decoder checked it, and
		// nothing is copied.
		end := int(dec.InputOffset())
		out = append(out, member{key: key, value: raw[end-len(v) : end : end]})
	}
	if t, err := dec.ReadToken(); err != nil || t.Kind() != '}' {
		return nil, false
	}
	// Nothing after it: the SDK's decoder would read the first value
	// only, and ignore the rest.
	if len(bytes.TrimLeft(raw[dec.InputOffset():], " \t\r\n")) != 0 {
		return nil, false
	}
	return out, true
}

// memberReader is objectMembers' decoder, kept in a pool: a jsontext
// Decoder reads a bytes.Buffer in place, and its state is worth keeping.
type memberReader struct {
	buf bytes.Buffer
	dec *jsontext.Decoder
}

var memberReaders = sync.Pool{New: func() any {
	mr := &memberReader{}
	mr.dec = jsontext.NewDecoder(&mr.buf, memberOptions)
	return mr
}}

// memberOptions are the options of every memberReader (Reset clears them):
// a key repeated inside a value is not looked for, as encoding/json does
// not, so the decoder keeps no names.
var memberOptions = jsontext.AllowDuplicateNames(true)

// readerOf takes a memberReader from the pool, its decoder at the start
// of raw, which it reads in place; release gives it back.
func readerOf(raw []byte) *memberReader {
	mr := memberReaders.Get().(*memberReader)
	mr.buf = *bytes.NewBuffer(raw)
	mr.dec.Reset(&mr.buf, memberOptions)
	return mr
}

// release lets go of the bytes read and puts mr back in the pool.
func (mr *memberReader) release() {
	mr.buf = bytes.Buffer{}
	mr.dec.Reset(&mr.buf, memberOptions)
	memberReaders.Put(mr)
}

// plainString returns the JSON string raw if it has no escapes and only
// printable ASCII: a tool name, read alike by every decoder.
func plainString(raw json.RawMessage) (string, bool) {
	s, ok := plainBytes(raw)
	if !ok {
		return "", false
	}
	return string(s), true
}

// plainBytes is plainString's string, unquoted, without a copy.
func plainBytes(raw []byte) ([]byte, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, false
	}
	s := raw[1 : len(raw)-1]
	for _, c := range s {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return nil, false
		}
	}
	return s, true
}

// annotateServerInfo sets the server's identity in a 2026-07-28 result's
// _meta, as the SDK does to every result of that era.
func (g *Gateway) annotateServerInfo(res *mcp.CallToolResult) {
	if res == nil {
		return
	}
	if res.Meta == nil {
		res.Meta = mcp.Meta{}
	}
	if _, ok := res.Meta[mcp.MetaKeyServerInfo]; !ok {
		res.Meta[mcp.MetaKeyServerInfo] = g.impl
	}
}

// errorStatus is the HTTP status SEP-2575 gives a protocol-level error in
// the 2026-07-28 era, as the SDK maps them; 0 for an SSE answer.
func errorStatus(modern bool, err error) int {
	var jerr *jsonrpc.Error
	if !modern || !errors.As(err, &jerr) {
		return 0
	}
	switch jerr.Code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, mcp.CodeUnsupportedProtocolVersion, mcp.CodeMissingRequiredClientCapabilities:
		return http.StatusBadRequest
	}
	return 0
}

// hostRefused reports whether the SDK's DNS rebinding protection would
// refuse r: a request to a loopback address whose Host is not loopback.
func hostRefused(r *http.Request) bool {
	a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return ok && a != nil && loopbackAddr(a) && !isLoopback(r.Host)
}

// loopbackAddr is isLoopback(a.String()), without building the string
// (two allocations) for a TCP address, the server's: its IP is loopback
// exactly when the IP in its string is (a zone does not change it, and an
// IP that is none is neither).
func loopbackAddr(a net.Addr) bool {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.IsLoopback()
	}
	return isLoopback(a.String())
}

// isLoopback is the SDK's test of a loopback address or host.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// baseMediaType is v's media type without parameters, lower case, as
// mime.ParseMediaType reads it; "" if it cannot. The spelling every client
// sends is its own answer, without the map of parameters ParseMediaType
// makes.
func baseMediaType(v string) string {
	if v == "application/json" {
		return v
	}
	t, _, err := mime.ParseMediaType(v)
	if err != nil {
		return ""
	}
	return t
}

// acceptsJSONAndStream is the SDK's test of a POST's Accept: it must take
// both JSON and an event stream.
func acceptsJSONAndStream(values []string) bool {
	var jsonOK, streamOK bool
	for _, value := range values {
		for raw := range strings.SplitSeq(value, ",") {
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK && streamOK
}
