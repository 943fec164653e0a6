package controllers

import (
	"reflect"
	"testing"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// TestSameEntry checks sameEntry against reflect.DeepEqual: on an entry
// with every field set, and on each copy of it with one field, at any
// depth, zeroed or emptied. It fails when TableTool gains a field the full
// entry does not set, so that sameEntry is taught to compare it.
func TestSameEntry(t *testing.T) {
	yes := true
	full := func() spec.TableTool {
		return spec.TableTool{
			Name: "n", SourceName: "s", Title: "t", Description: "d",
			InputSchema: []byte(`{"type":"object"}`), OutputSchema: []byte(`{"type":"object"}`),
			Annotations:  &spec.Annotations{Title: "a", ReadOnlyHint: &yes, DestructiveHint: &yes, IdempotentHint: &yes, OpenWorldHint: &yes},
			Execution:    &spec.Execution{TaskSupport: spec.TaskSupportOptional},
			Meta:         map[string]any{"k": []any{"v", 1.0}},
			SchemaDigest: "sha256:x", ToolSet: spec.ObjectReference{Namespace: "ns", Name: "ts"}, ToolSetUID: "uid",
			Protocol: spec.ProtocolMCP, Endpoints: &spec.Endpoints{Invoke: "i", MCP: "m"}, CallsPerMinute: 7,
			Extensions: []string{"x"},
		}
	}
	a, b := full(), full()
	if !sameEntry(&a, &b) {
		t.Fatal("two copies of the full entry differ")
	}
	// Every field, at any depth, is set in the full entry; each variant
	// changes one of them.
	var variants []spec.TableTool
	var walk func(v reflect.Value, path string, apply func(func(reflect.Value)))
	walk = func(v reflect.Value, path string, apply func(func(reflect.Value))) {
		if v.IsZero() {
			t.Fatalf("the full entry leaves %s zero: set it, and have sameEntry compare it", path)
		}
		switch v.Kind() {
		case reflect.Struct:
			for i := range v.NumField() {
				walk(v.Field(i), path+"."+v.Type().Field(i).Name, func(f func(reflect.Value)) {
					apply(func(s reflect.Value) { f(s.Field(i)) })
				})
			}
			return
		case reflect.Pointer:
			walk(v.Elem(), path, func(f func(reflect.Value)) {
				apply(func(p reflect.Value) {
					// A copy of the pointee, so the full entry stays.
					c := reflect.New(p.Type().Elem())
					c.Elem().Set(p.Elem())
					p.Set(c)
					f(c.Elem())
				})
			})
		case reflect.Slice, reflect.Map:
			apply(func(s reflect.Value) { s.Set(reflect.MakeSlice(s.Type(), 0, 0)) })
			if v.Kind() == reflect.Map {
				apply(func(s reflect.Value) { s.Set(reflect.MakeMap(s.Type())) })
				apply(func(s reflect.Value) { s.Set(reflect.ValueOf(map[string]any{"k": []any{"v", 2.0}})) })
			}
		}
		apply(func(s reflect.Value) { s.Set(reflect.Zero(s.Type())) })
	}
	walk(reflect.ValueOf(full()), "TableTool", func(f func(reflect.Value)) {
		defer func() {
			// MakeSlice on a map: not a variant.
			_ = recover()
		}()
		e := full()
		f(reflect.ValueOf(&e).Elem())
		variants = append(variants, e)
	})
	if len(variants) < 25 {
		t.Fatalf("%d variants", len(variants))
	}
	for _, v := range variants {
		base := full()
		if got, want := sameEntry(&base, &v), reflect.DeepEqual(base, v); got != want {
			t.Errorf("sameEntry %v, DeepEqual %v, for %+v", got, want, v)
		}
		if got, want := sameEntry(&v, &base), reflect.DeepEqual(v, base); got != want {
			t.Errorf("sameEntry %v, DeepEqual %v, for %+v (swapped)", got, want, v)
		}
	}
}
