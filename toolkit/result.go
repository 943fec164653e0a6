package toolkit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolplane/toolplane/toolkit/spec"
)

var callResultType = reflect.TypeFor[*spec.CallResult]()

// successText is the result of a tool with no output.
const successText = "Success"

func successResult() *spec.CallResult {
	return &spec.CallResult{Content: []spec.Content{{Type: "text", Text: successText}}}
}

func textResult(s string) *spec.CallResult {
	return &spec.CallResult{Content: []spec.Content{{Type: "text", Text: s}}}
}

// errorResult is the result an error becomes, for the model to read, cut
// to 8 KiB.
func errorResult(err error) *spec.CallResult {
	return &spec.CallResult{Content: []spec.Content{{Type: "text", Text: cut(err.Error(), maxErrorText)}}, IsError: true}
}

// encodeError is a result that encoding/json could not encode, or whose
// JSON breaks the tool's output schema. The model reads only that; the
// cause, which names Go types, is logged.
type encodeError struct{ err error }

func (e *encodeError) Error() string {
	return "the tool's result could not be encoded as JSON that its output schema allows (internal error)"
}

const outputURL = "urn:toolplane:tool-output"

func compileOutput(raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(outputURL, doc); err != nil {
		return nil, err
	}
	return c.Compile(outputURL)
}

// conforms checks a result's JSON against its output schema.
func conforms(sch *jsonschema.Schema, b []byte) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return err
	}
	if err := sch.Validate(doc); err != nil {
		return fmt.Errorf("the result breaks the output schema: %w", err)
	}
	return nil
}
func (e *encodeError) Unwrap() error { return e.err }

// jsonResult returns the JSON as text, and as structuredContent when it is
// an object (MCP requires structured content to be one).
func jsonResult(b []byte) *spec.CallResult {
	r := &spec.CallResult{Content: []spec.Content{{Type: "text", Text: string(b)}}}
	if len(b) > 0 && b[0] == '{' {
		r.StructuredContent = b
	}
	return r
}

// resultFor returns how results of type t are turned into a CallResult, and
// t's output schema, when it has one. The function it returns takes a
// pointer to the result: encoding/json then marshals the value as
// addressable, so that a method with a pointer receiver (MarshalText on
// *big.Float, say) counts, as the output schema says it does.
func resultFor(t reflect.Type) (func(ptr any) (*spec.CallResult, error), json.RawMessage, error) {
	switch {
	case t == callResultType || t.Kind() == reflect.Interface:
		// A tool that builds its own result, or decides its shape per call.
		return func(ptr any) (*spec.CallResult, error) {
			return resultOfAny(reflect.ValueOf(ptr).Elem().Interface())
		}, nil, nil
	case t.Kind() == reflect.String && !customJSON(t, true) && !textual(t, true):
		return func(ptr any) (*spec.CallResult, error) {
			return textResult(reflect.ValueOf(ptr).Elem().String()), nil
		}, nil, nil
	case t.Kind() == reflect.Struct && t.NumField() == 0 && !customJSON(t, true):
		return func(any) (*spec.CallResult, error) { return successResult(), nil }, nil, nil
	}
	var outSchema json.RawMessage
	var check *jsonschema.Schema
	var quick *fastDec
	// A pointer may be nil, and null is no structured result: a pointer
	// declares no output schema, so that a client that holds the result to
	// the schema never finds it missing.
	if isObjectType(t, true) && t.Kind() != reflect.Pointer {
		s, asserts, err := generate(t, true)
		if err != nil {
			return nil, nil, err
		}
		if outSchema, err = json.Marshal(s); err != nil {
			return nil, nil, err
		}
		if asserts {
			// A tag's enum, pattern or bound is a promise the Go type does
			// not keep by itself: each result is held to it, since MCP
			// wants structured content to conform to the output schema.
			if check, err = compileOutput(outSchema); err != nil {
				return nil, nil, err
			}
			// What the fast binder takes, the schema accepts: a result it
			// takes needs no generic validation.
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(outSchema))
			if err != nil {
				return nil, nil, err
			}
			quick = compileFast(t, doc)
		}
	} else if _, err := generateSchema(t, true); err != nil {
		return nil, nil, err
	}
	isMap := t.Kind() == reflect.Map
	return func(ptr any) (*spec.CallResult, error) {
		if isMap && outSchema != nil && reflect.ValueOf(ptr).Elem().IsNil() {
			// A nil map is null to encoding/json, and null is no
			// structured result: MCP wants one wherever an output schema
			// is declared. It is the empty object the schema allows.
			return jsonResult([]byte("{}")), nil
		}
		b, err := json.Marshal(ptr)
		if err != nil {
			return nil, &encodeError{err}
		}
		if check != nil && (quick == nil || !quick.bind(b, reflect.New(t).Elem())) {
			if err := conforms(check, b); err != nil {
				return nil, &encodeError{err}
			}
		}
		return jsonResult(b), nil
	}, outSchema, nil
}

// resultOfAny turns the result of a dynamic or scanned tool into a
// CallResult: nil is "Success", a string is text, anything else is JSON.
func resultOfAny(v any) (*spec.CallResult, error) {
	switch x := v.(type) {
	case nil:
		return successResult(), nil
	case string:
		return textResult(x), nil
	case json.RawMessage:
		if !json.Valid(x) {
			return nil, fmt.Errorf("the tool returned invalid JSON")
		}
		return jsonResult(x), nil
	case *spec.CallResult:
		if x == nil {
			return successResult(), nil
		}
		return x, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, &encodeError{err}
	}
	return jsonResult(b), nil
}
