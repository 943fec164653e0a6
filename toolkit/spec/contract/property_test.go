package contract_test

import (
	"encoding/json"
	"testing"

	"github.com/toolplane/toolplane/toolkit/internal/tabletest"
	"github.com/toolplane/toolplane/toolkit/spec"
	"github.com/toolplane/toolplane/toolkit/spec/contract"
)

// edit decodes a schema, applies f to its root object and encodes it again.
func edit(t testing.TB, raw json.RawMessage, f func(root map[string]any)) json.RawMessage {
	t.Helper()
	var root map[string]any
	if err := json.Unmarshal(raw, &root); err != nil {
		t.Fatal(err)
	}
	f(root)
	b, err := json.Marshal(root)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCompareProperties checks, over realistic generated schemas (nested
// objects, arrays, enums, formats and bounds), what must hold of any
// schema: it equals itself; a new optional property is compatible and a
// new required one breaking; a property removed is breaking.
func TestCompareProperties(t *testing.T) {
	for _, tool := range tabletest.Tools(200) {
		v := contract.FromTableTool(tool)
		if changes := contract.Compare(v, v); changes != nil {
			t.Fatalf("%s: compared with itself: %v", tool.Name, changes)
		}

		opt := v
		opt.InputSchema = edit(t, v.InputSchema, func(root map[string]any) {
			root["properties"].(map[string]any)["zz_added"] = map[string]any{"type": "string"}
		})
		changes := contract.Compare(v, opt)
		if len(changes) != 1 || changes[0].Breaking || changes[0].Path != "inputSchema.properties.zz_added" {
			t.Fatalf("%s: a new optional property: %v", tool.Name, changes)
		}

		req := v
		req.InputSchema = edit(t, opt.InputSchema, func(root map[string]any) {
			r, _ := root["required"].([]any)
			root["required"] = append(r, "zz_added")
		})
		if b := contract.Breaking(contract.Compare(v, req)); len(b) != 1 || b[0].Path != "inputSchema.properties.zz_added" {
			t.Fatalf("%s: a new required property: %v", tool.Name, b)
		}

		var gone string
		rm := v
		rm.InputSchema = edit(t, v.InputSchema, func(root map[string]any) {
			for name := range root["properties"].(map[string]any) {
				gone = name
				break
			}
			delete(root["properties"].(map[string]any), gone)
		})
		if b := contract.Breaking(contract.Compare(v, rm)); len(b) == 0 {
			t.Fatalf("%s: property %s removed, yet nothing breaking", tool.Name, gone)
		}
		if spec.SchemaDigest(v.InputSchema, v.OutputSchema, v.Annotations, nil) == spec.SchemaDigest(rm.InputSchema, rm.OutputSchema, rm.Annotations, nil) {
			t.Fatalf("%s: a removed property left the digest as it was", tool.Name)
		}
	}
}

// FuzzCompare feeds hostile schema pairs to the classifier, as a workload
// may serve them to the operator: it must not panic, and a schema compared
// with itself has no change.
func FuzzCompare(f *testing.F) {
	// Small seeds: the engine mutates them faster than whole generated
	// tools, and they hold every keyword the classifier reads.
	f.Add([]byte(`{"type":"object","properties":{"a":{"type":"string","enum":["x","y"],"maxLength":3}},"required":["a"]}`),
		[]byte(`{"type":"object","properties":{"a":{"type":["string","null"],"pattern":"^x"},"b":{"type":"array","items":{"type":"integer","minimum":1e3}}},"required":["b"],"additionalProperties":false}`))
	f.Add([]byte(`{"$ref":"#"}`), []byte(`{"$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/a"}}}`))
	f.Add([]byte(`{"type":"object","properties":{"a":{"anyOf":[true,false,{"enum":[1,"1",1.0]}]}}}`), []byte(`{"type":["object",3],"minimum":"x","multipleOf":0}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		_ = contract.Compare(contract.Version{InputSchema: a, OutputSchema: b}, contract.Version{InputSchema: b, OutputSchema: a})
		if json.Valid(a) {
			if changes := contract.Compare(contract.Version{InputSchema: a}, contract.Version{InputSchema: a}); changes != nil {
				t.Fatalf("%s compared with itself: %v", a, changes)
			}
		}
	})
}
