package discovery

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// ErrNotStrict means a schema cannot be expressed in OpenAI's strict mode
// without changing what it accepts: a free-form object or map, an array
// without items, a schema without a type.
var ErrNotStrict = errors.New("discovery: schema cannot be made strict")

// maxSchemaDepth bounds the conversion of a schema, whose $ref chains could
// otherwise loop.
const maxSchemaDepth = 64

// Keywords that strict mode accepts as they are. Anything else is dropped;
// the constraints among those are kept as a hint in the description, and the
// workload still enforces them when it validates the arguments.
var (
	strictKeep = map[string]bool{
		"type": true, "description": true, "title": true, "enum": true,
		"properties": true, "required": true, "additionalProperties": true,
		"items": true, "anyOf": true, "$ref": true, "$defs": true, "definitions": true,
		"pattern": true, "format": true,
		"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true, "multipleOf": true,
		"minItems": true, "maxItems": true,
	}
	strictHint = []string{
		"default", "minLength", "maxLength", "uniqueItems", "minProperties", "maxProperties",
		"contentEncoding", "contentMediaType", "examples", "deprecated",
	}
	strictFormats = map[string]bool{
		"date-time": true, "time": true, "date": true, "duration": true, "email": true,
		"hostname": true, "ipv4": true, "ipv6": true, "uuid": true,
	}
)

// StrictSchema converts a tool's input schema to the subset of JSON Schema
// that OpenAI's strict mode accepts:
//
//   - every object lists all its properties in required and sets
//     additionalProperties to false, at every level, $defs included;
//   - a property that was optional becomes nullable: null joins its type (and
//     its enum), or it becomes anyOf with {"type":"null"};
//   - oneOf becomes anyOf, a single allOf is merged in, const becomes a
//     one-value enum, and a $ref with sibling keywords is inlined once;
//   - keywords strict mode does not support are dropped; the constraints
//     among them (default, minLength, maxLength, uniqueItems, …) and formats
//     it does not know are kept as a hint at the end of the description.
//
// A schema that strict mode cannot express fails with [ErrNotStrict]: a map
// (additionalProperties other than false), patternProperties, an object
// without properties below the root, an array without items, prefixItems, a
// schema without type, a root that is not an object, or allOf of several
// schemas. The result is deterministic: object keys are sorted.
//
// OpenAI's size limits (nesting depth, number of properties, enum values,
// string length) are not checked here but by [Client.ExportOpenAI], which
// offers a tool past them non-strict.
func StrictSchema(schema json.RawMessage) (json.RawMessage, error) {
	var root any
	if err := unmarshalNumbers(schema, &root); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotStrict, err)
	}
	node, ok := root.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: the schema is not an object", ErrNotStrict)
	}
	if _, ok := node["type"]; !ok && node["properties"] != nil {
		node["type"] = "object"
	}
	if node["type"] != "object" {
		return nil, fmt.Errorf("%w: the root must be of type object, not %v", ErrNotStrict, node["type"])
	}
	cv := converter{root: node}
	out, err := cv.convert(node, "#", 0, true)
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

type converter struct{ root map[string]any }

func (cv *converter) convert(in map[string]any, path string, depth int, isRoot bool) (map[string]any, error) {
	if depth > maxSchemaDepth {
		return nil, fmt.Errorf("%w: %s: nested deeper than %d", ErrNotStrict, path, maxSchemaDepth)
	}
	node := maps.Clone(in)
	notStrict := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrNotStrict, path, fmt.Sprintf(format, a...))
	}

	if all, ok := node["allOf"].([]any); ok {
		if len(all) != 1 {
			return nil, notStrict("allOf of %d schemas", len(all))
		}
		sub, ok := all[0].(map[string]any)
		if !ok {
			return nil, notStrict("allOf holds a non-object schema")
		}
		delete(node, "allOf")
		for k, v := range sub {
			if _, set := node[k]; !set {
				node[k] = v
			}
		}
	}
	if ref, ok := node["$ref"].(string); ok && hasSiblings(node) {
		target, err := cv.resolve(ref)
		if err != nil {
			return nil, notStrict("%v", err)
		}
		delete(node, "$ref")
		for k, v := range target {
			if _, set := node[k]; !set {
				node[k] = v
			}
		}
		return cv.convert(node, path, depth+1, isRoot)
	}
	if one, ok := node["oneOf"].([]any); ok {
		alts, _ := node["anyOf"].([]any)
		node["anyOf"] = append(slices.Clone(alts), one...)
		delete(node, "oneOf")
	}
	if c, ok := node["const"]; ok {
		if _, has := node["enum"]; !has {
			node["enum"] = []any{c}
		}
		delete(node, "const")
	}
	for _, k := range []string{"patternProperties", "prefixItems"} {
		if _, ok := node[k]; ok {
			return nil, notStrict("%s is not supported", k)
		}
	}

	out := map[string]any{}
	var hints []string
	for k, v := range node {
		switch {
		case k == "format":
			if f, _ := v.(string); strictFormats[f] {
				out[k] = v
			} else {
				hints = append(hints, fmt.Sprintf("format: %v", v))
			}
		case strictKeep[k]:
			out[k] = v
		case slices.Contains(strictHint, k):
			b, _ := json.Marshal(v)
			hints = append(hints, k+": "+string(b))
		}
	}
	if len(hints) > 0 {
		slices.Sort(hints)
		d, _ := out["description"].(string)
		out["description"] = strings.TrimSpace(d + " (" + strings.Join(hints, "; ") + ")")
	}

	for _, defsKey := range []string{"$defs", "definitions"} {
		defs, ok := out[defsKey].(map[string]any)
		if !ok {
			continue
		}
		conv := make(map[string]any, len(defs))
		for name, d := range defs {
			dm, ok := d.(map[string]any)
			if !ok {
				return nil, notStrict("%s/%s is not an object schema", defsKey, name)
			}
			c, err := cv.convert(dm, path+"/"+defsKey+"/"+name, depth+1, false)
			if err != nil {
				return nil, err
			}
			conv[name] = c
		}
		out[defsKey] = conv
	}
	if alts, ok := out["anyOf"].([]any); ok {
		if isRoot {
			return nil, notStrict("the root cannot be anyOf")
		}
		conv := make([]any, len(alts))
		for i, v := range alts {
			vm, ok := v.(map[string]any)
			if !ok {
				return nil, notStrict("anyOf holds a non-object schema")
			}
			c, err := cv.convert(vm, fmt.Sprintf("%s/anyOf/%d", path, i), depth+1, false)
			if err != nil {
				return nil, err
			}
			conv[i] = c
		}
		out["anyOf"] = conv
	}

	if _, ok := out["type"]; !ok {
		if enum, ok := out["enum"].([]any); ok {
			// Strict mode wants a type next to an enum (const included);
			// the values say which.
			out["type"] = enumTypes(enum)
		}
	}
	types := typeList(out["type"])
	_, hasRef := out["$ref"]
	_, hasAny := out["anyOf"]
	_, hasEnum := out["enum"]
	if len(types) == 0 && !hasRef && !hasAny && !hasEnum {
		return nil, notStrict("a schema without type accepts anything")
	}
	if slices.Contains(types, "object") {
		if err := cv.object(out, path, depth, isRoot); err != nil {
			return nil, err
		}
	}
	if slices.Contains(types, "array") {
		items, ok := out["items"].(map[string]any)
		if !ok {
			return nil, notStrict("an array needs an items schema")
		}
		c, err := cv.convert(items, path+"/items", depth+1, false)
		if err != nil {
			return nil, err
		}
		out["items"] = c
	}
	return out, nil
}

func (cv *converter) object(out map[string]any, path string, depth int, isRoot bool) error {
	if ap, ok := out["additionalProperties"]; ok && ap != false {
		return fmt.Errorf("%w: %s: an object with additionalProperties (a map) cannot be strict", ErrNotStrict, path)
	}
	props, ok := out["properties"].(map[string]any)
	if !ok {
		if _, has := out["properties"]; has {
			return fmt.Errorf("%w: %s: properties is not an object", ErrNotStrict, path)
		}
		// Below the root, an object with no properties and no
		// additionalProperties: false is free-form, which strict mode would
		// turn into an always-empty object.
		if !isRoot && out["additionalProperties"] != false {
			return fmt.Errorf("%w: %s: a free-form object cannot be strict", ErrNotStrict, path)
		}
		props = map[string]any{}
	}
	required := map[string]bool{}
	if req, ok := out["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				required[s] = true
			}
		}
	}
	conv := make(map[string]any, len(props))
	for _, name := range slices.Sorted(maps.Keys(props)) {
		pm, ok := props[name].(map[string]any)
		if !ok {
			return fmt.Errorf("%w: %s/properties/%s is not an object schema", ErrNotStrict, path, name)
		}
		c, err := cv.convert(pm, path+"/properties/"+name, depth+1, false)
		if err != nil {
			return err
		}
		if !required[name] {
			c = nullable(c)
		}
		conv[name] = c
	}
	all := make([]any, 0, len(conv))
	for _, name := range slices.Sorted(maps.Keys(conv)) {
		all = append(all, name)
	}
	out["properties"] = conv
	out["required"] = all
	out["additionalProperties"] = false
	return nil
}

// nullable makes a converted schema accept null too.
func nullable(s map[string]any) map[string]any {
	if typeAllows(s, "null") {
		return s
	}
	if t, ok := s["type"]; ok {
		s["type"] = append(typeList(t), "null")
		if enum, ok := s["enum"].([]any); ok && !slices.Contains(enum, nil) {
			s["enum"] = append(slices.Clone(enum), nil)
		}
		return s
	}
	if alts, ok := s["anyOf"].([]any); ok {
		s["anyOf"] = append(slices.Clone(alts), map[string]any{"type": "null"})
		return s
	}
	if enum, ok := s["enum"].([]any); ok {
		s["enum"] = append(slices.Clone(enum), nil)
		return s
	}
	// A bare $ref: the reference may not carry siblings, so wrap it.
	out := map[string]any{"anyOf": []any{s, map[string]any{"type": "null"}}}
	return out
}

func enumTypes(enum []any) any {
	var types []any
	for _, v := range enum {
		var t string
		switch v := v.(type) {
		case nil:
			t = "null"
		case bool:
			t = "boolean"
		case string:
			t = "string"
		case json.Number:
			t = "number"
			if _, err := v.Int64(); err == nil {
				t = "integer"
			}
		case []any:
			t = "array"
		default:
			t = "object"
		}
		if !slices.Contains(types, any(t)) {
			types = append(types, t)
		}
	}
	if len(types) == 1 {
		return types[0]
	}
	return types
}

func typeList(t any) []any {
	switch t := t.(type) {
	case string:
		return []any{t}
	case []any:
		return slices.Clone(t)
	}
	return nil
}

func typeAllows(s map[string]any, typ string) bool {
	if slices.Contains(typeList(s["type"]), any(typ)) {
		return true
	}
	if alts, ok := s["anyOf"].([]any); ok {
		for _, v := range alts {
			if vm, ok := v.(map[string]any); ok && typeAllows(vm, typ) {
				return true
			}
		}
	}
	return false
}

func hasSiblings(node map[string]any) bool {
	for k := range node {
		if k != "$ref" && k != "$defs" && k != "definitions" {
			return true
		}
	}
	return false
}

func (cv *converter) resolve(ref string) (map[string]any, error) {
	if ref == "#" {
		return cv.root, nil
	}
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, fmt.Errorf("$ref %q is not local", ref)
	}
	var cur any = cv.root
	for _, tok := range strings.Split(rest, "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("$ref %q does not resolve", ref)
		}
		if cur, ok = m[tok]; !ok {
			return nil, fmt.Errorf("$ref %q does not resolve", ref)
		}
	}
	m, ok := cur.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("$ref %q is not an object schema", ref)
	}
	return m, nil
}

func unmarshalNumbers(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("trailing data after JSON value")
	}
	return nil
}

// dropOptionalNulls removes, from a JSON arguments object, every null given
// for a property that schema does not require and does not declare nullable:
// strict-mode models send those for properties they would otherwise leave
// out. Arguments that are not valid JSON, or carry no null, are returned as
// they are.
func dropOptionalNulls(args []byte, schema json.RawMessage) []byte {
	if !bytes.Contains(args, []byte("null")) || len(schema) == 0 {
		return args
	}
	var v, s any
	if unmarshalNumbers(args, &v) != nil || unmarshalNumbers(schema, &s) != nil {
		return args
	}
	root, _ := s.(map[string]any)
	cv := converter{root: root}
	if !cv.prune(v, root, 0) {
		return args
	}
	b, err := json.Marshal(v)
	if err != nil {
		return args
	}
	return b
}

// prune drops optional nulls from v in place, following schema s, and
// reports whether it dropped any.
func (cv *converter) prune(v any, s map[string]any, depth int) bool {
	if s == nil || depth > maxSchemaDepth {
		return false
	}
	if ref, ok := s["$ref"].(string); ok {
		if t, err := cv.resolve(ref); err == nil {
			s = t
		}
	}
	changed := false
	switch v := v.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		required := map[string]bool{}
		if req, ok := s["required"].([]any); ok {
			for _, r := range req {
				if name, ok := r.(string); ok {
					required[name] = true
				}
			}
		}
		for k, val := range v {
			ps, _ := props[k].(map[string]any)
			if val == nil {
				if !required[k] && (ps == nil || !typeAllows(ps, "null")) && props[k] != nil {
					delete(v, k)
					changed = true
				}
				continue
			}
			if cv.prune(val, ps, depth+1) {
				changed = true
			}
		}
	case []any:
		items, _ := s["items"].(map[string]any)
		for _, e := range v {
			if cv.prune(e, items, depth+1) {
				changed = true
			}
		}
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		// Unions: follow the first object-shaped variant that has
		// properties; the workload's validator decides the rest.
		if subs, ok := s[k].([]any); ok {
			for _, sub := range subs {
				if sm, ok := sub.(map[string]any); ok && sm["properties"] != nil {
					if cv.prune(v, sm, depth+1) {
						changed = true
					}
					break
				}
			}
		}
	}
	return changed
}
