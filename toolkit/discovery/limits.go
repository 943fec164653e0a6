package discovery

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// OpenAI's documented limits on a strict-mode schema (the Structured
// Outputs guide, "Supported schemas"). A strict schema past one of them is
// refused by the API with a 400, so an export offers that tool non-strict.
const (
	// OpenAIMaxNesting is the most levels of object nesting.
	OpenAIMaxNesting = 10
	// OpenAIMaxProperties is the most object properties in all.
	OpenAIMaxProperties = 5000
	// OpenAIMaxEnumValues is the most enum values across all enums.
	OpenAIMaxEnumValues = 1000
	// OpenAIMaxStringLength bounds the total length of every property
	// name, definition name, enum value and const value.
	OpenAIMaxStringLength = 120_000
	// OpenAIMaxLargeEnumLength bounds the total length of the values of one
	// string enum that has more than OpenAILargeEnum values.
	OpenAIMaxLargeEnumLength = 15_000
	// OpenAILargeEnum is where OpenAIMaxLargeEnumLength starts to apply.
	OpenAILargeEnum = 250
)

// ExportNote says what an export did not do as asked for one tool, and why.
type ExportNote struct {
	// Tool is the tool's name in the table.
	Tool string
	// Omitted is set when the tool was left out of the export. Otherwise it
	// is in it in a weaker form: non-strict, in a strict OpenAI export.
	Omitted bool
	// Reason says why, for a person.
	Reason string
}

// ExportOpenAI is [Client.OpenAITools] with the notes of what it could not
// export as asked: with strict, a tool whose schema strict mode cannot
// express or that passes OpenAI's documented strict-mode limits is offered
// non-strict; a tool whose input schema is not an object is left out.
func (c *Client) ExportOpenAI(strict bool) ([]OpenAITool, []ExportNote) {
	s := c.snap()
	s.exportOnce.Do(s.export)
	if strict {
		return slices.Clone(s.strict), slices.Clone(s.notes.strict)
	}
	return slices.Clone(s.openAI), slices.Clone(s.notes.openAI)
}

// ExportAnthropic is [Client.AnthropicTools] with the notes of what it
// could not export: a tool whose name Anthropic refuses (never, for a name
// from [MappedName]), whose input schema is not an object schema of type
// object, or that is no valid JSON Schema (2020-12) is left out.
func (c *Client) ExportAnthropic() ([]AnthropicTool, []ExportNote) {
	s := c.snap()
	s.exportOnce.Do(s.export)
	return slices.Clone(s.anthropic), slices.Clone(s.notes.anthropic)
}

// exportNotes are the notes of each export of a snapshot.
type exportNotes struct {
	openAI, strict, anthropic []ExportNote
}

// objectRoot reports why params cannot be a provider's parameters object,
// or "".
func objectRoot(params json.RawMessage) string {
	var root map[string]any
	if err := json.Unmarshal(params, &root); err != nil {
		return "the input schema is not a JSON object"
	}
	if t, ok := root["type"]; ok && t != "object" {
		return fmt.Sprintf("the input schema's type is %v, and a provider takes an object", t)
	}
	return ""
}

// anthropicProblem reports why Anthropic would refuse a tool, or "".
func anthropicProblem(name string, params json.RawMessage) string {
	if !IsPortableName(name) {
		return fmt.Sprintf("the name %q does not match ^[a-zA-Z0-9_-]{1,64}$", name)
	}
	var root map[string]any
	if err := json.Unmarshal(params, &root); err != nil {
		return "the input schema is not a JSON object"
	}
	if root["type"] != "object" {
		return fmt.Sprintf("the input schema's type is %v; Anthropic wants \"object\"", root["type"])
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(params))
	if err != nil {
		return "the input schema is not JSON: " + err.Error()
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("urn:toolplane:export", doc); err != nil {
		return "the input schema is not a valid JSON Schema: " + err.Error()
	}
	if _, err := c.Compile("urn:toolplane:export"); err != nil {
		return "the input schema is not a valid JSON Schema: " + err.Error()
	}
	return ""
}

// strictLimits reports the first of OpenAI's strict-mode limits that a
// converted strict schema passes, or "".
func strictLimits(schema json.RawMessage) string {
	var root any
	if err := json.Unmarshal(schema, &root); err != nil {
		return "the strict schema is not JSON"
	}
	var st limitState
	st.walk(root, 0)
	switch {
	case st.depth > OpenAIMaxNesting:
		return fmt.Sprintf("objects nest %d levels deep, past OpenAI's strict-mode limit of %d", st.depth, OpenAIMaxNesting)
	case st.properties > OpenAIMaxProperties:
		return fmt.Sprintf("%d object properties, past OpenAI's strict-mode limit of %d", st.properties, OpenAIMaxProperties)
	case st.enumValues > OpenAIMaxEnumValues:
		return fmt.Sprintf("%d enum values, past OpenAI's strict-mode limit of %d", st.enumValues, OpenAIMaxEnumValues)
	case st.strings > OpenAIMaxStringLength:
		return fmt.Sprintf("names and enum values of %d characters in all, past OpenAI's strict-mode limit of %d", st.strings, OpenAIMaxStringLength)
	case st.largeEnum != "":
		return st.largeEnum
	}
	return ""
}

// limitState counts what OpenAI's limits bound while walking a schema.
type limitState struct {
	depth, properties, enumValues, strings int
	largeEnum                              string
}

// walk visits schema s, which is inside objects nested objects deep. It
// does not follow $ref: a recursive schema is counted once.
func (st *limitState) walk(s any, objects int) {
	m, ok := s.(map[string]any)
	if !ok {
		return
	}
	if props, ok := m["properties"].(map[string]any); ok || m["type"] == "object" || slices.Contains(typeList(m["type"]), any("object")) {
		objects++
		st.depth = max(st.depth, objects)
		for name, p := range props {
			st.properties++
			st.strings += len(name)
			st.walk(p, objects)
		}
	}
	for _, key := range []string{"$defs", "definitions"} {
		if defs, ok := m[key].(map[string]any); ok {
			for name, d := range defs {
				st.strings += len(name)
				st.walk(d, 0)
			}
		}
	}
	if enum, ok := m["enum"].([]any); ok {
		st.enumValues += len(enum)
		total := 0
		for _, v := range enum {
			if s, ok := v.(string); ok {
				total += len(s)
			}
		}
		st.strings += total
		if len(enum) > OpenAILargeEnum && total > OpenAIMaxLargeEnumLength && st.largeEnum == "" {
			st.largeEnum = fmt.Sprintf("an enum of %d values, %d characters in all, past OpenAI's strict-mode limit of %d characters for an enum of more than %d values",
				len(enum), total, OpenAIMaxLargeEnumLength, OpenAILargeEnum)
		}
	}
	if c, ok := m["const"].(string); ok {
		st.strings += len(c)
	}
	if items, ok := m["items"]; ok {
		st.walk(items, objects)
	}
	for _, key := range []string{"anyOf", "oneOf", "allOf"} {
		if subs, ok := m[key].([]any); ok {
			for _, sub := range subs {
				st.walk(sub, objects)
			}
		}
	}
}
