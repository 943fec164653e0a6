package server_test

import (
	"bytes"
	"encoding/json"
	"testing"

	googleschema "github.com/google/jsonschema-go/jsonschema"
	santhosh "github.com/santhosh-tekuri/jsonschema/v6"
)

// TestServedSchemasAreValid checks every schema the spec document serves
// with two validators that did not produce it: the JSON Schema 2020-12
// metaschema, and google/jsonschema-go (the schema library of the MCP Go
// SDK), which must resolve it.
func TestServedSchemasAreValid(t *testing.T) {
	s := newTestServer(t, nil)
	doc, _ := s.document(t)
	meta := metaschema2020(t)
	for _, tool := range doc.Tools {
		for kind, raw := range map[string]json.RawMessage{"input": tool.InputSchema, "output": tool.OutputSchema} {
			if len(raw) == 0 {
				if kind == "input" {
					t.Errorf("%s: no input schema", tool.Name)
				}
				continue
			}
			if err := validSchema(meta, raw); err != nil {
				t.Errorf("%s %s schema %s: %v", tool.Name, kind, raw, err)
			}
		}
	}
}

func metaschema2020(t testing.TB) *santhosh.Schema {
	t.Helper()
	m, err := santhosh.NewCompiler().Compile("https://json-schema.org/draft/2020-12/schema")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func validSchema(meta *santhosh.Schema, raw json.RawMessage) error {
	inst, err := santhosh.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	if err := meta.Validate(inst); err != nil {
		return err
	}
	var gs googleschema.Schema
	if err := json.Unmarshal(raw, &gs); err != nil {
		return err
	}
	_, err = gs.Resolve(&googleschema.ResolveOptions{ValidateDefaults: true})
	return err
}
