package discovery_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/toolkit/discovery"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// nested is an object schema whose objects nest levels deep.
func nested(levels int) string {
	s := `{"type":"string"}`
	for range levels {
		s = `{"type":"object","properties":{"x":` + s + `},"required":["x"],"additionalProperties":false}`
	}
	return s
}

func objectWith(props int, prop func(i int) string) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	for i := range props {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"p%d":%s`, i, prop(i))
	}
	b.WriteString(`}}`)
	return b.String()
}

func enumOf(n, size int) string {
	vals := make([]string, n)
	for i := range vals {
		vals[i] = fmt.Sprintf(`"%0*d"`, size, i)
	}
	return `{"type":"string","enum":[` + strings.Join(vals, ",") + `]}`
}

func TestExportsReportWhatProvidersRefuse(t *testing.T) {
	str := func(int) string { return `{"type":"string"}` }
	cases := []struct {
		name, schema string
		strictNote   string // "" when the tool is exported strict
		omitted      bool   // left out of both exports
		anthropic    string // a note for Anthropic, when one is due
	}{
		{"fine", nested(3), "", false, ""},
		{"ten_levels", nested(10), "", false, ""},
		{"too_deep", nested(11), "nest 11 levels deep, past OpenAI's strict-mode limit of 10", false, ""},
		{"too_many_properties", objectWith(5001, str), "5001 object properties, past OpenAI's strict-mode limit of 5000", false, ""},
		// Optional properties become nullable in strict mode: null joins each enum.
		{"too_many_enum_values", objectWith(3, func(int) string { return enumOf(400, 2) }), "1203 enum values, past OpenAI's strict-mode limit of 1000", false, ""},
		{"too_long_strings", objectWith(130, func(int) string { return enumOf(1, 1000) }), "past OpenAI's strict-mode limit of 120000", false, ""},
		{"large_enum_too_long", objectWith(1, func(int) string { return enumOf(300, 60) }), "an enum of 301 values, 18000 characters in all", false, ""},
		{"not_strict", `{"type":"object","properties":{"m":{"type":"object","additionalProperties":{"type":"string"}}}}`, "a map", false, ""},
		{"not_an_object", `{"type":"string"}`, "the input schema's type is string", true, `Anthropic wants "object"`},
		{"invalid_schema", `{"type":"object","properties":{"x":{"type":"strng"}}}`, "", false, "not a valid JSON Schema"},
	}
	var tools []spec.TableTool
	for _, c := range cases {
		tools = append(tools, spec.TableTool{Name: c.name, InputSchema: json.RawMessage(c.schema)})
	}
	client := &discovery.Client{}
	if err := client.SetTable(table(tools...)); err != nil {
		t.Fatal(err)
	}
	strictTools, strictNotes := client.ExportOpenAI(true)
	plainTools, _ := client.ExportOpenAI(false)
	anthropicTools, anthropicNotes := client.ExportAnthropic()
	if len(client.OpenAITools(true)) != len(strictTools) || len(client.AnthropicTools()) != len(anthropicTools) {
		t.Error("OpenAITools and AnthropicTools do not export what ExportOpenAI and ExportAnthropic do")
	}
	find := func(notes []discovery.ExportNote, name string) *discovery.ExportNote {
		for i := range notes {
			if notes[i].Tool == name {
				return &notes[i]
			}
		}
		return nil
	}
	exported := func(name string) (strict, found bool) {
		for _, tl := range strictTools {
			if tl.Function.Name == name {
				return tl.Function.Strict, true
			}
		}
		return false, false
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			note := find(strictNotes, c.name)
			strict, found := exported(c.name)
			switch {
			case c.omitted:
				if found || note == nil || !note.Omitted || !strings.Contains(note.Reason, c.strictNote) {
					t.Errorf("exported %v, note %+v; want it left out, saying %q", found, note, c.strictNote)
				}
			case c.strictNote == "":
				if !found || !strict || note != nil {
					t.Errorf("found %v, strict %v, note %+v; want it strict with no note", found, strict, note)
				}
			default:
				if !found || strict || note == nil || note.Omitted || !strings.Contains(note.Reason, c.strictNote) {
					t.Errorf("found %v, strict %v, note %+v; want it non-strict, saying %q", found, strict, note, c.strictNote)
				}
			}
			an := find(anthropicNotes, c.name)
			inAnthropic := false
			for _, tl := range anthropicTools {
				inAnthropic = inAnthropic || tl.Name == c.name
			}
			if c.anthropic == "" && (an != nil || !inAnthropic) || c.anthropic != "" && (an == nil || inAnthropic || !strings.Contains(an.Reason, c.anthropic)) {
				t.Errorf("Anthropic: exported %v, note %+v; want note %q", inAnthropic, an, c.anthropic)
			}
		})
	}
	if len(plainTools) != len(cases)-1 {
		t.Errorf("the non-strict export holds %d tools, want all but the one that is no object", len(plainTools))
	}
}
