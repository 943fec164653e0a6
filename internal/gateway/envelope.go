package gateway

import (
	"encoding/json"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// decodeRequest decodes one JSON-RPC message as [jsonrpc.DecodeMessage]
// does. Every use of the SDK's decoder costs a fresh 32 KiB buffer, and
// DecodeMessage uses it twice: two thirds of what the gateway allocated
// for a call once the fast path had done without the SDK's session. So
// the common request, spelled plainly, is read here, with encoding/json;
// anything else (a response, an escaped or repeated key, a member the
// envelope does not have, an id other than a plain integer or string,
// params that are not an object or an array, nesting deeper than
// maxPlainDepth) takes the SDK's decoder, which decides as it always does.
// FuzzDecodeRequest holds the two to the same answer.
func decodeRequest(msg []byte) (jsonrpc.Message, error) {
	if req := plainRequest(msg); req != nil {
		return req, nil
	}
	return jsonrpc.DecodeMessage(msg)
}

// maxPlainDepth bounds the nesting of a message plainRequest reads: the
// SDK's decoder refuses more than 1000 levels, and real requests have a
// handful.
const maxPlainDepth = 64

// plainRequest is decodeRequest's own reading of msg, or nil to leave it
// to the SDK.
func plainRequest(msg []byte) *jsonrpc.Request {
	if !shallow(msg, maxPlainDepth) {
		return nil
	}
	members, ok := objectMembers(msg)
	if !ok {
		return nil
	}
	req := &jsonrpc.Request{}
	var version, method bool
	for _, m := range members {
		switch m.key {
		case "jsonrpc":
			version = string(m.value) == `"2.0"`
		case "method":
			s, ok := plainString(m.value)
			if !ok {
				return nil
			}
			req.Method, method = s, true
		case "id":
			id, ok := plainID(m.value)
			if !ok {
				return nil
			}
			req.ID = id
		case "params":
			if c := m.value[0]; c != '{' && c != '[' {
				return nil
			}
			req.Params = m.value
		default:
			return nil
		}
	}
	if !version || !method {
		return nil
	}
	return req
}

// plainID reads an id that is a JSON string without escapes, or an
// integer of at most 15 digits, which a float64 holds exactly (the SDK's
// decoder reads a number id as one).
func plainID(raw json.RawMessage) (jsonrpc.ID, bool) {
	if s, ok := plainString(raw); ok {
		id, err := jsonrpc.MakeID(s)
		return id, err == nil
	}
	digits := raw
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 15 || (digits[0] == '0' && len(digits) > 1) {
		return jsonrpc.ID{}, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return jsonrpc.ID{}, false
		}
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(float64(n))
	return id, err == nil
}

// shallow reports whether the JSON text b nests objects and arrays at most
// max deep, scanning as the SDK's decoder does before it decodes.
func shallow(b []byte, max int) bool {
	depth := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			// Skip the string: to its closing quote, past escapes.
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			if depth++; depth > max {
				return false
			}
		case '}', ']':
			depth--
		}
	}
	return true
}

// objectMembers returns the members of the JSON object raw, in order,
// with keys spelled as sent and values as slices of raw; ok is false if
// raw is not one valid JSON object, or a key is escaped (decoders differ in
// what they match it with) or is there twice. It validates raw first, so
// that finding where each value ends is all that is left.
func objectMembers(raw []byte) ([]member, bool) {
	if !json.Valid(raw) {
		return nil, false
	}
	return validMembers(raw)
}

// validMembers is objectMembers of raw known to be valid JSON.
func validMembers(raw []byte) ([]member, bool) {
	i := skipSpace(raw, 0)
	if raw[i] != '{' {
		return nil, false
	}
	out := make([]member, 0, 4)
	i = skipSpace(raw, i+1)
	if raw[i] == '}' {
		return out, true
	}
	for {
		end := stringEnd(raw, i)
		key, ok := plainString(raw[i:end])
		if !ok {
			return nil, false
		}
		for _, m := range out {
			if m.key == key {
				return nil, false
			}
		}
		i = skipSpace(raw, skipSpace(raw, end)+1) // past the colon
		end = valueEnd(raw, i)
		out = append(out, member{key: key, value: raw[i:end:end]})
		i = skipSpace(raw, end)
		if raw[i] == '}' {
			return out, true
		}
		i = skipSpace(raw, i+1) // past the comma
	}
}

// validElements returns the elements of raw, valid JSON, if it is an
// array.
func validElements(raw []byte) ([][]byte, bool) {
	i := skipSpace(raw, 0)
	if raw[i] != '[' {
		return nil, false
	}
	out := [][]byte{}
	i = skipSpace(raw, i+1)
	if raw[i] == ']' {
		return out, true
	}
	for {
		end := valueEnd(raw, i)
		out = append(out, raw[i:end:end])
		i = skipSpace(raw, end)
		if raw[i] == ']' {
			return out, true
		}
		i = skipSpace(raw, i+1) // past the comma
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// stringEnd returns the index after the valid JSON string at b[i].
func stringEnd(b []byte, i int) int {
	for i++; b[i] != '"'; i++ {
		if b[i] == '\\' {
			i++
		}
	}
	return i + 1
}

// valueEnd returns the index after the valid JSON value at b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch b[i] {
			case '"':
				i = stringEnd(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\r' && b[i] != '\n' {
		i++
	}
	return i
}

type member struct {
	key   string
	value json.RawMessage
}

// plainString returns the JSON string raw if it has no escapes and only
// printable ASCII, which every decoder reads alike.
func plainString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	s := raw[1 : len(raw)-1]
	for _, c := range s {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return "", false
		}
	}
	return string(s), true
}
