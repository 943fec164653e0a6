package gateway

import (
	"encoding/json"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// gatewayMetaPrefix is the _meta prefix of the keys the gateway sets
// itself (retryAfterMeta).
const gatewayMetaPrefix = "toolplane.io/"

// dropReservedMeta removes from a workload's result the _meta keys that
// are not the workload's to set: those of a prefix MCP reserves (its
// second label is modelcontextprotocol or mcp, as from the 2025-11-25
// revision, or a label followed by another is, as the 2025-06-18 one has
// it), protocol metadata of the workload's own hop to the gateway, such as its
// io.modelcontextprotocol/serverInfo, and the gateway's own toolplane.io/
// keys. The client's server is the gateway: what it reads under those keys
// is the gateway's word, which the gateway then sets (annotateServerInfo,
// the SDK), never a tenant's. Other keys (a vendor's) pass unchanged. The
// result is the call's own, decoded from the workload's answer, and is
// changed in place; so are the questions of an input_required result
// (askMeta), which the client reads as the gateway's too.
func dropReservedMeta(res *mcp.CallToolResult) *mcp.CallToolResult {
	if res == nil {
		return res
	}
	res.Meta = askMeta(res.Meta)
	for _, ir := range res.InputRequests {
		if p, ok := ir.(metaParams); ok {
			p.SetMeta(askMeta(p.GetMeta()))
		}
	}
	return res
}

// metaParams are the params of a request, whose _meta can be read and set.
type metaParams interface {
	GetMeta() map[string]any
	SetMeta(map[string]any)
}

// askMeta is m, the _meta of what a workload sends its client in the
// gateway's name (a result, or a question it asks during a call: an
// elicitation, a sampling request, relay.go), without the keys that are
// not the workload's to set, as dropReservedMeta has it; nil when none is
// left. A related task there is forged: the gateway relays no task's
// requests, and a client would file the question, or its answer, under a
// task it holds. m is not changed: a relayed request's params may be
// shared with the SDK.
func askMeta(m map[string]any) map[string]any {
	var out map[string]any
	for k, v := range m {
		if reservedMetaKey(k) {
			continue
		}
		if out == nil {
			out = make(map[string]any, len(m))
		}
		out[k] = v
	}
	return out
}

// relayMeta is dropReservedMeta for an answer the gateway relays as its
// backend's JSON (a task, a task's result), whose members m are changed in
// place: its _meta loses the keys that are not the workload's to set, and
// gains own, the gateway's word under such keys. A _meta that is not an
// object is none, and one left empty goes.
func relayMeta(m map[string]json.RawMessage, own map[string]any) {
	var meta map[string]json.RawMessage
	if json.Unmarshal(m["_meta"], &meta) != nil || meta == nil {
		meta = map[string]json.RawMessage{}
	}
	for k := range meta {
		if reservedMetaKey(k) {
			delete(meta, k)
		}
	}
	for k, v := range own {
		meta[k], _ = json.Marshal(v)
	}
	if len(meta) == 0 {
		delete(m, "_meta")
		return
	}
	m["_meta"], _ = json.Marshal(meta)
}

// reservedMetaKey reports whether a _meta key's prefix is MCP's or the
// gateway's.
func reservedMetaKey(k string) bool {
	slash := strings.IndexByte(k, '/')
	if slash < 0 {
		return false
	}
	prefix := k[:slash]
	if strings.EqualFold(prefix+"/", gatewayMetaPrefix) {
		return true
	}
	mcpLabel := func(l string) bool {
		return strings.EqualFold(l, "modelcontextprotocol") || strings.EqualFold(l, "mcp")
	}
	labels := strings.Split(prefix, ".")
	if len(labels) >= 2 && mcpLabel(labels[1]) {
		return true // 2025-11-25: the second label (io.modelcontextprotocol/, dev.mcp/)
	}
	for _, l := range labels[:len(labels)-1] {
		if mcpLabel(l) {
			return true // 2025-06-18: a label followed by another (modelcontextprotocol.io/)
		}
	}
	return false
}
