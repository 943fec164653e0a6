package contract_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/toolkit/spec"
	"github.com/toolplane/toolplane/toolkit/spec/contract"
)

const (
	compatible = false
	breaking   = true
)

// obj wraps properties and required names in an object schema.
func obj(props string, required ...string) string {
	req, _ := json.Marshal(required)
	if len(required) == 0 {
		req = []byte("[]")
	}
	return fmt.Sprintf(`{"type":"object","properties":{%s},"required":%s}`, props, req)
}

func TestCompareInputSchemas(t *testing.T) {
	customer := `"customer":{"type":"object","properties":{"id":{"type":"string"},"tier":{"type":"string","enum":["free","pro"]}},"required":["id"]}`
	for _, tc := range []struct {
		name     string
		old, new string
		breaking bool
		// path is a JSON path one of the changes must name, with the
		// breaking ones first when breaking.
		path string
	}{
		{"a new optional property", obj(`"a":{"type":"string"}`, "a"), obj(`"a":{"type":"string"},"b":{"type":"integer"}`, "a"), compatible, "inputSchema.properties.b"},
		{"a new required property", obj(`"a":{"type":"string"}`), obj(`"a":{"type":"string"},"b":{"type":"integer"}`, "b"), breaking, "inputSchema.properties.b"},
		{"a property removed", obj(`"a":{"type":"string"},"b":{"type":"integer"}`), obj(`"a":{"type":"string"}`), breaking, "inputSchema.properties.b"},
		{"a property renamed", obj(`"a":{"type":"string"},"zip":{"type":"string","pattern":"^[0-9]{5}$"}`), obj(`"a":{"type":"string"},"postal_code":{"type":"string","pattern":"^[0-9]{5}$"}`), breaking, "inputSchema.properties.zip"},
		{"an optional property made required", obj(`"a":{"type":"string"}`), obj(`"a":{"type":"string"}`, "a"), breaking, "inputSchema.properties.a"},
		{"a required property made optional", obj(`"a":{"type":"string"}`, "a"), obj(`"a":{"type":"string"}`), compatible, "inputSchema.properties.a"},
		{"a type changed", obj(`"n":{"type":"string"}`), obj(`"n":{"type":"integer"}`), breaking, "inputSchema.properties.n"},
		{"integer widened to number", obj(`"n":{"type":"integer"}`), obj(`"n":{"type":"number"}`), compatible, "inputSchema.properties.n"},
		{"number narrowed to integer", obj(`"n":{"type":"number"}`), obj(`"n":{"type":"integer"}`), breaking, "inputSchema.properties.n"},
		{"a type made nullable", obj(`"n":{"type":"string"}`), obj(`"n":{"type":["string","null"]}`), compatible, "inputSchema.properties.n"},
		{"an enum value added", obj(`"c":{"type":"string","enum":["red","green"]}`), obj(`"c":{"type":"string","enum":["red","green","blue"]}`), compatible, "inputSchema.properties.c"},
		{"an enum value removed", obj(`"c":{"type":"string","enum":["red","green"]}`), obj(`"c":{"type":"string","enum":["red"]}`), breaking, "inputSchema.properties.c"},
		{"an enum dropped", obj(`"c":{"type":"string","enum":["red"]}`), obj(`"c":{"type":"string"}`), compatible, "inputSchema.properties.c"},
		{"an enum imposed", obj(`"c":{"type":"string"}`), obj(`"c":{"type":"string","enum":["red"]}`), breaking, "inputSchema.properties.c"},
		{"a maximum relaxed", obj(`"n":{"type":"integer","maximum":10}`), obj(`"n":{"type":"integer","maximum":100}`), compatible, "inputSchema.properties.n"},
		{"a maximum tightened", obj(`"n":{"type":"integer","maximum":100}`), obj(`"n":{"type":"integer","maximum":10}`), breaking, "inputSchema.properties.n"},
		{"a minLength added", obj(`"s":{"type":"string"}`), obj(`"s":{"type":"string","minLength":3}`), breaking, "inputSchema.properties.s"},
		{"a minimum lowered", obj(`"n":{"type":"number","minimum":1.5}`), obj(`"n":{"type":"number","minimum":0}`), compatible, "inputSchema.properties.n"},
		{"a pattern added", obj(`"s":{"type":"string"}`), obj(`"s":{"type":"string","pattern":"^[a-z]+$"}`), breaking, "inputSchema.properties.s"},
		{"a pattern changed", obj(`"s":{"type":"string","pattern":"^[a-z]+$"}`), obj(`"s":{"type":"string","pattern":"^[a-z]{2,}$"}`), breaking, "inputSchema.properties.s"},
		{"a pattern removed", obj(`"s":{"type":"string","pattern":"^[a-z]+$"}`), obj(`"s":{"type":"string"}`), compatible, "inputSchema.properties.s"},
		{"a description changed", obj(`"s":{"type":"string","description":"the name"}`), obj(`"s":{"type":"string","description":"the full name"}`), compatible, "inputSchema.properties.s"},
		{"key order and whitespace only", `{"type":"object","properties":{"a":{"type":"string"}}}`, "{ \"properties\": {\"a\": {\"type\": \"string\"}},\n \"type\": \"object\" }", compatible, ""},
		{"a nested property removed", obj(customer), obj(`"customer":{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`), breaking, "inputSchema.properties.customer.properties.tier"},
		{"a nested required property added", obj(customer), obj(`"customer":{"type":"object","properties":{"id":{"type":"string"},"tier":{"type":"string","enum":["free","pro"]},"region":{"type":"string"}},"required":["id","region"]}`), breaking, "inputSchema.properties.customer.properties.region"},
		{"a nested enum widened", obj(customer), obj(`"customer":{"type":"object","properties":{"id":{"type":"string"},"tier":{"type":"string","enum":["free","pro","team"]}},"required":["id"]}`), compatible, "inputSchema.properties.customer.properties.tier"},
		{"array items narrowed", obj(`"tags":{"type":"array","items":{"type":"string"}}`), obj(`"tags":{"type":"array","items":{"type":"string","maxLength":16}}`), breaking, "inputSchema.properties.tags.items"},
		{"an array item gains an optional property", obj(`"lines":{"type":"array","items":{"type":"object","properties":{"sku":{"type":"string"}},"required":["sku"]}}`), obj(`"lines":{"type":"array","items":{"type":"object","properties":{"sku":{"type":"string"},"note":{"type":"string"}},"required":["sku"]}}`), compatible, "inputSchema.properties.lines.items.properties.note"},
		{"an array item gains a required property", obj(`"lines":{"type":"array","items":{"type":"object","properties":{"sku":{"type":"string"}},"required":["sku"]}}`), obj(`"lines":{"type":"array","items":{"type":"object","properties":{"sku":{"type":"string"},"qty":{"type":"integer"}},"required":["sku","qty"]}}`), breaking, "inputSchema.properties.lines.items.properties.qty"},
		{"maxItems relaxed", obj(`"tags":{"type":"array","items":{"type":"string"},"maxItems":5}`), obj(`"tags":{"type":"array","items":{"type":"string"},"maxItems":50}`), compatible, "inputSchema.properties.tags"},
		{"uniqueItems imposed", obj(`"tags":{"type":"array","items":{"type":"string"}}`), obj(`"tags":{"type":"array","items":{"type":"string"},"uniqueItems":true}`), breaking, "inputSchema.properties.tags"},
		{"a $defs target narrowed, named where it is used",
			`{"type":"object","properties":{"home":{"$ref":"#/$defs/Address"}},"$defs":{"Address":{"type":"object","properties":{"zip":{"type":"string"}}}}}`,
			`{"type":"object","properties":{"home":{"$ref":"#/$defs/Address"}},"$defs":{"Address":{"type":"object","properties":{"zip":{"type":"string","maxLength":5}}}}}`,
			breaking, "inputSchema.properties.home.properties.zip"},
		{"a $defs target gains an optional property",
			`{"type":"object","properties":{"home":{"$ref":"#/$defs/Address"}},"$defs":{"Address":{"type":"object","properties":{"zip":{"type":"string"}}}}}`,
			`{"type":"object","properties":{"home":{"$ref":"#/$defs/Address"}},"$defs":{"Address":{"type":"object","properties":{"zip":{"type":"string"},"city":{"type":"string"}}}}}`,
			compatible, "inputSchema.properties.home.properties.city"},
		{"a $ref replaced by the schema it named",
			`{"type":"object","properties":{"home":{"$ref":"#/$defs/Address"}},"$defs":{"Address":{"type":"object","properties":{"zip":{"type":"string"}}}}}`,
			`{"type":"object","properties":{"home":{"type":"object","properties":{"zip":{"type":"string"}}}}}`,
			compatible, ""},
		{"a recursive $defs type changed deep down",
			`{"type":"object","properties":{"root":{"$ref":"#/$defs/Node"}},"$defs":{"Node":{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#/$defs/Node"}}}}}}`,
			`{"type":"object","properties":{"root":{"$ref":"#/$defs/Node"}},"$defs":{"Node":{"type":"object","properties":{"name":{"type":"integer"},"children":{"type":"array","items":{"$ref":"#/$defs/Node"}}}}}}`,
			breaking, "inputSchema.properties.root.properties.name"},
		{"a $defs target changed below an array that holds the $ref",
			`{"type":"object","properties":{"lines":{"type":"array","items":{"$ref":"#/$defs/Line"}}},"$defs":{"Line":{"type":"object","properties":{"sku":{"type":"string"}}}}}`,
			`{"type":"object","properties":{"lines":{"type":"array","items":{"$ref":"#/$defs/Line"}}},"$defs":{"Line":{"type":"object","properties":{"sku":{"type":"string"}},"required":["sku"]}}}`,
			breaking, "inputSchema.properties.lines.items.properties.sku"},
		{"additionalProperties closed", obj(`"a":{"type":"string"}`), `{"type":"object","properties":{"a":{"type":"string"}},"required":[],"additionalProperties":false}`, breaking, "inputSchema.additionalProperties"},
		{"additionalProperties opened", `{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}`, `{"type":"object","properties":{"a":{"type":"string"}}}`, compatible, "inputSchema.additionalProperties"},
		{"anyOf gains an alternative", obj(`"id":{"anyOf":[{"type":"string"},{"type":"integer"}]}`), obj(`"id":{"anyOf":[{"type":"string"},{"type":"integer"},{"type":"null"}]}`), compatible, "inputSchema.properties.id.anyOf"},
		{"oneOf loses an alternative", obj(`"id":{"oneOf":[{"type":"string"},{"type":"integer"}]}`), obj(`"id":{"oneOf":[{"type":"string"}]}`), breaking, "inputSchema.properties.id.oneOf"},
		{"anyOf alternative narrowed in place", obj(`"id":{"anyOf":[{"type":"string"},{"type":"integer"}]}`), obj(`"id":{"anyOf":[{"type":"string","maxLength":8},{"type":"integer"}]}`), breaking, "inputSchema.properties.id.anyOf[0]"},
		{"an unknown keyword changed is conservative", obj(`"a":{"type":"object","dependentRequired":{"x":["y"]}}`), obj(`"a":{"type":"object","dependentRequired":{"x":["z"]}}`), breaking, "inputSchema.properties.a"},
		{"a property name with a dot", obj(`"a.b":{"type":"string"}`), obj(``), breaking, `inputSchema.properties["a.b"]`},
		{"multipleOf relaxed", obj(`"n":{"type":"integer","multipleOf":10}`), obj(`"n":{"type":"integer","multipleOf":5}`), compatible, "inputSchema.properties.n"},
		{"a bound with an exponent too large to build exactly is conservative", obj(`"n":{"type":"number","maximum":1}`), obj(`"n":{"type":"number","maximum":1e999999999}`), breaking, "inputSchema.properties.n"},
		{"const changed", obj(`"v":{"const":"v1"}`), obj(`"v":{"const":"v2"}`), breaking, "inputSchema.properties.v"},
		// The review of round three: breaking changes once called compatible.
		{"oneOf gains an alternative that overlaps one it had", obj(`"id":{"oneOf":[{"type":"string"},{"type":"integer"}]}`), obj(`"id":{"oneOf":[{"type":"string"},{"type":"integer"},{"type":"number"}]}`), breaking, "inputSchema.properties.id.oneOf"},
		{"oneOf gains a disjoint alternative", obj(`"id":{"oneOf":[{"type":"string"},{"type":"integer"}]}`), obj(`"id":{"oneOf":[{"type":"string"},{"type":"integer"},{"type":"boolean"}]}`), compatible, "inputSchema.properties.id.oneOf"},
		{"string becomes []byte (base64)", obj(`"data":{"type":"string"}`), obj(`"data":{"type":"string","contentEncoding":"base64"}`), breaking, "inputSchema.properties.data"},
		// False alarms that made lint exit 1.
		{"true becomes {}", obj(`"any":true`), obj(`"any":{}`), compatible, ""},
		{"{} becomes true", obj(`"any":{}`), obj(`"any":true`), compatible, ""},
		{"minLength 0 added", obj(`"s":{"type":"string"}`), obj(`"s":{"type":"string","minLength":0}`), compatible, ""},
		{"enum [1] becomes [1.0]", obj(`"n":{"type":"number","enum":[1]}`), obj(`"n":{"type":"number","enum":[1.0]}`), compatible, ""},
		{"minimum 1 becomes exclusiveMinimum 0 on an integer", obj(`"n":{"type":"integer","minimum":1}`), obj(`"n":{"type":"integer","exclusiveMinimum":0}`), compatible, ""},
		{"minimum 1 becomes exclusiveMinimum 0 on a number", obj(`"n":{"type":"number","minimum":1}`), obj(`"n":{"type":"number","exclusiveMinimum":0}`), compatible, "inputSchema.properties.n"},
		{"exclusiveMinimum 0 becomes minimum 0.5 on a number", obj(`"n":{"type":"number","exclusiveMinimum":0}`), obj(`"n":{"type":"number","minimum":0.5}`), breaking, "inputSchema.properties.n"},
		{"anyOf consts reordered", obj(`"c":{"anyOf":[{"const":"a"},{"const":"b"}]}`), obj(`"c":{"anyOf":[{"const":"b"},{"const":"a"}]}`), compatible, ""},
		{"a property added where additionalProperties had a schema it breaks", `{"type":"object","properties":{},"additionalProperties":{"type":"string"}}`, `{"type":"object","properties":{"n":{"type":"integer"}},"additionalProperties":{"type":"string"}}`, breaking, "inputSchema.properties.n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changes := contract.Compare(
				contract.Version{InputSchema: json.RawMessage(tc.old)},
				contract.Version{InputSchema: json.RawMessage(tc.new)})
			assertChanges(t, changes, tc.breaking, tc.path)
		})
	}
}

func TestCompareOutputSchemasAndAnnotations(t *testing.T) {
	in := json.RawMessage(obj(`"id":{"type":"string"}`, "id"))
	yes, no := true, false
	for _, tc := range []struct {
		name     string
		old, new contract.Version
		breaking bool
		path     string
	}{
		{"an output property removed",
			contract.Version{InputSchema: in, OutputSchema: json.RawMessage(obj(`"total":{"type":"number"},"currency":{"type":"string"}`, "total", "currency"))},
			contract.Version{InputSchema: in, OutputSchema: json.RawMessage(obj(`"total":{"type":"number"}`, "total"))},
			breaking, "outputSchema.properties.currency"},
		{"an output property added",
			contract.Version{InputSchema: in, OutputSchema: json.RawMessage(obj(`"total":{"type":"number"}`, "total"))},
			contract.Version{InputSchema: in, OutputSchema: json.RawMessage(obj(`"total":{"type":"number"},"tax":{"type":"number"}`, "total", "tax"))},
			compatible, "outputSchema.properties.tax"},
		{"an output property no longer required",
			contract.Version{InputSchema: in, OutputSchema: json.RawMessage(obj(`"total":{"type":"number"}`, "total"))},
			contract.Version{InputSchema: in, OutputSchema: json.RawMessage(obj(`"total":{"type":"number"}`))},
			breaking, "outputSchema.properties.total"},
		{"an output enum widened",
			contract.Version{InputSchema: in, OutputSchema: json.RawMessage(obj(`"s":{"type":"string","enum":["open","closed"]}`))},
			contract.Version{InputSchema: in, OutputSchema: json.RawMessage(obj(`"s":{"type":"string","enum":["open","closed","merged"]}`))},
			breaking, "outputSchema.properties.s"},
		{"an output maximum tightened",
			contract.Version{InputSchema: in, OutputSchema: json.RawMessage(obj(`"n":{"type":"integer","maximum":100}`))},
			contract.Version{InputSchema: in, OutputSchema: json.RawMessage(obj(`"n":{"type":"integer","maximum":10}`))},
			compatible, "outputSchema.properties.n"},
		{"an output schema added",
			contract.Version{InputSchema: in},
			contract.Version{InputSchema: in, OutputSchema: json.RawMessage(obj(`"n":{"type":"integer"}`))},
			compatible, "outputSchema"},
		{"an output schema removed",
			contract.Version{InputSchema: in, OutputSchema: json.RawMessage(obj(`"n":{"type":"integer"}`))},
			contract.Version{InputSchema: in},
			breaking, "outputSchema"},
		{"destructiveHint false to true",
			contract.Version{InputSchema: in, Annotations: &spec.Annotations{DestructiveHint: &no}},
			contract.Version{InputSchema: in, Annotations: &spec.Annotations{DestructiveHint: &yes}},
			breaking, "annotations.destructiveHint"},
		{"destructiveHint false to unset, which MCP reads as true",
			contract.Version{InputSchema: in, Annotations: &spec.Annotations{DestructiveHint: &no}},
			contract.Version{InputSchema: in},
			breaking, "annotations.destructiveHint"},
		{"destructiveHint true to false",
			contract.Version{InputSchema: in, Annotations: &spec.Annotations{DestructiveHint: &yes}},
			contract.Version{InputSchema: in, Annotations: &spec.Annotations{DestructiveHint: &no}},
			compatible, "annotations.destructiveHint"},
		{"readOnlyHint true to false",
			contract.Version{InputSchema: in, Annotations: &spec.Annotations{ReadOnlyHint: &yes}},
			contract.Version{InputSchema: in, Annotations: &spec.Annotations{ReadOnlyHint: &no}},
			breaking, "annotations.readOnlyHint"},
		{"an output property added where additionalProperties was false",
			contract.Version{InputSchema: in, OutputSchema: json.RawMessage(`{"type":"object","properties":{"total":{"type":"number"}},"required":["total"],"additionalProperties":false}`)},
			contract.Version{InputSchema: in, OutputSchema: json.RawMessage(`{"type":"object","properties":{"total":{"type":"number"},"tax":{"type":"number"}},"required":["total"],"additionalProperties":false}`)},
			breaking, "outputSchema.properties.tax"},
		{"an output string becomes []byte (base64)",
			contract.Version{InputSchema: in, OutputSchema: json.RawMessage(obj(`"data":{"type":"string"}`))},
			contract.Version{InputSchema: in, OutputSchema: json.RawMessage(obj(`"data":{"type":"string","contentEncoding":"base64"}`))},
			breaking, "outputSchema.properties.data"},
		{"the tool description",
			contract.Version{InputSchema: in, Description: "Finds a customer."},
			contract.Version{InputSchema: in, Description: "Finds a customer by id."},
			compatible, "description"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assertChanges(t, contract.Compare(tc.old, tc.new), tc.breaking, tc.path)
		})
	}
}

func assertChanges(t *testing.T, changes []contract.Change, wantBreaking bool, path string) {
	t.Helper()
	got := len(contract.Breaking(changes)) > 0
	if got != wantBreaking {
		t.Fatalf("breaking = %t, want %t; changes:\n%s", got, wantBreaking, lines(changes))
	}
	if path == "" {
		if len(changes) != 0 {
			t.Fatalf("want no change, got:\n%s", lines(changes))
		}
		return
	}
	for _, c := range changes {
		if c.Path == path && c.Breaking == wantBreaking && c.Message != "" {
			return
		}
	}
	t.Fatalf("no %s change at %s; changes:\n%s", kind(wantBreaking), path, lines(changes))
}

func kind(b bool) string {
	if b {
		return "breaking"
	}
	return "compatible"
}

func lines(changes []contract.Change) string {
	var b strings.Builder
	for _, c := range changes {
		b.WriteString("  " + c.String() + "\n")
	}
	return b.String()
}

func TestRemovedIsBreaking(t *testing.T) {
	c := contract.Removed("refund")
	if !c.Breaking || c.Path != "refund" || c.String() != "breaking: refund: the tool was removed" {
		t.Fatalf("Removed = %+v", c)
	}
}

func TestCompareIsBoundedOnHostileDepth(t *testing.T) {
	deep := func(leaf string) string {
		s := leaf
		for range 500 {
			s = `{"type":"array","items":` + s + `}`
		}
		return `{"type":"object","properties":{"a":` + s + `}}`
	}
	changes := contract.Compare(
		contract.Version{InputSchema: json.RawMessage(deep(`{"type":"string"}`))},
		contract.Version{InputSchema: json.RawMessage(deep(`{"type":"integer"}`))})
	if len(contract.Breaking(changes)) == 0 {
		t.Fatalf("a change below the depth bound must be breaking; got:\n%s", lines(changes))
	}
}

func TestCompareIsBoundedOnRefsThatDoubleAtEachLevel(t *testing.T) {
	// d0 uses d1 twice, d1 uses d2 twice, …: 2^40 paths to the leaf.
	doc := func(leaf string) json.RawMessage {
		defs := []string{fmt.Sprintf(`"d40":{"type":%q}`, leaf)}
		for i := range 40 {
			defs = append(defs, fmt.Sprintf(`"d%d":{"type":"object","properties":{"a":{"$ref":"#/$defs/d%d"},"b":{"$ref":"#/$defs/d%d"}}}`, i, i+1, i+1))
		}
		return json.RawMessage(`{"type":"object","properties":{"root":{"$ref":"#/$defs/d0"}},"$defs":{` + strings.Join(defs, ",") + `}}`)
	}
	changes := contract.Compare(contract.Version{InputSchema: doc("string")}, contract.Version{InputSchema: doc("integer")})
	if len(contract.Breaking(changes)) == 0 || len(changes) > 1000 {
		t.Fatalf("want a bounded, breaking answer; got %d changes", len(changes))
	}
}

func TestSchemaDigest(t *testing.T) {
	a := spec.SchemaDigest(json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}}}`), nil, nil, nil)
	b := spec.SchemaDigest(json.RawMessage("{ \"properties\": {\"a\": {\"type\": \"string\"}},\n\"type\": \"object\" }"), json.RawMessage("null"), nil, nil)
	if a != b || !strings.HasPrefix(a, "sha256:") {
		t.Fatalf("key order, whitespace and a null output schema must not change the digest: %s vs %s", a, b)
	}
	obj := json.RawMessage(`{"type":"object"}`)
	plain := spec.SchemaDigest(obj, nil, nil, nil)
	yes := true
	if c := spec.SchemaDigest(obj, nil, &spec.Annotations{ReadOnlyHint: &yes}, nil); c == plain {
		t.Fatal("annotations must change the digest")
	}
	if c := spec.SchemaDigest(obj, obj, nil, nil); c == plain {
		t.Fatal("an output schema must change the digest")
	}
	optional := spec.SchemaDigest(obj, nil, nil, &spec.Execution{TaskSupport: spec.TaskSupportOptional})
	required := spec.SchemaDigest(obj, nil, nil, &spec.Execution{TaskSupport: spec.TaskSupportRequired})
	if optional == plain || required == plain || optional == required {
		t.Fatal("task support must change the digest")
	}
	for _, e := range []*spec.Execution{{}, {TaskSupport: spec.TaskSupportForbidden}} {
		if c := spec.SchemaDigest(obj, nil, nil, e); c != plain {
			t.Fatalf("execution %+v is MCP's default and must not change the digest", *e)
		}
	}
}

func TestCompareTaskSupport(t *testing.T) {
	obj := json.RawMessage(`{"type":"object"}`)
	v := func(ts string) contract.Version {
		if ts == "none" {
			return contract.Version{InputSchema: obj}
		}
		return contract.Version{InputSchema: obj, Execution: &spec.Execution{TaskSupport: ts}}
	}
	for _, tc := range []struct {
		old, new string
		changes  int
		breaking bool
	}{
		{"none", "forbidden", 0, false},
		{"none", "optional", 1, false},
		{"required", "optional", 1, false},
		{"none", "required", 1, true},
		{"optional", "required", 1, true},
		{"optional", "forbidden", 1, true},
		{"required", "none", 1, true},
	} {
		changes := contract.Compare(v(tc.old), v(tc.new))
		if len(changes) != tc.changes || (tc.changes > 0 && changes[0].Breaking != tc.breaking) {
			t.Errorf("%s to %s: got %v, want %d change(s), breaking %v", tc.old, tc.new, changes, tc.changes, tc.breaking)
		}
	}
}
