package gateway

import (
	"bytes"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// readRequest returns the JSON-RPC request msg holds, as the SDK's
// jsonrpc.DecodeMessage reads it, or nil if msg is none (a response, or
// a message the SDK cannot decode).
//
// The hot message, a call as the SDK's clients send it, is read by
// plainRequest with encoding/json, and every other by the SDK:
// DecodeMessage runs two streaming decoders, each with a new 32 KiB
// buffer (the envelope, then the method again), which were two thirds of
// the bytes a replica allocated per tools/call in make bench-gateway, and
// so of its garbage collections.
func readRequest(msg []byte) *jsonrpc.Request {
	if req := plainRequest(msg); req != nil {
		return req
	}
	m, err := jsonrpc.DecodeMessage(msg)
	if err != nil {
		return nil
	}
	req, _ := m.(*jsonrpc.Request)
	return req
}

// sdkMaxDepth is the nesting depth past which the SDK's decoder refuses a
// message.
const sdkMaxDepth = 1000

// plainRequest reads msg if it is a call in the plainest form: one object
// of exactly the members jsonrpc ("2.0"), id (a string, or an integer of
// at most 15 digits, which a float64 holds exactly, as the SDK's decoder
// reads it), method (a string) and params (an object), each once, with
// keys and strings spelled without escapes, and nothing after it but
// white space; and with at most sdkMaxDepth brackets in all, so that it
// cannot nest past the SDK's bound. It returns nil for anything else,
// which readRequest leaves to the SDK. The SDK reads what plainRequest
// takes alike (FuzzPlainRequest).
func plainRequest(msg []byte) *jsonrpc.Request {
	if bytes.Count(msg, []byte{'{'})+bytes.Count(msg, []byte{'['}) > sdkMaxDepth {
		return nil
	}
	var known [4]member
	members, ok := objectMembers(msg, known[:0])
	if !ok || len(members) != 4 {
		return nil
	}
	req := &jsonrpc.Request{}
	var version, hasID, hasMethod bool
	for _, m := range members {
		switch string(m.key) {
		case "jsonrpc":
			v, ok := plainString(m.value)
			if !ok || v != "2.0" {
				return nil
			}
			version = true
		case "id":
			id, ok := plainID(m.value)
			if !ok {
				return nil
			}
			req.ID, hasID = id, true
		case "method":
			method, ok := plainString(m.value)
			if !ok {
				return nil
			}
			req.Method, hasMethod = method, true
		case "params":
			if m.value[0] != '{' {
				return nil
			}
			req.Params = m.value
		default:
			return nil
		}
	}
	if !version || !hasID || !hasMethod || req.Params == nil {
		return nil
	}
	return req
}

// plainID is a request id that the SDK reads as plainRequest does: a
// string without escapes, or digits only, few enough for a float64.
func plainID(raw []byte) (jsonrpc.ID, bool) {
	if s, ok := plainString(raw); ok {
		id, err := jsonrpc.MakeID(s)
		return id, err == nil
	}
	if len(raw) == 0 || len(raw) > 15 {
		return jsonrpc.ID{}, false
	}
	for _, c := range raw {
		if c < '0' || c > '9' {
			return jsonrpc.ID{}, false
		}
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return jsonrpc.ID{}, false
	}
	// As the SDK's decoder gives it to MakeID.
	id, err := jsonrpc.MakeID(float64(n))
	return id, err == nil
}
