package toolkit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// call registers tool alone and calls it with args.
func call(t *testing.T, tool *toolkit.Tool, args string) *spec.CallResult {
	t.Helper()
	reg := new(toolkit.Registry)
	if err := reg.Add(tool); err != nil {
		t.Fatal(err)
	}
	res, err := reg.Call(context.Background(), tool.Name(), json.RawMessage(args))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

type forecastPrefs struct {
	Units string `json:"units,omitempty" tool:"enum=metric|imperial" default:"metric"`
	Days  int    `json:"days,omitempty" default:"3"`
}

type forecastIn struct {
	City  string        `json:"city"`
	Prefs forecastPrefs `json:"prefs,omitzero"`
}

// A left-out object whose members have defaults is made, so that they
// apply, as the MCP Go SDK does.
func TestNestedDefaultsApplyWhenTheParentIsLeftOut(t *testing.T) {
	var got forecastIn
	tool := toolkit.MustNewAction("forecast", "", func(_ context.Context, in forecastIn) error { got = in; return nil })
	for _, args := range []string{`{"city":"x"}`, `{"city":"x","prefs":{}}`} {
		got = forecastIn{}
		if res := call(t, tool, args); res.IsError {
			t.Fatalf("%s: %s", args, res.Text())
		}
		if want := (forecastPrefs{Units: "metric", Days: 3}); got.Prefs != want {
			t.Errorf("%s: prefs %+v, want %+v", args, got.Prefs, want)
		}
	}
}

type treeNode struct {
	Name   string      `json:"name"`
	Parent *treeNode   `json:"parent"`
	Kids   []*treeNode `json:"kids,omitempty"`
}

// Recursion through a nullable pointer gets the whole repair plan: names
// in another case are repaired inside it, and a missing name is reported
// as missing, not as "expected a null".
func TestRecursiveTypesThroughNullablePointers(t *testing.T) {
	var got treeNode
	tool := toolkit.MustNewAction("tree", "", func(_ context.Context, in treeNode) error { got = in; return nil })
	res := call(t, tool, `{"name":"a","parent":{"NAME":"b","parent":null},"kids":[{"Name":"k","parent":null}]}`)
	if res.IsError {
		t.Fatalf("repair inside the recursive type failed: %s", res.Text())
	}
	if got.Parent == nil || got.Parent.Name != "b" || len(got.Kids) != 1 || got.Kids[0].Name != "k" {
		t.Errorf("bound %+v", got)
	}
	res = call(t, tool, `{"name":"a","parent":{"parent":null}}`)
	if !res.IsError || !strings.Contains(res.Text(), "$.parent.name: expected a string (required), received nothing") ||
		strings.Contains(res.Text(), "null") && strings.Contains(res.Text(), "expected a null") {
		t.Errorf("error for a missing name inside the recursion:\n%s", res.Text())
	}
}

// markedLevel writes itself as text but has no UnmarshalText: encoding/json
// writes it as a string.
type markedLevel int

func (l markedLevel) MarshalText() ([]byte, error) { return []byte("L" + strconv.Itoa(int(l))), nil }

type outBase struct {
	ID string `json:"id"`
}

type outEmbedsPointer struct {
	*outBase
	Name string `json:"name"`
}

type outQuotedPointer struct {
	N *int `json:"n,string"`
}

type outMarked struct {
	Level markedLevel `json:"level"`
}

type outPlain struct {
	Name string `json:"name"`
}

// ptrLevel writes itself as text with a pointer receiver: encoding/json
// uses the method only where the value is addressable.
type ptrLevel struct{ n int }

func (l *ptrLevel) MarshalText() ([]byte, error) { return []byte("P" + strconv.Itoa(l.n)), nil }

type outPtrText struct {
	Level ptrLevel            `json:"level"`
	Big   big.Float           `json:"big"`
	ByKey map[string]ptrLevel `json:"byKey"`
	List  []ptrLevel          `json:"list"`
}

// For output: either the structured result validates against the declared
// outputSchema, or no outputSchema is declared.
func TestStructuredContentMatchesTheOutputSchema(t *testing.T) {
	tools := []*toolkit.Tool{
		toolkit.MustNew("nil_pointer", "", func(context.Context, struct{}) (*outPlain, error) { return nil, nil }),
		toolkit.MustNew("text_marshaler", "", func(context.Context, struct{}) (outMarked, error) { return outMarked{Level: 2}, nil }),
		toolkit.MustNew("nil_embedded", "", func(context.Context, struct{}) (outEmbedsPointer, error) {
			return outEmbedsPointer{Name: "x"}, nil
		}),
		toolkit.MustNew("nil_quoted", "", func(context.Context, struct{}) (outQuotedPointer, error) { return outQuotedPointer{}, nil }),
		toolkit.MustNew("plain", "", func(context.Context, struct{}) (outPlain, error) { return outPlain{Name: "x"}, nil }),
		toolkit.MustNew("pointer_receiver_text", "", func(context.Context, struct{}) (outPtrText, error) {
			return outPtrText{Level: ptrLevel{3}, Big: *big.NewFloat(1.5), ByKey: map[string]ptrLevel{"a": {1}}, List: []ptrLevel{{2}}}, nil
		}),
		toolkit.MustNew("nil_map", "", func(context.Context, struct{}) (map[string]int, error) { return nil, nil }),
		toolkit.MustNew("map_of_pointer_receiver_text", "", func(context.Context, struct{}) (map[string]outPtrText, error) {
			return map[string]outPtrText{"k": {Level: ptrLevel{1}}}, nil
		}),
	}
	for _, tool := range tools {
		t.Run(tool.Name(), func(t *testing.T) {
			res := call(t, tool, `{}`)
			if res.IsError {
				t.Fatal(res.Text())
			}
			out := tool.Spec().OutputSchema
			if len(out) == 0 {
				if tool.Name() == "plain" {
					t.Error("a plain struct declares no output schema")
				}
				return
			}
			if len(res.StructuredContent) == 0 {
				t.Fatalf("outputSchema %s is declared, but the result has no structuredContent", out)
			}
			validate(t, out, res.StructuredContent)
		})
	}
}

func validate(t *testing.T, schema, instance json.RawMessage) {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("urn:out", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("urn:out")
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(instance))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(v); err != nil {
		t.Errorf("structuredContent %s breaks outputSchema %s:\n%v", instance, schema, err)
	}
}

// hashCode reads itself from text like "#7", and has no MarshalText.
type hashCode int

func (c *hashCode) UnmarshalText(b []byte) error {
	n, err := strconv.Atoi(strings.TrimPrefix(string(b), "#"))
	*c = hashCode(n)
	return err
}

// stamp writes itself with MarshalJSON, and is read by its kind.
type stamp struct {
	V int `json:"v"`
}

func (s stamp) MarshalJSON() ([]byte, error) { return []byte(`"stamp"`), nil }

type customIn struct {
	Code  hashCode `json:"code,omitempty"`
	Stamp stamp    `json:"stamp,omitzero"`
}

// The input schema of a type with only UnmarshalText, or only MarshalJSON,
// accepts what encoding/json reads into it.
func TestCustomTypesAreReadAsEncodingJSONReadsThem(t *testing.T) {
	var got customIn
	tool := toolkit.MustNewAction("custom", "", func(_ context.Context, in customIn) error { got = in; return nil })
	if res := call(t, tool, `{"code":"#7","stamp":{"v":3}}`); res.IsError || got.Code != 7 || got.Stamp.V != 3 {
		t.Errorf("bound %+v: %s", got, res.Text())
	}
	for _, args := range []string{`{"stamp":"garbage"}`, `{"code":7}`} {
		if res := call(t, tool, args); !res.IsError {
			t.Errorf("%s was accepted, which encoding/json refuses", args)
		}
	}
}

type genericTree[T any] struct {
	Value T                `json:"value"`
	Kids  []genericTree[T] `json:"kids,omitempty"`
}

type treeItem struct {
	SKU string `json:"sku"`
}

type genericIn struct {
	Tree genericTree[treeItem] `json:"tree"`
}

func TestDefsOfGenericTypesDoNotShowImportPaths(t *testing.T) {
	tool := toolkit.MustNewAction("generic", "", func(context.Context, genericIn) error { return nil })
	schema := string(tool.Spec().InputSchema)
	if !strings.Contains(schema, `"$defs"`) {
		t.Fatalf("no $defs in %s", schema)
	}
	if strings.Contains(schema, "github.com") || strings.Contains(schema, "toolkit") {
		t.Errorf("the schema shows an import path: %s", schema)
	}
}

// A body of 50,000 unknown names gives a bounded error, not one that grows
// with it.
func TestArgumentErrorTextIsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"name":"a"`)
	for i := range 50000 {
		fmt.Fprintf(&b, `,"unknown_%d":1`, i)
	}
	b.WriteString(`,"` + strings.Repeat("k", 100000) + `":1}`)
	tool := toolkit.MustNew("greet", "", func(_ context.Context, in struct {
		Name string `json:"name"`
	}) (string, error) {
		return "hi", nil
	})
	res := call(t, tool, b.String())
	if !res.IsError {
		t.Fatal("accepted")
	}
	if n := len(res.Text()); n > 16<<10 {
		t.Errorf("error text of %d bytes for %d bytes of arguments", n, b.Len())
	}
	if !strings.Contains(res.Text(), "more problems") {
		t.Errorf("the error does not say that it left problems out:\n%.500s", res.Text())
	}

	huge := toolkit.MustNew("huge", "", func(context.Context, struct{}) (string, error) {
		return "", errors.New(strings.Repeat("x", 1<<20))
	})
	if res := call(t, huge, `{}`); len(res.Text()) > 16<<10 {
		t.Errorf("a tool's error of 1 MiB reached the model as %d bytes", len(res.Text()))
	}
}

func TestUnencodableResultDoesNotShowGoTypes(t *testing.T) {
	var logs bytes.Buffer
	reg := &toolkit.Registry{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	_ = reg.Add(toolkit.MustNewDynamic("chan", "", new(toolkit.Params).Schema(), func(context.Context, map[string]any) (any, error) {
		return map[string]any{"c": make(chan int)}, nil
	}))
	res, err := reg.Call(context.Background(), "chan", nil)
	if err != nil || !res.IsError {
		t.Fatalf("Call = %+v, %v", res, err)
	}
	if strings.Contains(res.Text(), "chan") || strings.Contains(res.Text(), "json:") {
		t.Errorf("the model reads Go internals: %s", res.Text())
	}
	if !strings.Contains(logs.String(), "chan int") {
		t.Errorf("the cause is not logged: %s", logs.String())
	}
}

func TestParamsSchemaSurfacesTheBuildersError(t *testing.T) {
	_, err := toolkit.NewDynamic("twice", "", new(toolkit.Params).String("a", "").String("a", "").Schema(),
		func(context.Context, map[string]any) (any, error) { return nil, nil })
	if !errors.Is(err, toolkit.ErrInvalidSchema) || !strings.Contains(err.Error(), `parameter "a" declared twice`) {
		t.Errorf("err = %v, want one that says the parameter was declared twice", err)
	}
}
