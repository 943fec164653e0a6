package toolkit

import (
	"encoding/json"
	"slices"
	"strings"
)

// typeSet is a set of JSON types. The empty set means any type.
type typeSet uint8

const (
	tObject typeSet = 1 << iota
	tArray
	tString
	tInteger
	tNumber
	tBoolean
	tNull
)

var typeBits = map[string]typeSet{
	"object": tObject, "array": tArray, "string": tString, "integer": tInteger,
	"number": tNumber, "boolean": tBoolean, "null": tNull,
}

// plan says how to repair a value for one schema. It is derived from the
// JSON Schema itself, so typed, scanned and dynamic tools are repaired
// alike; it is built once, when a tool is declared.
//
// It covers the keywords that toolkit generates and that hand-written
// tool schemas mostly use. Under a keyword it does not understand
// (oneOf, allOf, not, if, …) it repairs nothing and leaves the judgement
// to the validator.
type plan struct {
	types    typeSet
	opaque   bool
	ref      *plan // set for a $ref; the other fields are then unused
	props    map[string]*plan
	names    []string          // property names in declared order
	fold     map[string]string // lower-case name → name, for names unique in it
	required []string
	closed   bool  // additionalProperties: false
	extra    *plan // additionalProperties as a schema
	items    *plan
	enum     []any
	enumFold map[string]string // lower-case → declared spelling, string enums
	def      any
	hasDef   bool
	format   string
	// sensitive marks a value that is never shown (writeOnly or
	// x-sensitive); anySensitive is set on the root when any value is.
	sensitive    bool
	anySensitive bool
	// nullAsMissing takes an explicit null for this property as the
	// property left out (x-null-as-missing: true), so that its default
	// applies.
	nullAsMissing bool
	// nullable is set on a reference that also accepts null (anyOf with
	// {"type":"null"}); its other fields but def are unused.
	nullable bool
	// nestedDefaults is set on an object plan one of whose properties, at
	// any depth through objects that cannot be null, has a default: when
	// such an object is left out, it is made, so that the defaults apply.
	nestedDefaults bool
}

// defaultOf returns the default of p, or of the schema it refers to.
func defaultOf(p *plan) (any, bool) {
	for ; p != nil; p = p.ref {
		if p.hasDef {
			return p.def, true
		}
	}
	return nil, false
}

// isNullable reports whether p's value may be null.
func isNullable(p *plan) bool {
	for ; p != nil; p = p.ref {
		if p.nullable || p.types&tNull != 0 {
			return true
		}
	}
	return false
}

func (p *plan) resolve() *plan {
	for p != nil && p.ref != nil {
		p = p.ref
	}
	return p
}

func (p *plan) isRequired(name string) bool {
	for _, r := range p.required {
		if r == name {
			return true
		}
	}
	return false
}

// planBuilder builds the plan of a schema document, resolving local $refs.
type planBuilder struct {
	root     any
	byPtr    map[string]*plan
	defaults []defaultAt
}

// defaultAt is a default and the JSON pointer of the schema it belongs to,
// so that it can be checked against that schema.
type defaultAt struct {
	pointer string
	value   any
}

func buildPlan(doc any) (*plan, []defaultAt) {
	b := &planBuilder{root: doc, byPtr: map[string]*plan{}}
	root := b.build(doc, "")
	for _, p := range b.byPtr {
		root.anySensitive = root.anySensitive || p.sensitive
		p.nestedDefaults = hasNestedDefaults(p, map[*plan]bool{})
	}
	return root, b.defaults
}

func (b *planBuilder) build(s any, ptr string) *plan {
	if p, ok := b.byPtr[ptr]; ok {
		return p
	}
	p := &plan{}
	b.byPtr[ptr] = p
	m, ok := s.(map[string]any)
	if !ok {
		return p // true, false: any value, or the validator says no
	}
	sensitive := m["writeOnly"] == true || m["x-sensitive"] == true
	p.sensitive = sensitive
	p.nullAsMissing = m["x-null-as-missing"] == true
	if ref, ok := m["$ref"].(string); ok {
		target, tptr, ok := b.lookup(ref)
		if !ok || len(m) > 1 && hasAssertions(m) {
			p.opaque = true
			return p
		}
		p.ref = b.build(target, tptr)
		return p
	}
	for _, kw := range []string{"oneOf", "allOf", "not", "if", "then", "else", "$dynamicRef", "dependentSchemas", "patternProperties", "prefixItems", "unevaluatedProperties", "unevaluatedItems"} {
		if _, ok := m[kw]; ok {
			p.opaque = true
			return p
		}
	}
	if any, ok := m["anyOf"].([]any); ok {
		// [X, {"type":"null"}] is how a nullable reference is written.
		if len(any) == 2 && isNullSchema(any[1]) {
			// A reference to the value's plan, not a copy: the plan may be
			// one still being built, as a recursive type's is when one of
			// its fields points back to it.
			p.ref, p.nullable = b.build(any[0], ptr+"/anyOf/0"), true
			if def, ok := m["default"]; ok {
				p.def, p.hasDef = def, true
				b.defaults = append(b.defaults, defaultAt{pointer: ptr, value: def})
			}
			return p
		}
		p.opaque = true
		return p
	}
	switch t := m["type"].(type) {
	case string:
		p.types = typeBits[t]
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok {
				p.types |= typeBits[s]
			}
		}
	}
	if props, ok := m["properties"].(map[string]any); ok {
		p.props = make(map[string]*plan, len(props))
		for name, ps := range props {
			p.props[name] = b.build(ps, ptr+"/properties/"+escapePointer(name))
			p.names = append(p.names, name)
		}
		// Sorted, so that the valid names a model is told are always
		// listed alike.
		slices.Sort(p.names)
		p.fold = make(map[string]string, len(p.names))
		seen := map[string]int{}
		for _, n := range p.names {
			seen[strings.ToLower(n)]++
		}
		for _, n := range p.names {
			if l := strings.ToLower(n); seen[l] == 1 {
				p.fold[l] = n
			}
		}
	}
	if req, ok := m["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				p.required = append(p.required, s)
			}
		}
	}
	switch ap := m["additionalProperties"].(type) {
	case bool:
		p.closed = !ap
	case map[string]any:
		p.extra = b.build(ap, ptr+"/additionalProperties")
	}
	if items, ok := m["items"].(map[string]any); ok {
		p.items = b.build(items, ptr+"/items")
	}
	if enum, ok := m["enum"].([]any); ok {
		p.enum = enum
		fold := map[string]string{}
		clash := map[string]bool{}
		for _, e := range enum {
			if s, ok := e.(string); ok {
				l := strings.ToLower(s)
				if _, dup := fold[l]; dup {
					clash[l] = true
				}
				fold[l] = s
			}
		}
		for l := range clash {
			delete(fold, l) // ambiguous in any case: only the exact spelling matches
		}
		if len(fold) > 0 {
			p.enumFold = fold
		}
	}
	if def, ok := m["default"]; ok {
		p.def, p.hasDef = def, true
		b.defaults = append(b.defaults, defaultAt{pointer: ptr, value: def})
	}
	p.format, _ = m["format"].(string)
	return p
}

// hasNestedDefaults reports whether a property of the object p, or of an
// object property of it that cannot be null, has a default.
func hasNestedDefaults(p *plan, seen map[*plan]bool) bool {
	if p == nil || p.opaque || p.ref != nil || seen[p] || p.types&tObject == 0 {
		return false
	}
	seen[p] = true
	for _, cp := range p.props {
		if _, ok := defaultOf(cp); ok {
			return true
		}
		if r := cp.resolve(); !isNullable(cp) && r != nil && r.types == tObject && hasNestedDefaults(r, seen) {
			return true
		}
	}
	return false
}

// fillable reports whether an empty object of plan p is valid once its
// defaults are filled in: every required member has a default.
func fillable(p *plan) bool {
	if p == nil || p.opaque {
		return false
	}
	for _, name := range p.required {
		if _, ok := defaultOf(p.props[name]); !ok {
			return false
		}
	}
	return true
}

func hasAssertions(m map[string]any) bool {
	for k := range m {
		switch k {
		case "$ref", "description", "title", "default", "examples", "$comment", "deprecated", "readOnly", "writeOnly", "x-sensitive", "x-null-as-missing":
		default:
			return true
		}
	}
	return false
}

func isNullSchema(s any) bool {
	m, ok := s.(map[string]any)
	return ok && len(m) == 1 && m["type"] == "null"
}

// lookup resolves a local reference: "#", "#/$defs/x" or any JSON pointer
// into the document.
func (b *planBuilder) lookup(ref string) (any, string, bool) {
	if !strings.HasPrefix(ref, "#") {
		return nil, "", false
	}
	ptr := ref[1:]
	if ptr == "" {
		return b.root, "", true
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil, "", false // anchors are not followed
	}
	cur := b.root
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, "", false
		}
		if cur, ok = m[tok]; !ok {
			return nil, "", false
		}
	}
	return cur, ptr, true
}

// describe says in words what the plan accepts, for a missing value.
func (p *plan) describe() string {
	p = p.resolve()
	if p == nil || p.opaque {
		return "a value"
	}
	if len(p.enum) > 0 {
		return "one of " + listValues(p.enum)
	}
	var names []string
	for _, n := range []string{"object", "array", "string", "integer", "number", "boolean"} {
		if p.types&typeBits[n] != 0 {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "a value"
	}
	return article(names[0]) + strings.Join(names, " or ")
}

func article(word string) string {
	switch word[0] {
	case 'a', 'e', 'i', 'o', 'u':
		return "an "
	}
	return "a "
}

func listValues(vs []any) string {
	parts := make([]string, 0, len(vs))
	for _, v := range vs {
		b, _ := json.Marshal(v)
		parts = append(parts, string(b))
	}
	return strings.Join(parts, ", ")
}
