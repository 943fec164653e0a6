package toolkit

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"unicode"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// Method names one method of a service value to serve as a tool, for
// [Scan].
type Method struct {
	// Name is the Go method's name, such as "GetOrder".
	Name string
	// Description tells the model what the tool does.
	Description string
	// ToolName overrides the tool's name, which is otherwise Name in
	// snake_case ("GetOrder" → "get_order", "GetHTTPStatus" →
	// "get_http_status").
	ToolName string
	// Options configure the tool as for [New].
	Options []Option
}

var (
	contextType = reflect.TypeFor[context.Context]()
	errorType   = reflect.TypeFor[error]()
)

// Scan turns an allow-list of svc's exported methods into tools. Each
// method must have the signature func(context.Context, In) (Out, error) or
// func(context.Context, In) error, with In as for [New]. Only the methods
// listed become tools, so adding a method to a service never exposes it to
// models by accident.
//
// The error wraps [ErrInvalidSchema] for a missing method or a wrong
// signature, or [ErrInvalidName].
func Scan(svc any, methods ...Method) ([]*Tool, error) {
	v := reflect.ValueOf(svc)
	if !v.IsValid() {
		return nil, fmt.Errorf("%w: Scan of a nil service", ErrInvalidSchema)
	}
	tools := make([]*Tool, 0, len(methods))
	for _, m := range methods {
		t, err := scanMethod(v, m)
		if err != nil {
			return nil, err
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// MustScan is like [Scan] but panics on error.
func MustScan(svc any, methods ...Method) []*Tool {
	tools, err := Scan(svc, methods...)
	if err != nil {
		panic(err)
	}
	return tools
}

func scanMethod(svc reflect.Value, m Method) (*Tool, error) {
	fn := svc.MethodByName(m.Name)
	if !fn.IsValid() {
		return nil, fmt.Errorf("%w: %s has no exported method %q", ErrInvalidSchema, svc.Type(), m.Name)
	}
	ft := fn.Type()
	name := m.ToolName
	if name == "" {
		name = SnakeCase(m.Name)
	}
	if ft.NumIn() != 2 || ft.In(0) != contextType || ft.IsVariadic() ||
		(ft.NumOut() != 1 && ft.NumOut() != 2) || ft.Out(ft.NumOut()-1) != errorType {
		return nil, fmt.Errorf("%w: method %s.%s must be func(context.Context, In) (Out, error) or func(context.Context, In) error, not %s",
			ErrInvalidSchema, svc.Type(), m.Name, ft)
	}
	inType := ft.In(1)
	var result func(any) (*spec.CallResult, error)
	var outSchema []byte
	var outType reflect.Type
	if ft.NumOut() == 2 {
		outType = ft.Out(0)
		var err error
		if result, outSchema, err = resultFor(ft.Out(0)); err != nil {
			return nil, fmt.Errorf("%w: tool %q output: %w", ErrInvalidSchema, name, err)
		}
	}
	return newTyped(name, m.Description, inType, outSchema, m.Options, func(dec *decoder, fast *fastDec) (runFunc, fastRunFunc) {
		call := func(ctx context.Context, in reflect.Value) (*spec.CallResult, error) {
			out := fn.Call([]reflect.Value{reflect.ValueOf(ctx), in})
			if err, _ := out[len(out)-1].Interface().(error); err != nil {
				return nil, err
			}
			if result == nil {
				return successResult(), nil
			}
			p := reflect.New(outType)
			p.Elem().Set(out[0])
			return result(p.Interface())
		}
		run := func(ctx context.Context, b *binder, args any) (*spec.CallResult, error) {
			in := reflect.New(inType).Elem()
			dec.decode(b, args, in)
			if len(b.problems) > 0 {
				return nil, nil
			}
			return call(ctx, in)
		}
		if fast == nil {
			return run, nil
		}
		return run, func(ctx context.Context, raw []byte) (*spec.CallResult, error, bool) {
			in := reflect.New(inType).Elem()
			if !fast.bind(raw, in) {
				return nil, nil, false
			}
			res, err := call(ctx, in)
			return res, err, true
		}
	})
}

// SnakeCase turns a Go identifier into snake_case, keeping acronyms whole:
// "GetOrder" → "get_order", "GetHTTPStatus" → "get_http_status",
// "OrderV2" → "order_v2".
func SnakeCase(s string) string {
	rs := []rune(s)
	var b strings.Builder
	for i, r := range rs {
		if unicode.IsUpper(r) {
			if i > 0 {
				prev := rs[i-1]
				nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
				if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
					b.WriteByte('_')
				}
			}
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
