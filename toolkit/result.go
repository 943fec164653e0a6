package toolkit

import (
	"encoding/json"
	"fmt"
	"reflect"

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

// encodeError is a result that encoding/json could not encode. The model
// reads only that; the cause, which names Go types, is logged.
type encodeError struct{ err error }

func (e *encodeError) Error() string {
	return "the tool's result could not be encoded as JSON (internal error)"
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
// t's output schema, when it has one.
func resultFor(t reflect.Type) (func(any) (*spec.CallResult, error), json.RawMessage, error) {
	switch {
	case t == callResultType || t.Kind() == reflect.Interface:
		// A tool that builds its own result, or decides its shape per call.
		return resultOfAny, nil, nil
	case t.Kind() == reflect.String && !customJSON(t, true) && !textual(t, true):
		return func(v any) (*spec.CallResult, error) {
			return textResult(reflect.ValueOf(v).String()), nil
		}, nil, nil
	case t.Kind() == reflect.Struct && t.NumField() == 0 && !customJSON(t, true):
		return func(any) (*spec.CallResult, error) { return successResult(), nil }, nil, nil
	}
	var outSchema json.RawMessage
	// A pointer may be nil, and null is no structured result: a pointer
	// declares no output schema, so that a client that holds the result to
	// the schema never finds it missing.
	if isObjectType(t, true) && t.Kind() != reflect.Pointer {
		s, err := generateSchema(t, true)
		if err != nil {
			return nil, nil, err
		}
		if outSchema, err = json.Marshal(s); err != nil {
			return nil, nil, err
		}
	} else if _, err := generateSchema(t, true); err != nil {
		return nil, nil, err
	}
	return func(v any) (*spec.CallResult, error) {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, &encodeError{err}
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
