package spec

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// CanonicalJSON returns raw in toolplane's canonical form: compact, object
// keys sorted bytewise, numbers written as they arrived. Two documents that
// differ only in whitespace or key order have the same canonical form; "1"
// and "1.0" do not. Invalid JSON is an error.
func CanonicalJSON(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	// encoding/json writes map keys sorted and json.Number as its text.
	return json.Marshal(v)
}

// SchemaDigest returns "sha256:<hex>" over a tool's contract with its
// callers: the canonical JSON ([CanonicalJSON]) of the object
//
//	{"annotations": …, "execution": …, "inputSchema": …, "outputSchema": …}
//
// where an absent member is left out, and an execution whose taskSupport
// is MCP's default (forbidden) is absent: a tool that says so and one that
// leaves it out have the same contract, and digests from before execution
// existed stay as they were. Execution is part of the contract because it
// changes how a caller must call the tool. Descriptions outside the schemas, the
// title and _meta are not part of it. Equal contracts give equal digests
// whatever whitespace or key order their schemas arrived with, so agents can
// cache a tool's schema by its digest and notice drift.
func SchemaDigest(inputSchema, outputSchema json.RawMessage, annotations *Annotations, execution *Execution) string {
	parts := map[string]json.RawMessage{}
	add := func(key string, raw []byte) {
		if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			return
		}
		if c, err := CanonicalJSON(raw); err == nil {
			parts[key] = c
			return
		}
		// Not JSON: digest it as a string of its bytes, still stable.
		b, _ := json.Marshal(string(raw))
		parts[key] = b
	}
	add("inputSchema", inputSchema)
	add("outputSchema", outputSchema)
	if annotations != nil {
		b, _ := json.Marshal(annotations)
		add("annotations", b)
	}
	if execution != nil && execution.TaskSupport != "" && execution.TaskSupport != TaskSupportForbidden {
		b, _ := json.Marshal(execution)
		add("execution", b)
	}
	b, _ := json.Marshal(parts)
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// SchemaDigest returns [SchemaDigest] of the tool's schemas, annotations
// and execution.
func (t *Tool) SchemaDigest() string {
	return SchemaDigest(t.InputSchema, t.OutputSchema, t.Annotations, t.Execution)
}
