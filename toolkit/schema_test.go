package toolkit

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/big"
	"net/netip"
	"reflect"
	"testing"
	"time"
)

// fieldSchema generates the schema of a struct with one field f of type typ
// and the given tag, and returns f's schema and whether it is required.
func fieldSchema(t *testing.T, typ reflect.Type, tag string) (string, bool, error) {
	t.Helper()
	st := reflect.StructOf([]reflect.StructField{{Name: "F", Type: typ, Tag: reflect.StructTag(tag)}})
	s, err := generateSchema(st, false)
	if err != nil {
		return "", false, err
	}
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := compileSchema(raw); err != nil {
		return "", false, err
	}
	var doc struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	name := "F"
	if n, _, _ := bytes.Cut([]byte(reflect.StructTag(tag).Get("json")), []byte(",")); len(n) > 0 {
		name = string(n)
	}
	return string(doc.Properties[name]), len(doc.Required) == 1, nil
}

type textID struct{ v string }

func (t textID) MarshalText() ([]byte, error)     { return []byte(t.v), nil }
func (t *textID) UnmarshalText(b []byte) error    { t.v = string(b); return nil }
func (c custom) MarshalJSON() ([]byte, error)     { return []byte(`1`), nil }
func (c *custom) UnmarshalJSON(data []byte) error { return nil }

type custom struct{}

type leaf struct {
	A string `json:"a"`
}

// TestSchemaTypeMapping has one row per Go type (and per tag) in the
// schema mapping.
func TestSchemaTypeMapping(t *testing.T) {
	tests := []struct {
		name     string
		typ      reflect.Type
		tag      string
		want     string
		required bool
	}{
		{"string", reflect.TypeFor[string](), ``, `{"type":"string"}`, true},
		{"bool", reflect.TypeFor[bool](), ``, `{"type":"boolean"}`, true},
		{"int", reflect.TypeFor[int](), ``, `{"type":"integer"}`, true},
		{"int64", reflect.TypeFor[int64](), ``, `{"type":"integer"}`, true},
		{"int8 width bounds", reflect.TypeFor[int8](), ``, `{"type":"integer","minimum":-128,"maximum":127}`, true},
		{"int16 width bounds", reflect.TypeFor[int16](), ``, `{"type":"integer","minimum":-32768,"maximum":32767}`, true},
		{"int32 width bounds", reflect.TypeFor[int32](), ``, `{"type":"integer","minimum":-2147483648,"maximum":2147483647}`, true},
		{"uint", reflect.TypeFor[uint](), ``, `{"type":"integer","minimum":0}`, true},
		{"uint64", reflect.TypeFor[uint64](), ``, `{"type":"integer","minimum":0}`, true},
		{"uint8 width bounds", reflect.TypeFor[uint8](), ``, `{"type":"integer","minimum":0,"maximum":255}`, true},
		{"uint16 width bounds", reflect.TypeFor[uint16](), ``, `{"type":"integer","minimum":0,"maximum":65535}`, true},
		{"uint32 width bounds", reflect.TypeFor[uint32](), ``, `{"type":"integer","minimum":0,"maximum":4294967295}`, true},
		{"float32", reflect.TypeFor[float32](), ``, `{"type":"number"}`, true},
		{"float64", reflect.TypeFor[float64](), ``, `{"type":"number"}`, true},
		{"time.Time", reflect.TypeFor[time.Time](), ``, `{"type":"string","format":"date-time"}`, true},
		{"[]byte is base64", reflect.TypeFor[[]byte](), `json:"f,omitempty"`, `{"type":["string","null"],"contentEncoding":"base64"}`, false},
		{"[]byte nullable", reflect.TypeFor[[]byte](), ``, `{"type":["string","null"],"contentEncoding":"base64"}`, true},
		{"json.RawMessage", reflect.TypeFor[json.RawMessage](), ``, `{}`, true},
		{"any", reflect.TypeFor[any](), ``, `{}`, true},
		{"json.Number", reflect.TypeFor[json.Number](), ``, `{"type":"number"}`, true},
		{"slice", reflect.TypeFor[[]string](), `json:"f,omitempty"`, `{"type":["array","null"],"items":{"type":"string"}}`, false},
		{"slice nullable", reflect.TypeFor[[]int](), ``, `{"type":["array","null"],"items":{"type":"integer"}}`, true},
		{"slice of pointers", reflect.TypeFor[[]*int](), `json:"f,omitempty"`, `{"type":["array","null"],"items":{"type":["integer","null"]}}`, false},
		{"array", reflect.TypeFor[[2]bool](), ``, `{"type":"array","items":{"type":"boolean"},"minItems":2,"maxItems":2}`, true},
		{"map", reflect.TypeFor[map[string]int](), `json:"f,omitempty"`, `{"type":["object","null"],"additionalProperties":{"type":"integer"}}`, false},
		{"map int keys", reflect.TypeFor[map[int]string](), `json:"f,omitempty"`, `{"type":["object","null"],"additionalProperties":{"type":"string"},"propertyNames":{"pattern":"^-?[0-9]+$"}}`, false},
		{"map text keys", reflect.TypeFor[map[netip.Addr]bool](), `json:"f,omitempty"`, `{"type":["object","null"],"additionalProperties":{"type":"boolean"}}`, false},
		{"pointer is optional", reflect.TypeFor[*string](), ``, `{"type":["string","null"]}`, false},
		{"pointer omitempty", reflect.TypeFor[*string](), `json:"f,omitempty"`, `{"type":["string","null"]}`, false},
		{"nested struct", reflect.TypeFor[leaf](), ``, `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}`, true},
		{"text marshaler", reflect.TypeFor[textID](), ``, `{"type":"string"}`, true},
		{"json marshaler", reflect.TypeFor[custom](), ``, `{}`, true},
		{"big.Int", reflect.TypeFor[*big.Int](), `json:"f,omitempty"`, `{}`, false},
		{"string option int", reflect.TypeFor[int64](), `json:"f,string"`, `{"type":"string","pattern":"^-?[0-9]+$"}`, true},
		{"string option bool", reflect.TypeFor[bool](), `json:"f,string"`, `{"type":"string","enum":["true","false"]}`, true},
		{"renamed", reflect.TypeFor[string](), `json:"other_name"`, `{"type":"string"}`, true},
		{"omitempty is optional", reflect.TypeFor[string](), `json:"f,omitempty"`, `{"type":"string"}`, false},
		{"omitzero is optional", reflect.TypeFor[time.Time](), `json:"f,omitzero"`, `{"type":"string","format":"date-time"}`, false},
		{"*time.Time is a date-time", reflect.TypeFor[*time.Time](), `json:"f,omitempty"`, `{"type":["string","null"],"format":"date-time"}`, false},
		{"*time.Time nullable", reflect.TypeFor[*time.Time](), ``, `{"type":["string","null"],"format":"date-time"}`, false},
		{"pointer to text marshaler", reflect.TypeFor[*textID](), `json:"f,omitempty"`, `{"type":["string","null"]}`, false},

		// Tags.
		{"description with commas", reflect.TypeFor[string](), `description:"City, state, or country; any of them"`, `{"type":"string","description":"City, state, or country; any of them"}`, true},
		{"go-sdk jsonschema tag", reflect.TypeFor[string](), `jsonschema:"the name, in full"`, `{"type":"string","description":"the name, in full"}`, true},
		{"pattern with commas", reflect.TypeFor[string](), `pattern:"^[a-z]{2,5}(,[a-z]{2,5})*$"`, `{"type":"string","pattern":"^[a-z]{2,5}(,[a-z]{2,5})*$"}`, true},
		{"default with commas", reflect.TypeFor[string](), `json:"f,omitempty" default:"Paris, France"`, `{"type":"string","default":"Paris, France"}`, false},
		{"default makes optional", reflect.TypeFor[int](), `default:"7"`, `{"type":"integer","default":7}`, false},
		{"default array", reflect.TypeFor[[]string](), `json:"f,omitempty" default:"[\"a,b\",\"c\"]"`, `{"type":["array","null"],"default":["a,b","c"],"items":{"type":"string"}}`, false},
		{"enum", reflect.TypeFor[string](), `tool:"enum=red|green|blue"`, `{"type":"string","enum":["red","green","blue"]}`, true},
		{"enum escaped", reflect.TypeFor[string](), `tool:"enum=a\\|b|c\\;d"`, `{"type":"string","enum":["a|b","c;d"]}`, true},
		{"integer enum", reflect.TypeFor[int](), `tool:"enum=1|2|3"`, `{"type":"integer","enum":[1,2,3]}`, true},
		{"enum on items", reflect.TypeFor[[]string](), `json:"f,omitempty" tool:"enum=a|b;minItems=1;maxItems=2;uniqueItems"`, `{"type":"array","items":{"type":"string","enum":["a","b"]},"minItems":1,"maxItems":2,"uniqueItems":true}`, false},
		{"minimum and maximum", reflect.TypeFor[float64](), `tool:"minimum=-1.5;maximum=1e3"`, `{"type":"number","minimum":-1.5,"maximum":1e3}`, true},
		{"tag narrows width", reflect.TypeFor[uint8](), `tool:"minimum=1;maximum=1000"`, `{"type":"integer","minimum":1,"maximum":255}`, true},
		{"exclusive bounds", reflect.TypeFor[int](), `tool:"exclusiveMinimum=0;exclusiveMaximum=10"`, `{"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":10}`, true},
		{"string lengths and format", reflect.TypeFor[string](), `tool:"minLength=3;maxLength=64;format=email"`, `{"type":"string","format":"email","minLength":3,"maxLength":64}`, true},
		{"title", reflect.TypeFor[string](), `tool:"title=Full name"`, `{"type":"string","title":"Full name"}`, true},
		{"required pointer", reflect.TypeFor[*int](), `json:"f,omitempty" tool:"required"`, `{"type":["integer","null"]}`, true},
		{"optional value", reflect.TypeFor[int](), `tool:"optional"`, `{"type":"integer"}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, required, err := fieldSchema(t, tt.typ, tt.tag)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("schema\n got: %s\nwant: %s", got, tt.want)
			}
			if required != tt.required {
				t.Errorf("required = %v, want %v", required, tt.required)
			}
		})
	}
}

// TestSchemaRefusals has one row per declaration mistake that must fail at
// declaration, not in front of a model.
func TestSchemaRefusals(t *testing.T) {
	tests := []struct {
		name string
		typ  reflect.Type
		tag  string
	}{
		{"channel", reflect.TypeFor[chan int](), ``},
		{"func", reflect.TypeFor[func()](), ``},
		{"complex", reflect.TypeFor[complex128](), ``},
		{"non-empty interface", reflect.TypeFor[error](), ``},
		{"struct map key", reflect.TypeFor[map[leaf]int](), ``},
		{"unknown tool tag key", reflect.TypeFor[string](), `tool:"minimun=1"`},
		{"minimum on a string", reflect.TypeFor[string](), `tool:"minimum=1"`},
		{"pattern on an integer", reflect.TypeFor[int](), `pattern:"^1$"`},
		{"minItems on a string", reflect.TypeFor[string](), `tool:"minItems=1"`},
		{"bad regexp", reflect.TypeFor[string](), `pattern:"("`},
		{"bad number", reflect.TypeFor[int](), `tool:"maximum=ten"`},
		{"non-integer enum", reflect.TypeFor[int](), `tool:"enum=1|two"`},
		{"default outside enum", reflect.TypeFor[string](), `tool:"enum=a|b" default:"c"`},
		{"default below minimum", reflect.TypeFor[int](), `tool:"minimum=5" default:"1"`},
		{"default not JSON", reflect.TypeFor[int](), `default:"seven"`},
		{"default beyond width", reflect.TypeFor[int8](), `default:"300"`},
		{"required and optional", reflect.TypeFor[int](), `tool:"required;optional"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := reflect.StructOf([]reflect.StructField{{Name: "F", Type: tt.typ, Tag: reflect.StructTag(tt.tag)}})
			_, err := newTyped("t", "", st, nil, nil, nil)
			if !errors.Is(err, ErrInvalidSchema) {
				t.Fatalf("err = %v, want ErrInvalidSchema", err)
			}
		})
	}
}

type Embedded struct {
	Shared string `json:"shared"`
	Inner  int    `json:"inner,omitempty"`
}

type embedder struct {
	Embedded
	*leaf
	Shared  string `json:"shared"` // shallower: wins over Embedded.Shared
	Skipped string `json:"-"`
	Dash    string `json:"-,"` //nolint:staticcheck // deliberately the name "-", as encoding/json allows
	private string //nolint:unused // unexported fields must stay out of the schema
}

type tree struct {
	Value    int     `json:"value"`
	Children []tree  `json:"children,omitempty"`
	Parent   *tree   `json:"parent,omitempty" description:"Up, one level"`
	Sibling  *branch `json:"sibling"`
}

type branch struct {
	Name string  `json:"name"`
	Next *branch `json:"next"`
}

func TestSchemaStructs(t *testing.T) {
	t.Run("embedded and hidden fields follow encoding/json", func(t *testing.T) {
		s, err := generateSchema(reflect.TypeFor[embedder](), false)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(s)
		want := `{"type":"object","properties":{"inner":{"type":"integer"},"a":{"type":"string"},"shared":{"type":"string"},"-":{"type":"string"}},"required":["a","shared","-"],"additionalProperties":false}`
		if string(raw) != want {
			t.Errorf("schema\n got: %s\nwant: %s", raw, want)
		}
	})
	t.Run("recursive types go through $defs", func(t *testing.T) {
		s, err := generateSchema(reflect.TypeFor[tree](), false)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(s)
		want := `{"type":"object","properties":{"value":{"type":"integer"},"children":{"type":["array","null"],"items":{"$ref":"#"}},"parent":{"description":"Up, one level","anyOf":[{"$ref":"#"},{"type":"null"}]},"sibling":{"anyOf":[{"$ref":"#/$defs/branch"},{"type":"null"}]}},"required":["value"],"additionalProperties":false,"$defs":{"branch":{"type":"object","properties":{"name":{"type":"string"},"next":{"anyOf":[{"$ref":"#/$defs/branch"},{"type":"null"}]}},"required":["name"],"additionalProperties":false}}}`
		if string(raw) != want {
			t.Errorf("schema\n got: %s\nwant: %s", raw, want)
		}
		if _, _, _, err := compileSchema(raw); err != nil {
			t.Fatal(err)
		}
	})
}
