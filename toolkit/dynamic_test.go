package toolkit

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParamsSchema(t *testing.T) {
	schema, err := new(Params).
		String("city", "City name, e.g. Paris, France", MinLength(1), Pattern("^[^,]+(, [^,]+)?$")).
		Integer("days", "Days ahead", Minimum(1), Maximum(14), Default(3)).
		Number("ratio", "A ratio", Minimum(-0.5), Optional()).
		Boolean("verbose", "More detail", Default(false)).
		Enum("units", "Unit system", []string{"metric", "imperial"}, Optional()).
		Array("tags", "Tags", "string", MaxItems(5), Optional()).
		Object("where", "A place", new(Params).Number("lat", "Latitude").Number("lon", "Longitude"), Optional()).
		Integer("id", "An exact id", Maximum(uint64(18446744073709551615)), Optional()).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"object","properties":{` +
		`"city":{"type":"string","description":"City name, e.g. Paris, France","pattern":"^[^,]+(, [^,]+)?$","minLength":1},` +
		`"days":{"type":"integer","description":"Days ahead","default":3,"minimum":1,"maximum":14},` +
		`"ratio":{"type":"number","description":"A ratio","minimum":-0.5},` +
		`"verbose":{"type":"boolean","description":"More detail","default":false},` +
		`"units":{"type":"string","description":"Unit system","enum":["metric","imperial"]},` +
		`"tags":{"type":"array","description":"Tags","items":{"type":"string"},"maxItems":5},` +
		`"where":{"type":"object","description":"A place","properties":{"lat":{"type":"number","description":"Latitude"},"lon":{"type":"number","description":"Longitude"}},"required":["lat","lon"],"additionalProperties":false},` +
		`"id":{"type":"integer","description":"An exact id","maximum":18446744073709551615}},` +
		`"required":["city"],"additionalProperties":false}`
	if string(schema) != want {
		t.Errorf("schema\n got: %s\nwant: %s", schema, want)
	}
}

func TestParamsMistakes(t *testing.T) {
	tests := []struct {
		name   string
		params *Params
	}{
		{"declared twice", new(Params).String("a", "").Integer("a", "")},
		{"unknown item type", new(Params).Array("a", "", "strng")},
		{"mistake in a nested object", new(Params).Object("o", "", new(Params).String("x", "").String("x", ""))},
		{"default that cannot be JSON", new(Params).String("a", "", Default(func() {}))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.params.Build(); !errors.Is(err, ErrInvalidSchema) {
				t.Errorf("Build err = %v", err)
			}
			if _, err := NewDynamic("d", "", tt.params.Schema(), func(context.Context, map[string]any) (any, error) { return nil, nil }); !errors.Is(err, ErrInvalidSchema) {
				t.Errorf("NewDynamic err = %v", err)
			}
		})
	}
}

func TestDynamic(t *testing.T) {
	var got map[string]any
	tool, err := NewDynamic("forecast", "Forecasts.", new(Params).
		String("city", "City").
		Integer("days", "Days", Minimum(1), Default(3)).
		Enum("units", "Units", []string{"metric", "imperial"}, Optional()).
		Schema(),
		func(_ context.Context, args map[string]any) (any, error) {
			got = args
			if args["city"] == "nowhere" {
				return nil, errors.New("unknown city")
			}
			return map[string]any{"city": args["city"], "days": args["days"]}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	r := &Registry{}
	_ = r.Add(tool)
	ctx := context.Background()

	res, err := r.Call(ctx, "forecast", json.RawMessage(`"{\"city\":\"Oslo\",\"units\":\"METRIC\",}"`))
	if err != nil || res.IsError {
		t.Fatalf("Call = %+v, %v", res, err)
	}
	wantArgs := map[string]any{"city": "Oslo", "days": json.Number("3"), "units": "metric"}
	if !reflect.DeepEqual(got, wantArgs) {
		t.Errorf("args = %#v, want %#v", got, wantArgs)
	}
	if string(res.StructuredContent) != `{"city":"Oslo","days":3}` {
		t.Errorf("structuredContent = %s", res.StructuredContent)
	}
	_, _ = r.Call(ctx, "forecast", json.RawMessage(`{"city":"Oslo","days":"9223372036854775807"}`))
	if got["days"] != json.Number("9223372036854775807") {
		t.Errorf("days = %#v, want the exact number", got["days"])
	}
	res, _ = r.Call(ctx, "forecast", json.RawMessage(`{"city":"Oslo","days":0.5,"dayz":1}`))
	if !res.IsError || !strings.Contains(res.Text(), "$.days: expected an integer, received 0.5") ||
		!strings.Contains(res.Text(), `$.dayz: expected a known argument name, received unknown name "dayz" (did you mean "days"?); valid names are city, days, units`) {
		t.Errorf("refusal = %s", res.Text())
	}
	res, _ = r.Call(ctx, "forecast", json.RawMessage(`{"city":"nowhere"}`))
	if !res.IsError || res.Text() != "unknown city" {
		t.Errorf("execution error = %+v", res)
	}
}

func TestDynamicRawSchema(t *testing.T) {
	// A hand-written schema with $defs, a nullable reference and a
	// keyword the plan does not repair under (oneOf): the validator still
	// judges it.
	schema := json.RawMessage(`{
		"type": "object",
		"properties": {
			"point": {"$ref": "#/$defs/point"},
			"maybe": {"anyOf": [{"$ref": "#/$defs/point"}, {"type": "null"}]},
			"either": {"oneOf": [{"type": "integer"}, {"type": "boolean"}]}
		},
		"required": ["point"],
		"$defs": {"point": {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer", "default": 0}}, "required": ["x"]}}
	}`)
	var got map[string]any
	tool := MustNewDynamic("raw", "", schema, func(_ context.Context, args map[string]any) (any, error) { got = args; return "ok", nil })
	r := &Registry{}
	_ = r.Add(tool)
	ctx := context.Background()
	res, _ := r.Call(ctx, "raw", json.RawMessage(`{"point":{"x":"4"},"maybe":{"x":1.0},"either":true,"other":1}`))
	if res.IsError {
		t.Fatalf("refused: %s", res.Text())
	}
	want := map[string]any{
		"point":  map[string]any{"x": json.Number("4"), "y": json.Number("0")},
		"maybe":  map[string]any{"x": json.Number("1"), "y": json.Number("0")},
		"either": true,
		"other":  json.Number("1"), // additionalProperties is not false: kept
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("args = %#v, want %#v", got, want)
	}
	res, _ = r.Call(ctx, "raw", json.RawMessage(`{"point":{},"either":"x"}`))
	if !res.IsError || !strings.Contains(res.Text(), "$.point.x: expected an integer (required), received nothing") || !strings.Contains(res.Text(), "$.either") {
		t.Errorf("refusal = %s", res.Text())
	}
}

func TestDynamicRefusals(t *testing.T) {
	fn := func(context.Context, map[string]any) (any, error) { return nil, nil }
	tests := []struct {
		name   string
		schema string
	}{
		{"not JSON", `{"type":`},
		{"not an object schema", `{"type":"string"}`},
		{"no type", `{"properties":{}}`},
		{"bad regexp", `{"type":"object","properties":{"a":{"type":"string","pattern":"("}}}`},
		{"default breaks its schema", `{"type":"object","properties":{"a":{"type":"integer","minimum":5,"default":1}}}`},
		{"dangling reference", `{"type":"object","properties":{"a":{"$ref":"#/$defs/missing"}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewDynamic("d", "", json.RawMessage(tt.schema), fn); !errors.Is(err, ErrInvalidSchema) {
				t.Errorf("err = %v, want ErrInvalidSchema", err)
			}
		})
	}
	if _, err := NewDynamic("d", "", json.RawMessage(`{"type":"object"}`), nil); !errors.Is(err, ErrInvalidSchema) {
		t.Errorf("nil function: err = %v", err)
	}
}

func TestDynamicResults(t *testing.T) {
	tests := []struct {
		name       string
		out        any
		text       string
		structured string
	}{
		{"nil is Success", nil, "Success", ""},
		{"string is text", "hi", "hi", ""},
		{"map is structured", map[string]int{"a": 1}, `{"a":1}`, `{"a":1}`},
		{"raw JSON object", json.RawMessage(`{"b":2}`), `{"b":2}`, `{"b":2}`},
		{"slice is JSON text", []int{1}, `[1]`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := call(t, MustNewDynamic("d", "", json.RawMessage(`{"type":"object"}`), func(context.Context, map[string]any) (any, error) { return tt.out, nil }), `{}`)
			if res.Text() != tt.text || string(res.StructuredContent) != tt.structured || res.IsError {
				t.Errorf("result = %+v", res)
			}
		})
	}
}

func TestDynamicOpenObjectKeepsNames(t *testing.T) {
	var got map[string]any
	tool := MustNewDynamic("open", "", json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}}}`),
		func(_ context.Context, args map[string]any) (any, error) { got = args; return nil, nil })
	call(t, tool, `{"name":"a","NAME":"b"}`)
	if want := map[string]any{"name": "a", "NAME": "b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("args = %v, want %v", got, want)
	}
}
