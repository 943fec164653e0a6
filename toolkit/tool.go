package toolkit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// Tool is a declared tool: its MCP description, and everything a call
// needs, built once when it is declared (the input schema, its compiled
// validator, the repair plan and the typed decoder). A Tool is immutable and
// safe for concurrent use; register it with [Registry.Add].
type Tool struct {
	spec      spec.Tool
	scopes    []string
	timeout   time.Duration
	sem       chan struct{}
	plan      *plan
	validator *jsonschema.Schema
	// run decodes the repaired, validated arguments and calls the
	// function. It reports decoding problems to the binder.
	run func(ctx context.Context, b *binder, args any) (*spec.CallResult, error)
	// runFast, if set, binds strict arguments straight into the typed
	// input and calls the function; ok is false, and the function has not
	// run, when it did not take the arguments (see fast.go).
	runFast func(ctx context.Context, raw []byte) (res *spec.CallResult, err error, ok bool)
}

// Name returns the tool's name.
func (t *Tool) Name() string { return t.spec.Name }

// Spec returns the tool as MCP describes it: name, title, description,
// input and output schemas, annotations and _meta. The schemas,
// annotations and _meta are shared with the tool: do not modify them.
func (t *Tool) Spec() spec.Tool { return t.spec }

// Scopes returns the scopes a caller must hold, as declared with [Scopes].
func (t *Tool) Scopes() []string { return t.scopes }

// New declares a tool from a typed function. The input schema is generated
// from In, which must be a struct (or a map with string keys, or a pointer
// to either); the output schema from Out. A string Out is returned as text,
// an empty struct Out as "Success", anything else as JSON text plus
// structuredContent when it is a JSON object. An Out of interface type is
// judged per call, as for [NewDynamic]; a *spec.CallResult Out is returned
// as it is, for a tool that builds its own result.
//
// The error wraps [ErrInvalidName] or [ErrInvalidSchema].
func New[In, Out any](name, description string, fn func(context.Context, In) (Out, error), opts ...Option) (*Tool, error) {
	if fn == nil {
		return nil, fmt.Errorf("%w: tool %q has a nil function", ErrInvalidSchema, name)
	}
	inType, outType := reflect.TypeFor[In](), reflect.TypeFor[Out]()
	result, outSchema, err := resultFor(outType)
	if err != nil {
		return nil, fmt.Errorf("%w: tool %q output: %w", ErrInvalidSchema, name, err)
	}
	return newTyped(name, description, inType, outSchema, opts, func(dec *decoder, fast *fastDec) (runFunc, fastRunFunc) {
		run := func(ctx context.Context, b *binder, args any) (*spec.CallResult, error) {
			var in In
			dec.decode(b, args, reflect.ValueOf(&in).Elem())
			if len(b.problems) > 0 {
				return nil, nil
			}
			out, err := fn(ctx, in)
			if err != nil {
				return nil, err
			}
			return result(&out)
		}
		if fast == nil {
			return run, nil
		}
		return run, func(ctx context.Context, raw []byte) (*spec.CallResult, error, bool) {
			var in In
			if !fast.bind(raw, reflect.ValueOf(&in).Elem()) {
				return nil, nil, false
			}
			out, err := fn(ctx, in)
			if err != nil {
				return nil, err, true
			}
			res, err := result(&out)
			return res, err, true
		}
	})
}

// NewAction declares a tool from a typed function with no output: a
// successful call returns the text "Success".
func NewAction[In any](name, description string, fn func(context.Context, In) error, opts ...Option) (*Tool, error) {
	if fn == nil {
		return nil, fmt.Errorf("%w: tool %q has a nil function", ErrInvalidSchema, name)
	}
	return newTyped(name, description, reflect.TypeFor[In](), nil, opts, func(dec *decoder, fast *fastDec) (runFunc, fastRunFunc) {
		run := func(ctx context.Context, b *binder, args any) (*spec.CallResult, error) {
			var in In
			dec.decode(b, args, reflect.ValueOf(&in).Elem())
			if len(b.problems) > 0 {
				return nil, nil
			}
			if err := fn(ctx, in); err != nil {
				return nil, err
			}
			return successResult(), nil
		}
		if fast == nil {
			return run, nil
		}
		return run, func(ctx context.Context, raw []byte) (*spec.CallResult, error, bool) {
			var in In
			if !fast.bind(raw, reflect.ValueOf(&in).Elem()) {
				return nil, nil, false
			}
			if err := fn(ctx, in); err != nil {
				return nil, err, true
			}
			return successResult(), nil, true
		}
	})
}

// MustNew is like [New] but panics on error, for tools declared in package
// variables.
func MustNew[In, Out any](name, description string, fn func(context.Context, In) (Out, error), opts ...Option) *Tool {
	return must(New(name, description, fn, opts...))
}

// MustNewAction is like [NewAction] but panics on error.
func MustNewAction[In any](name, description string, fn func(context.Context, In) error, opts ...Option) *Tool {
	return must(NewAction(name, description, fn, opts...))
}

func must(t *Tool, err error) *Tool {
	if err != nil {
		panic(err)
	}
	return t
}

type runFunc = func(ctx context.Context, b *binder, args any) (*spec.CallResult, error)

type fastRunFunc = func(ctx context.Context, raw []byte) (*spec.CallResult, error, bool)

func newTyped(name, description string, inType reflect.Type, outSchema json.RawMessage, opts []Option, makeRun func(*decoder, *fastDec) (runFunc, fastRunFunc)) (*Tool, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	if !isObjectType(inType, false) {
		return nil, fmt.Errorf("%w: tool %q input must be a struct or a map with string keys, not %s", ErrInvalidSchema, name, inType)
	}
	s, err := generateSchema(inType, false)
	if err != nil {
		return nil, fmt.Errorf("%w: tool %q input: %w", ErrInvalidSchema, name, err)
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("%w: tool %q input: %w", ErrInvalidSchema, name, err)
	}
	dec, err := compileDecoder(inType)
	if err != nil {
		return nil, fmt.Errorf("%w: tool %q input: %w", ErrInvalidSchema, name, err)
	}
	t, err := newTool(name, description, raw, outSchema, opts)
	if err != nil {
		return nil, err
	}
	var fast *fastDec
	if !t.plan.anySensitive {
		// A sensitive value is collected from the parsed arguments, for
		// redaction: such a tool takes the full path.
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("%w: tool %q input: %w", ErrInvalidSchema, name, err)
		}
		fast = compileFast(inType, doc)
	}
	t.run, t.runFast = makeRun(dec, fast)
	return t, nil
}

// newTool builds what every kind of tool shares: the spec, the compiled
// validator and the repair plan.
func newTool(name, description string, inSchema, outSchema json.RawMessage, opts []Option) (*Tool, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	var cfg toolConfig
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.err != nil {
		return nil, fmt.Errorf("tool %q: %w", name, cfg.err)
	}
	doc, validator, p, err := compileSchema(inSchema)
	if err != nil {
		return nil, fmt.Errorf("%w: tool %q: %w", ErrInvalidSchema, name, err)
	}
	if m, ok := doc.(map[string]any); !ok || m["type"] != "object" {
		return nil, fmt.Errorf("%w: tool %q input schema must have type \"object\"", ErrInvalidSchema, name)
	}
	t := &Tool{
		spec: spec.Tool{
			Name:         name,
			Title:        cfg.title,
			Description:  description,
			InputSchema:  inSchema,
			OutputSchema: outSchema,
			Execution:    cfg.execution,
			Meta:         cfg.meta,
		},
		scopes:    cfg.scopes,
		timeout:   cfg.timeout,
		plan:      p,
		validator: validator,
	}
	if cfg.hasAnnotation || cfg.title != "" {
		a := cfg.annotations
		a.Title = cfg.title
		t.spec.Annotations = &a
	}
	if cfg.maxConcurrent > 0 {
		t.sem = make(chan struct{}, cfg.maxConcurrent)
	}
	return t, nil
}

const schemaURL = "urn:toolplane:tool-input"

// compileSchema compiles a JSON Schema (2020-12 unless it says otherwise)
// with format assertions on, builds its repair plan, and checks each
// default against the schema it belongs to, so that a bad default fails at
// declaration and is never inserted into a model's arguments.
func compileSchema(raw json.RawMessage) (any, *jsonschema.Schema, *plan, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("input schema is not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, nil, nil, err
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return nil, nil, nil, err
	}
	p, defaults := buildPlan(doc)
	for _, d := range defaults {
		sub, err := c.Compile(schemaURL + "#" + d.pointer)
		if err != nil {
			return nil, nil, nil, err
		}
		if err := sub.Validate(d.value); err != nil {
			return nil, nil, nil, fmt.Errorf("the default %s at %s breaks its own schema: %w", received(d.value), d.pointer, err)
		}
	}
	return doc, sch, p, nil
}

func isObjectType(t reflect.Type, out bool) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == timeType || customJSON(t, out) || textual(t, out) {
		return false
	}
	switch t.Kind() {
	case reflect.Struct:
		return true
	case reflect.Map:
		return t.Key().Kind() == reflect.String
	}
	return false
}

// CheckName reports whether name is a valid tool name:
// ^[A-Za-z0-9_.-]{1,128}$ (MCP SEP-986). The error wraps [ErrInvalidName].
func CheckName(name string) error {
	if len(name) == 0 || len(name) > 128 {
		return fmt.Errorf("%w: %q must be 1 to 128 characters long", ErrInvalidName, name)
	}
	for _, c := range []byte(name) {
		if !nameChar(c) {
			return fmt.Errorf("%w: %q may contain only letters, digits, '_', '-' and '.'", ErrInvalidName, name)
		}
	}
	return nil
}

// PortableName reports whether name also suits OpenAI-style function
// calling: ^[a-zA-Z0-9_-]{1,64}$. [Registry.Add] logs a warning for a name
// that does not.
func PortableName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for _, c := range []byte(name) {
		if c == '.' || !nameChar(c) {
			return false
		}
	}
	return true
}

func nameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
}

// call binds the arguments and runs the tool.
func (t *Tool) call(ctx context.Context, raw json.RawMessage, secrets *[]string) (*spec.CallResult, error) {
	if t.runFast != nil && ctx.Err() == nil {
		if res, err, ok := t.runFast(ctx, raw); ok {
			return res, err
		}
	}
	args, tp := parseArguments(raw)
	var b binder
	if t.plan.anySensitive {
		b.root = t.plan
	}
	if tp != nil {
		b.addText(tp)
		return nil, b.err(t.Name())
	}
	// Binding checks the context between its steps, so that a call whose
	// time is up costs no more CPU (each step is linear in the arguments,
	// whose numbers parseArguments bounded).
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	args = b.repair(t.plan, unwrap(t.plan, args))
	if b.root != nil && secrets != nil {
		// Before validation: a call that fails must not quote them either.
		collectSecrets(t.plan, args, false, secrets)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.validate(t.validator, t.plan, args)
	if len(b.problems) > 0 {
		return nil, b.err(t.Name())
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res, err := t.run(ctx, &b, args)
	if len(b.problems) > 0 {
		return nil, b.err(t.Name())
	}
	return res, err
}

func (b *binder) err(tool string) *ArgumentError {
	sortProblems(b.problems)
	return &ArgumentError{Tool: tool, Problems: b.problems}
}
