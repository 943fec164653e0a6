package toolkit

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// DynamicFunc is the function of a dynamic tool. args holds the repaired
// and validated arguments: objects are map[string]any, arrays []any, and
// numbers json.Number, so that integers stay exact (use its Int64 or
// Float64 method). Its result is turned into a CallResult as for a scanned
// tool: nil is "Success", a string is text, anything else is JSON.
type DynamicFunc func(ctx context.Context, args map[string]any) (any, error)

// NewDynamic declares a tool from a JSON Schema and a function over a map,
// for tools that come from configuration or plugins. The schema may be
// written by hand or built with [Params]; it must describe an object. It
// is compiled once, here, and the arguments are repaired and validated
// against it as for a typed tool. Write "additionalProperties": false to
// have unknown argument names refused.
//
// The error wraps [ErrInvalidName] or [ErrInvalidSchema].
func NewDynamic(name, description string, inputSchema json.RawMessage, fn DynamicFunc, opts ...Option) (*Tool, error) {
	if fn == nil {
		return nil, fmt.Errorf("%w: tool %q has a nil function", ErrInvalidSchema, name)
	}
	var mistake map[string]string
	if json.Unmarshal(inputSchema, &mistake) == nil && mistake[paramsErrorKey] != "" {
		return nil, fmt.Errorf("%w: tool %q: %s", ErrInvalidSchema, name, mistake[paramsErrorKey])
	}
	t, err := newTool(name, description, inputSchema, nil, opts)
	if err != nil {
		return nil, err
	}
	t.run = func(ctx context.Context, _ *binder, args any) (*spec.CallResult, error) {
		m, _ := args.(map[string]any) // validation has checked it is an object
		out, err := fn(ctx, m)
		if err != nil {
			return nil, err
		}
		return resultOfAny(out)
	}
	return t, nil
}

// MustNewDynamic is like [NewDynamic] but panics on error.
func MustNewDynamic(name, description string, inputSchema json.RawMessage, fn DynamicFunc, opts ...Option) *Tool {
	return must(NewDynamic(name, description, inputSchema, fn, opts...))
}

// Params builds the input schema of a dynamic tool, one parameter at a
// time, in the order given. Parameters are required unless marked
// [Optional] or given a [Default]; unknown names are refused.
//
//	schema := new(toolkit.Params).
//		String("city", "City name, e.g. Paris").
//		Integer("days", "Days ahead", toolkit.Minimum(1), toolkit.Maximum(14), toolkit.Default(3)).
//		Enum("units", "Unit system", []string{"metric", "imperial"}, toolkit.Optional()).
//		Schema()
//
// The zero value is an empty parameter list.
type Params struct {
	props properties
	req   []string
	err   error
}

// ParamOption refines one parameter of [Params].
type ParamOption func(*schema, *paramFlags) error

type paramFlags struct{ optional bool }

// Optional makes a parameter optional.
func Optional() ParamOption {
	return func(_ *schema, f *paramFlags) error { f.optional = true; return nil }
}

// Default gives a parameter a default (which makes it optional). The value
// is encoded as JSON.
func Default(v any) ParamOption {
	return func(s *schema, f *paramFlags) error {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("default: %w", err)
		}
		s.Default, f.optional = b, true
		return nil
	}
}

// Number is what [Minimum] and [Maximum] accept.
type Number interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

func numberOf[N Number](n N) json.Number {
	switch x := any(n).(type) {
	case float32:
		return json.Number(strconv.FormatFloat(float64(x), 'g', -1, 32))
	case float64:
		return json.Number(strconv.FormatFloat(x, 'g', -1, 64))
	}
	if n < 0 {
		return json.Number(strconv.FormatInt(int64(n), 10))
	}
	return json.Number(strconv.FormatUint(uint64(n), 10))
}

// Sensitive marks a parameter whose value must not be seen: it is served
// as writeOnly, and never appears in logs, spans or error messages, where
// it is shown as "[redacted]". A hand-written schema marks one with
// "writeOnly": true (or "x-sensitive": true).
func Sensitive() ParamOption {
	return func(s *schema, _ *paramFlags) error { s.WriteOnly = true; return nil }
}

// Minimum sets the smallest value a number may take. Integers keep their
// exact value.
func Minimum[N Number](n N) ParamOption {
	return func(s *schema, _ *paramFlags) error { s.Minimum = numberOf(n); return nil }
}

// Maximum sets the largest value a number may take.
func Maximum[N Number](n N) ParamOption {
	return func(s *schema, _ *paramFlags) error { s.Maximum = numberOf(n); return nil }
}

// MinLength sets the shortest length of a string, in characters.
func MinLength(n uint64) ParamOption {
	return func(s *schema, _ *paramFlags) error { s.MinLength = &n; return nil }
}

// MaxLength sets the longest length of a string, in characters.
func MaxLength(n uint64) ParamOption {
	return func(s *schema, _ *paramFlags) error { s.MaxLength = &n; return nil }
}

// Pattern sets a regular expression that a string must match.
func Pattern(re string) ParamOption {
	return func(s *schema, _ *paramFlags) error { s.Pattern = re; return nil }
}

// Format sets a string's format, such as "email" or "date-time".
func Format(f string) ParamOption {
	return func(s *schema, _ *paramFlags) error { s.Format = f; return nil }
}

// MinItems sets the fewest items of an array.
func MinItems(n uint64) ParamOption {
	return func(s *schema, _ *paramFlags) error { s.MinItems = &n; return nil }
}

// MaxItems sets the most items of an array.
func MaxItems(n uint64) ParamOption {
	return func(s *schema, _ *paramFlags) error { s.MaxItems = &n; return nil }
}

func (p *Params) add(name, description string, s *schema, opts []ParamOption) *Params {
	s.Description = description
	var f paramFlags
	for _, o := range opts {
		if err := o(s, &f); err != nil && p.err == nil {
			p.err = fmt.Errorf("parameter %q: %w", name, err)
		}
	}
	for _, n := range p.props.names {
		if n == name && p.err == nil {
			p.err = fmt.Errorf("parameter %q declared twice", name)
		}
	}
	p.props.add(name, s)
	if !f.optional {
		p.req = append(p.req, name)
	}
	return p
}

// String adds a string parameter.
func (p *Params) String(name, description string, opts ...ParamOption) *Params {
	return p.add(name, description, &schema{Type: "string"}, opts)
}

// Integer adds an integer parameter; its value arrives as a json.Number.
func (p *Params) Integer(name, description string, opts ...ParamOption) *Params {
	return p.add(name, description, &schema{Type: "integer"}, opts)
}

// Number adds a number parameter; its value arrives as a json.Number.
func (p *Params) Number(name, description string, opts ...ParamOption) *Params {
	return p.add(name, description, &schema{Type: "number"}, opts)
}

// Boolean adds a boolean parameter.
func (p *Params) Boolean(name, description string, opts ...ParamOption) *Params {
	return p.add(name, description, &schema{Type: "boolean"}, opts)
}

// Enum adds a string parameter that takes one of values. A model's value in
// another letter case arrives in the spelling given here.
func (p *Params) Enum(name, description string, values []string, opts ...ParamOption) *Params {
	enum := make([]any, len(values))
	for i, v := range values {
		enum[i] = v
	}
	return p.add(name, description, &schema{Type: "string", Enum: enum}, opts)
}

// Array adds an array parameter whose items are of the JSON type itemType:
// "string", "integer", "number", "boolean" or "object".
func (p *Params) Array(name, description, itemType string, opts ...ParamOption) *Params {
	if _, ok := typeBits[itemType]; !ok || itemType == "null" || itemType == "array" {
		if p.err == nil {
			p.err = fmt.Errorf("parameter %q: unknown item type %q", name, itemType)
		}
	}
	return p.add(name, description, &schema{Type: "array", Items: &schema{Type: itemType}}, opts)
}

// Object adds an object parameter whose members are the parameters of
// nested.
func (p *Params) Object(name, description string, nested *Params, opts ...ParamOption) *Params {
	if nested.err != nil && p.err == nil {
		p.err = fmt.Errorf("parameter %q: %w", name, nested.err)
	}
	return p.add(name, description, nested.object(), opts)
}

func (p *Params) object() *schema {
	props := p.props
	return &schema{Type: "object", Properties: &props, Required: p.req, AdditionalProperties: false}
}

// Schema returns the JSON Schema of the parameters, for [NewDynamic]. A
// mistake in building them (a parameter declared twice, an unknown item
// type) makes a schema that carries the mistake, which NewDynamic refuses
// with an error that says what it was; [Params.Build] returns it directly.
func (p *Params) Schema() json.RawMessage {
	s, err := p.Build()
	if err != nil {
		b, _ := json.Marshal(map[string]string{paramsErrorKey: err.Error()})
		return b
	}
	return s
}

// paramsErrorKey carries a mistake of Params from Schema to NewDynamic.
const paramsErrorKey = "x-toolkit-params-error"

// Build returns the JSON Schema of the parameters, or the first mistake made
// in building them.
func (p *Params) Build() (json.RawMessage, error) {
	if p.err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidSchema, p.err)
	}
	return json.Marshal(p.object())
}
