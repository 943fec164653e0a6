package discovery_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/toolkit/discovery"
	"github.com/toolplane/toolplane/toolkit/spec"
)

func table(tools ...spec.TableTool) *spec.Table {
	for i := range tools {
		if tools[i].InputSchema == nil {
			tools[i].InputSchema = json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}}}`)
		}
	}
	spec.SortTableTools(tools)
	return &spec.Table{SchemaVersion: spec.SchemaVersion, Revision: spec.TableRevision(tools), Tools: tools}
}

func TestFunctionNames(t *testing.T) {
	long := strings.Repeat("very.long.name.", 8) // 120 characters
	dotted := "billing.get.invoice"
	c := &discovery.Client{}
	err := c.SetTable(table(
		spec.TableTool{Name: "crm_query_customer"},
		spec.TableTool{Name: dotted},
		spec.TableTool{Name: "billing-get-invoice"},
		spec.TableTool{Name: long},
		// A portable name that takes the dotted name's short mapping.
		spec.TableTool{Name: discovery.MappedName("x.y")},
		spec.TableTool{Name: "x.y"},
	))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, tool := range c.Table().Tools {
		fn, ok := c.FunctionName(tool.Name)
		if !ok || !discovery.IsPortableName(fn) {
			t.Fatalf("FunctionName(%q) = %q, %v; want a portable name", tool.Name, fn, ok)
		}
		if prev, dup := seen[fn]; dup {
			t.Fatalf("%q and %q share the function name %q", prev, tool.Name, fn)
		}
		seen[fn] = tool.Name
		if back, ok := c.ToolName(fn); !ok || back != tool.Name {
			t.Fatalf("ToolName(%q) = %q, %v; want %q", fn, back, ok, tool.Name)
		}
		if got, ok := c.Lookup(fn); !ok || got.Name != tool.Name {
			t.Fatalf("Lookup(%q) = %q, %v; want %q", fn, got.Name, ok, tool.Name)
		}
		if discovery.IsPortableName(tool.Name) && fn != tool.Name {
			t.Errorf("portable %q was mapped to %q", tool.Name, fn)
		}
	}
	if fn, _ := c.FunctionName(dotted); !strings.HasPrefix(fn, "billing_get_invoice_") || fn != discovery.MappedName(dotted) {
		t.Errorf("FunctionName(%q) = %q, want MappedName's billing_get_invoice_<digest>", dotted, fn)
	}
	if fn, _ := c.FunctionName("x.y"); fn == discovery.MappedName("x.y") || len(fn) != len("x_y_")+16 {
		t.Errorf("FunctionName(x.y) = %q: a taken mapping should get the longer digest", fn)
	}
	if _, ok := c.ToolName("nope"); ok {
		t.Error("ToolName resolved an unknown function name")
	}
}

func TestExportFormats(t *testing.T) {
	c := &discovery.Client{}
	err := c.SetTable(table(
		spec.TableTool{Name: "crm.query_customer", Description: "Finds a customer.", InputSchema: json.RawMessage(customerSchema)},
		spec.TableTool{Name: "set_labels", Title: "Set labels", InputSchema: json.RawMessage(
			`{"type":"object","properties":{"labels":{"type":"object","additionalProperties":{"type":"string"}}},"required":["labels"]}`)},
	))
	if err != nil {
		t.Fatal(err)
	}
	fn, _ := c.FunctionName("crm.query_customer")

	plain := c.OpenAITools(false)
	b, _ := json.Marshal(plain[0])
	var shape struct {
		Type     string `json:"type"`
		Function struct {
			Name       string          `json:"name"`
			Desc       string          `json:"description"`
			Parameters json.RawMessage `json:"parameters"`
			Strict     *bool           `json:"strict"`
		} `json:"function"`
	}
	if err := json.Unmarshal(b, &shape); err != nil {
		t.Fatal(err)
	}
	if shape.Type != "function" || shape.Function.Name != fn || shape.Function.Desc != "Finds a customer." || shape.Function.Strict != nil {
		t.Fatalf("OpenAI tool = %s", b)
	}
	if string(shape.Function.Parameters) != compact(t, c.Table().Tools[0].InputSchema) {
		t.Error("non-strict parameters are not the tool's schema")
	}

	strict := c.OpenAITools(true)
	if !strict[0].Function.Strict || strictViolations(unmarshal(t, strict[0].Function.Parameters)) != nil {
		t.Fatalf("strict export of %s: strict=%v, violations %v", fn, strict[0].Function.Strict, strictViolations(unmarshal(t, strict[0].Function.Parameters)))
	}
	// A map cannot be strict: that tool is offered non-strict, as it is.
	if strict[1].Function.Strict || string(strict[1].Function.Parameters) != string(c.Table().Tools[1].InputSchema) {
		t.Fatalf("set_labels exported as %+v; want non-strict with its own schema", strict[1].Function)
	}
	if strict[1].Function.Description != "Set labels" {
		t.Errorf("a tool without description should fall back to its title, got %q", strict[1].Function.Description)
	}
	// The cache hands out copies.
	strict[0].Function.Name = "changed"
	if c.OpenAITools(true)[0].Function.Name != fn {
		t.Error("modifying the returned slice changed the client's export")
	}

	a := c.AnthropicTools()
	b, _ = json.Marshal(a[0])
	var ashape map[string]json.RawMessage
	if err := json.Unmarshal(b, &ashape); err != nil {
		t.Fatal(err)
	}
	if string(ashape["name"]) != `"`+fn+`"` || string(ashape["input_schema"]) != compact(t, c.Table().Tools[0].InputSchema) {
		t.Fatalf("Anthropic tool = %s", b)
	}
}

func compact(t *testing.T, b []byte) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func unmarshal(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestZeroClient(t *testing.T) {
	var c discovery.Client
	if c.Revision() != spec.TableRevision(nil) || len(c.Table().Tools) != 0 || len(c.OpenAITools(true)) != 0 {
		t.Fatal("the zero Client does not hold an empty table")
	}
	if _, ok := c.Lookup("x"); ok {
		t.Fatal("the zero Client found a tool")
	}
}
