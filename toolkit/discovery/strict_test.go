package discovery_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolplane/toolplane/toolkit/discovery"
	"github.com/toolplane/toolplane/toolkit/internal/tabletest"
)

// compile checks schema against the JSON Schema 2020-12 metaschema and
// returns it compiled, to validate instances.
func compile(t *testing.T, schema []byte) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("mem:///strict.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("mem:///strict.json")
	if err != nil {
		t.Fatalf("not a valid JSON Schema 2020-12: %v\n%s", err, schema)
	}
	return sch
}

func validate(t *testing.T, sch *jsonschema.Schema, instance string) error {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(instance))
	if err != nil {
		t.Fatal(err)
	}
	return sch.Validate(v)
}

// Keywords and formats that OpenAI documents for strict mode. This list is
// written from the documentation, independently of the converter's.
var (
	openAIKeywords = []string{
		"type", "description", "title", "enum", "properties", "required", "additionalProperties",
		"items", "anyOf", "$ref", "$defs", "definitions", "pattern", "format",
		"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems",
	}
	openAIFormats = []string{"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
	openAITypes   = []string{"string", "number", "integer", "boolean", "object", "array", "null"}
)

// strictViolations lists where schema breaks OpenAI's strict-mode rules.
func strictViolations(schema any) []string {
	var out []string
	var walk func(v any, path string)
	walk = func(v any, path string) {
		s, ok := v.(map[string]any)
		if !ok {
			out = append(out, path+": not an object schema")
			return
		}
		for k := range s {
			if !slices.Contains(openAIKeywords, k) {
				out = append(out, fmt.Sprintf("%s: unsupported keyword %s", path, k))
			}
		}
		if _, ok := s["$ref"]; ok && len(s) > 1 {
			out = append(out, path+": $ref with siblings")
		}
		var types []string
		switch ty := s["type"].(type) {
		case string:
			types = []string{ty}
		case []any:
			for _, x := range ty {
				types = append(types, fmt.Sprint(x))
			}
		}
		for _, ty := range types {
			if !slices.Contains(openAITypes, ty) {
				out = append(out, path+": type "+ty)
			}
		}
		_, hasRef := s["$ref"]
		_, hasAny := s["anyOf"]
		if len(types) == 0 && !hasRef && !hasAny {
			out = append(out, path+": no type")
		}
		if f, ok := s["format"].(string); ok && !slices.Contains(openAIFormats, f) {
			out = append(out, path+": format "+f)
		}
		if slices.Contains(types, "object") {
			if s["additionalProperties"] != false {
				out = append(out, path+": additionalProperties is not false")
			}
			props, _ := s["properties"].(map[string]any)
			if props == nil {
				out = append(out, path+": object without properties")
			}
			var req []string
			for _, r := range s["required"].([]any) {
				req = append(req, r.(string))
			}
			slices.Sort(req)
			if keys := slices.Sorted(maps.Keys(props)); !slices.Equal(keys, req) {
				out = append(out, fmt.Sprintf("%s: required %v, properties %v", path, req, keys))
			}
			for k, p := range props {
				walk(p, path+"/properties/"+k)
			}
		}
		if slices.Contains(types, "array") {
			walk(s["items"], path+"/items")
		}
		if alts, ok := s["anyOf"].([]any); ok {
			for i, a := range alts {
				walk(a, fmt.Sprintf("%s/anyOf/%d", path, i))
			}
		}
		if defs, ok := s["$defs"].(map[string]any); ok {
			for k, d := range defs {
				walk(d, path+"/$defs/"+k)
			}
		}
	}
	walk(schema, "#")
	if root, ok := schema.(map[string]any); ok {
		if root["type"] != "object" {
			out = append(out, "#: root is not of type object")
		}
		if _, ok := root["anyOf"]; ok {
			out = append(out, "#: root is anyOf")
		}
	}
	return out
}

// admitsNull reports whether a strict property schema accepts null.
func admitsNull(s map[string]any) bool {
	if ty, ok := s["type"].([]any); ok && slices.Contains(ty, any("null")) {
		if enum, ok := s["enum"].([]any); ok {
			return slices.Contains(enum, nil)
		}
		return true
	}
	if alts, ok := s["anyOf"].([]any); ok {
		for _, a := range alts {
			if am, ok := a.(map[string]any); ok && am["type"] == "null" {
				return true
			}
		}
	}
	return false
}

// optionalsNullable checks that every property optional in orig admits null
// in strict, object by object, and that required ones were left alone.
func optionalsNullable(t *testing.T, orig, strict map[string]any, path string) {
	t.Helper()
	props, _ := orig["properties"].(map[string]any)
	sprops, _ := strict["properties"].(map[string]any)
	req, _ := orig["required"].([]any)
	for name, p := range props {
		sp, _ := sprops[name].(map[string]any)
		if sp == nil {
			t.Errorf("%s/properties/%s dropped", path, name)
			continue
		}
		if !slices.Contains(req, any(name)) && !admitsNull(sp) {
			t.Errorf("%s/properties/%s is optional but does not admit null: %v", path, name, sp)
		}
		if pm, ok := p.(map[string]any); ok && pm["type"] == "object" {
			optionalsNullable(t, pm, sp, path+"/properties/"+name)
		}
	}
}

const customerSchema = `{
  "type": "object",
  "properties": {
    "id": {"type": "string", "description": "Customer id.", "minLength": 1, "maxLength": 64},
    "status": {"type": "string", "enum": ["active", "archived"], "default": "active"},
    "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10},
    "since": {"type": "string", "format": "date-time"},
    "site": {"type": "string", "format": "uri"},
    "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
    "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string"}}, "required": ["city"]},
    "manager": {"$ref": "#/$defs/Person"},
    "owner": {"$ref": "#/$defs/Person", "description": "Who owns the account."},
    "kind": {"const": "customer"},
    "contact": {"oneOf": [{"type": "string", "format": "email"}, {"type": "object", "properties": {"phone": {"type": "string"}}, "required": ["phone"]}]},
    "vip": {"allOf": [{"type": "boolean"}]}
  },
  "required": ["id", "owner"],
  "$defs": {
    "Person": {"type": "object", "properties": {"name": {"type": "string"}, "reports": {"type": "array", "items": {"$ref": "#/$defs/Person"}}}, "required": ["name"]}
  }
}`

func TestStrictSchema(t *testing.T) {
	out, err := discovery.StrictSchema(json.RawMessage(customerSchema))
	if err != nil {
		t.Fatal(err)
	}
	strict, orig := unmarshal(t, out), unmarshal(t, []byte(customerSchema))
	for _, v := range strictViolations(strict) {
		t.Error(v)
	}
	optionalsNullable(t, orig, strict, "#")
	sch := compile(t, out)

	props := strict["properties"].(map[string]any)
	if d := props["id"].(map[string]any)["description"]; d != "Customer id. (maxLength: 64; minLength: 1)" {
		t.Errorf("id description = %q: dropped constraints should be hinted", d)
	}
	if d := props["limit"].(map[string]any)["description"]; d != "(default: 10)" {
		t.Errorf("limit description = %q", d)
	}

	// The nulls a strict-mode model sends for everything optional.
	valid := `{"id": "c-1", "status": null, "limit": null, "since": null, "site": null, "tags": null,
		"address": {"city": "Oslo", "zip": null}, "manager": null,
		"owner": {"name": "Ada", "reports": [{"name": "Bob", "reports": null}]},
		"kind": null, "contact": {"phone": "+47"}, "vip": null}`
	if err := validate(t, sch, valid); err != nil {
		t.Fatalf("a strict-mode call does not validate: %v", err)
	}
	for name, instance := range map[string]string{
		"missing property": strings.Replace(valid, `"limit": null,`, "", 1),
		"extra property":   strings.Replace(valid, `"id": "c-1",`, `"id": "c-1", "x": 1,`, 1),
		"extra nested":     strings.Replace(valid, `"zip": null`, `"zip": null, "x": 1`, 1),
		"extra in $defs":   strings.Replace(valid, `"name": "Bob",`, `"name": "Bob", "x": 1,`, 1),
		"null required":    strings.Replace(valid, `"id": "c-1"`, `"id": null`, 1),
		"enum kept":        strings.Replace(valid, `"status": null`, `"status": "gone"`, 1),
	} {
		if err := validate(t, sch, instance); err == nil {
			t.Errorf("%s: validated, want an error", name)
		}
	}
}

func TestStrictSchemaGenerated(t *testing.T) {
	for _, tool := range tabletest.Tools(200) {
		for _, schema := range []json.RawMessage{tool.InputSchema, tool.OutputSchema} {
			if schema == nil {
				continue
			}
			out, err := discovery.StrictSchema(schema)
			if err != nil {
				t.Fatalf("%s: %v", tool.Name, err)
			}
			strict, orig := unmarshal(t, out), unmarshal(t, schema)
			for _, v := range strictViolations(strict) {
				t.Errorf("%s: %s", tool.Name, v)
			}
			optionalsNullable(t, orig, strict, tool.Name)
			compile(t, out)
		}
	}
}

func TestStrictSchemaRefused(t *testing.T) {
	for name, schema := range map[string]string{
		"map":               `{"type":"object","properties":{"labels":{"type":"object","additionalProperties":{"type":"string"}}}}`,
		"free-form object":  `{"type":"object","properties":{"payload":{"type":"object"}}}`,
		"any value":         `{"type":"object","properties":{"payload":{}}}`,
		"array of anything": `{"type":"object","properties":{"xs":{"type":"array"}}}`,
		"tuple":             `{"type":"object","properties":{"xs":{"type":"array","prefixItems":[{"type":"string"}],"items":{"type":"string"}}}}`,
		"pattern props":     `{"type":"object","patternProperties":{"^x":{"type":"string"}},"properties":{}}`,
		"root not object":   `{"type":"string"}`,
		"allOf of two":      `{"type":"object","properties":{"a":{"allOf":[{"type":"string"},{"minLength":1}]}}}`,
		"boolean schema":    `{"type":"object","properties":{"a":true}}`,
		"dangling ref":      `{"type":"object","properties":{"a":{"$ref":"#/$defs/X","description":"x"}}}`,
		"not json":          `{"type":`,
	} {
		t.Run(name, func(t *testing.T) {
			if out, err := discovery.StrictSchema(json.RawMessage(schema)); !errors.Is(err, discovery.ErrNotStrict) {
				t.Fatalf("StrictSchema = %s, %v; want ErrNotStrict", out, err)
			}
		})
	}
	// A tool without arguments is fine: the root may be an empty object.
	out, err := discovery.StrictSchema(json.RawMessage(`{"type":"object"}`))
	if err != nil || string(out) != `{"additionalProperties":false,"properties":{},"required":[],"type":"object"}` {
		t.Fatalf("empty root: %s, %v", out, err)
	}
}
