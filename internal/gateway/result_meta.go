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
// changed in place.
func dropReservedMeta(res *mcp.CallToolResult) *mcp.CallToolResult {
	if res == nil || len(res.Meta) == 0 {
		return res
	}
	for k := range res.Meta {
		if reservedMetaKey(k) {
			delete(res.Meta, k)
		}
	}
	if len(res.Meta) == 0 {
		res.Meta = nil
	}
	return res
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
