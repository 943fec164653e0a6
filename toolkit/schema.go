package toolkit

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// schema is the JSON Schema (2020-12) subset that toolkit generates. Its
// fields are in the order that reads best to a model; properties keep the
// order of the Go struct.
type schema struct {
	Ref                  string             `json:"$ref,omitempty"`
	Type                 any                `json:"type,omitempty"` // a string, or a list of them
	Title                string             `json:"title,omitempty"`
	Description          string             `json:"description,omitempty"`
	Enum                 []any              `json:"enum,omitempty"`
	Default              json.RawMessage    `json:"default,omitempty"`
	WriteOnly            bool               `json:"writeOnly,omitempty"`
	NullAsMissing        bool               `json:"x-null-as-missing,omitempty"`
	Format               string             `json:"format,omitempty"`
	Pattern              string             `json:"pattern,omitempty"`
	MinLength            *uint64            `json:"minLength,omitempty"`
	MaxLength            *uint64            `json:"maxLength,omitempty"`
	ContentEncoding      string             `json:"contentEncoding,omitempty"`
	Minimum              json.Number        `json:"minimum,omitempty"`
	Maximum              json.Number        `json:"maximum,omitempty"`
	ExclusiveMinimum     json.Number        `json:"exclusiveMinimum,omitempty"`
	ExclusiveMaximum     json.Number        `json:"exclusiveMaximum,omitempty"`
	Items                *schema            `json:"items,omitempty"`
	MinItems             *uint64            `json:"minItems,omitempty"`
	MaxItems             *uint64            `json:"maxItems,omitempty"`
	UniqueItems          bool               `json:"uniqueItems,omitempty"`
	Properties           *properties        `json:"properties,omitempty"`
	Required             []string           `json:"required,omitempty"`
	AdditionalProperties any                `json:"additionalProperties,omitempty"` // false or *schema
	PropertyNames        *schema            `json:"propertyNames,omitempty"`
	AnyOf                []*schema          `json:"anyOf,omitempty"`
	Defs                 map[string]*schema `json:"$defs,omitempty"`
}

// properties is an ordered JSON object of schemas.
type properties struct {
	names   []string
	schemas []*schema
}

func (p *properties) add(name string, s *schema) {
	p.names = append(p.names, name)
	p.schemas = append(p.schemas, s)
}

func (p *properties) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, name := range p.names {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(name)
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(p.schemas[i])
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func (s *schema) typeName() string {
	t, _ := s.Type.(string)
	return t
}

var (
	timeType        = reflect.TypeFor[time.Time]()
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
	numberType      = reflect.TypeFor[json.Number]()
	marshalerType   = reflect.TypeFor[json.Marshaler]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textMarshType   = reflect.TypeFor[encoding.TextMarshaler]()
	textUnmarshType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func implements(t, iface reflect.Type) bool {
	return t.Implements(iface) || (t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(iface))
}

// customJSON reports whether encoding/json hands t to its own JSON
// methods, when it encodes a value (out) or decodes one, so that its JSON
// shape cannot be known from its Go shape. Encoding and decoding are asked
// apart: a type with only MarshalJSON decodes by its kind.
func customJSON(t reflect.Type, out bool) bool {
	if out {
		return implements(t, marshalerType)
	}
	return implements(t, unmarshalerType)
}

// textual reports whether encoding/json writes t (out) or reads it with its
// text methods: a JSON string. Reading takes only a string then.
func textual(t reflect.Type, out bool) bool {
	if out {
		return implements(t, textMarshType)
	}
	return implements(t, textUnmarshType)
}

// generator builds the schema of a Go type, as encoding/json reads it (an
// input) or writes it (an output, when out is set).
type generator struct {
	out  bool
	root reflect.Type
	// unaddr is set, for an output, while generating a value that
	// encoding/json reaches unaddressable (a map's value, and what it holds
	// inline): there a method with a pointer receiver does not count.
	unaddr    bool
	recursive map[defKey]bool
	defNames  map[defKey]string
	defs      map[string]*schema
	// asserts is set when a tag puts a constraint on a value (an enum, a
	// pattern, a bound, …) that its Go type does not guarantee: an output
	// must then be checked against its schema.
	asserts bool
}

// defKey is a type in $defs: a type reached both addressable and not may
// be written two ways, so it may have two definitions.
type defKey struct {
	t      reflect.Type
	unaddr bool
}

// custom is customJSON for the value being generated.
func (g *generator) custom(t reflect.Type) bool {
	if g.out && g.unaddr {
		return t.Implements(marshalerType)
	}
	return customJSON(t, g.out)
}

// text is textual for the value being generated.
func (g *generator) text(t reflect.Type) bool {
	if g.out && g.unaddr {
		return t.Implements(textMarshType)
	}
	return textual(t, g.out)
}

// walkAt is addressable for a walk that builds no schema.
func (g *generator) walkAt(addr bool, fn func()) {
	saved := g.unaddr
	g.unaddr = !addr
	defer func() { g.unaddr = saved }()
	fn()
}

// addressable runs fn with the value's addressability set to addr, as
// encoding/json sees it when it reaches a pointer's or slice's elements
// (addressable) or a map's values (not).
func (g *generator) addressable(addr bool, fn func() (*schema, error)) (*schema, error) {
	saved := g.unaddr
	g.unaddr = !addr
	defer func() { g.unaddr = saved }()
	return fn()
}

// generateSchema returns the schema of t, which must be a JSON object type
// when object is set (an input, or an output served as structured
// content).
func generateSchema(t reflect.Type, out bool) (*schema, error) {
	s, _, err := generate(t, out)
	return s, err
}

// generate is generateSchema that also reports whether a tag constrains
// a value beyond its Go type.
func generate(t reflect.Type, out bool) (*schema, bool, error) {
	g := &generator{out: out, root: t, recursive: map[defKey]bool{}, defNames: map[defKey]string{}, defs: map[string]*schema{}}
	g.findRecursive(t, map[defKey]int{})
	s, err := g.gen(t, true)
	if err != nil {
		return nil, false, err
	}
	if len(g.defs) > 0 {
		s.Defs = g.defs
	}
	return s, g.asserts, nil
}

// findRecursive marks every struct type that is reached again while it is
// still being walked: those go to $defs and are referenced, everything else
// is inlined.
func (g *generator) findRecursive(t reflect.Type, state map[defKey]int) {
	const walking, done = 1, 2
	if t.Kind() == reflect.Pointer {
		g.walkAt(true, func() { g.findRecursive(t.Elem(), state) })
		return
	}
	switch t.Kind() {
	case reflect.Slice:
		g.walkAt(true, func() { g.findRecursive(t.Elem(), state) })
	case reflect.Array:
		g.findRecursive(t.Elem(), state)
	case reflect.Map:
		g.walkAt(false, func() { g.findRecursive(t.Elem(), state) })
	case reflect.Struct:
		if t == timeType || g.custom(t) || g.text(t) {
			return
		}
		k := defKey{t, g.unaddr}
		switch state[k] {
		case walking:
			g.recursive[k] = true
			return
		case done:
			return
		}
		state[k] = walking
		for _, f := range structFields(t) {
			g.findRecursive(f.typ, state)
		}
		state[k] = done
	}
}

var (
	defNameUnsafe = regexp.MustCompile(`[^A-Za-z0-9_]+`)
	// importPath matches the package path before a type name, as in a
	// generic type's name: Tree[github.com/acme/shop.Item].
	importPath = regexp.MustCompile(`(?:[A-Za-z0-9_.~-]+/)*[A-Za-z0-9_.~-]+\.`)
)

// defName names t in $defs: its Go name, with the type arguments of a
// generic type named without their import paths (Tree[…/shop.Item] is
// Tree_Item), which are nobody's business but the service's.
func (g *generator) defName(k defKey) string {
	if n, ok := g.defNames[k]; ok {
		return n
	}
	t := k.t
	base := strings.Trim(defNameUnsafe.ReplaceAllString(importPath.ReplaceAllString(t.Name(), ""), "_"), "_")
	if base == "" {
		base = "T"
	}
	name := base
	for i := 2; g.defs[name] != nil; i++ {
		name = base + strconv.Itoa(i)
	}
	g.defNames[k] = name
	g.defs[name] = &schema{} // reserve the name before recursing
	return name
}

func (g *generator) gen(t reflect.Type, top bool) (*schema, error) {
	k := defKey{t, g.unaddr}
	if g.recursive[k] && !top {
		if t == g.root && !g.unaddr {
			return &schema{Ref: "#"}, nil
		}
		if _, ok := g.defNames[k]; !ok {
			name := g.defName(k)
			s, err := g.genType(t)
			if err != nil {
				return nil, err
			}
			g.defs[name] = s
		}
		return &schema{Ref: "#/$defs/" + g.defNames[k]}, nil
	}
	return g.genType(t)
}

func (g *generator) genType(t reflect.Type) (*schema, error) {
	if t.Kind() == reflect.Pointer {
		// Before the method checks: *T has T's JSON methods too, and
		// encoding/json reads a pointer as its element, so *time.Time is a
		// date-time like time.Time. Whether the field may be null is its
		// field's business (genField).
		return g.addressable(true, func() (*schema, error) { return g.gen(t.Elem(), false) })
	}
	switch {
	case t == timeType:
		return &schema{Type: "string", Format: "date-time"}, nil
	case t == rawMessageType:
		return &schema{}, nil
	case t == numberType:
		return &schema{Type: "number"}, nil
	case g.custom(t):
		// Its own methods decide its JSON, so any value is allowed through
		// to them.
		return &schema{}, nil
	case g.text(t):
		return &schema{Type: "string"}, nil
	}
	switch t.Kind() {
	case reflect.Bool:
		return &schema{Type: "boolean"}, nil
	case reflect.Int, reflect.Int64:
		// The 64-bit bounds are left out: they would sit on nearly every
		// field, are beyond what float-based clients can even represent,
		// and the binder refuses a value outside them exactly anyway.
		return &schema{Type: "integer"}, nil
	case reflect.Int8:
		return intSchema(math.MinInt8, math.MaxInt8), nil
	case reflect.Int16:
		return intSchema(math.MinInt16, math.MaxInt16), nil
	case reflect.Int32:
		return intSchema(math.MinInt32, math.MaxInt32), nil
	case reflect.Uint, reflect.Uint64, reflect.Uintptr:
		return &schema{Type: "integer", Minimum: "0"}, nil
	case reflect.Uint8:
		return intSchema(0, math.MaxUint8), nil
	case reflect.Uint16:
		return intSchema(0, math.MaxUint16), nil
	case reflect.Uint32:
		return intSchema(0, math.MaxUint32), nil
	case reflect.Float32, reflect.Float64:
		return &schema{Type: "number"}, nil
	case reflect.String:
		return &schema{Type: "string"}, nil
	case reflect.Interface:
		if t.NumMethod() > 0 {
			return nil, fmt.Errorf("interface type %s cannot be decoded from JSON", t)
		}
		return &schema{}, nil
	case reflect.Slice:
		if isBytes(t) {
			return &schema{Type: "string", ContentEncoding: "base64"}, nil
		}
		items, err := g.addressable(true, func() (*schema, error) { return g.gen(t.Elem(), false) })
		if err != nil {
			return nil, err
		}
		if canBeNull(t.Elem()) {
			items = nullable(items)
		}
		return &schema{Type: "array", Items: items}, nil
	case reflect.Array:
		items, err := g.gen(t.Elem(), false)
		if err != nil {
			return nil, err
		}
		if canBeNull(t.Elem()) {
			items = nullable(items)
		}
		n := uint64(t.Len())
		return &schema{Type: "array", Items: items, MinItems: &n, MaxItems: &n}, nil
	case reflect.Map:
		s := &schema{Type: "object"}
		switch k := t.Key(); {
		case k.Kind() == reflect.String:
		case g.out && k.Implements(textMarshType):
			// A key is written with its own MarshalText (never addressable).
		case !g.out && implements(k, textUnmarshType):
		case isIntKind(k.Kind()):
			s.PropertyNames = &schema{Pattern: `^-?[0-9]+$`}
		case isUintKind(k.Kind()):
			s.PropertyNames = &schema{Pattern: `^[0-9]+$`}
		default:
			return nil, fmt.Errorf("map key type %s cannot be a JSON object key", k)
		}
		v, err := g.addressable(false, func() (*schema, error) { return g.gen(t.Elem(), false) })
		if err != nil {
			return nil, err
		}
		if canBeNull(t.Elem()) {
			v = nullable(v)
		}
		s.AdditionalProperties = v
		return s, nil
	case reflect.Struct:
		return g.genStruct(t)
	}
	return nil, fmt.Errorf("type %s cannot be represented in JSON", t)
}

func (g *generator) genStruct(t reflect.Type) (*schema, error) {
	s := &schema{Type: "object", Properties: &properties{}, AdditionalProperties: false}
	for _, f := range structFields(t) {
		fs, required, err := g.genField(f)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", f.sf.Name, err)
		}
		s.Properties.add(f.name, fs)
		if required {
			s.Required = append(s.Required, f.name)
		}
	}
	return s, nil
}

// genField returns a field's schema and whether it is required. Its
// default is checked against its schema when the whole schema is compiled.
func (g *generator) genField(f field) (*schema, bool, error) {
	c, err := parseTags(f.sf.Tag)
	if err != nil {
		return nil, false, err
	}
	if g.out && holdsTime(f.typ) {
		// encoding/json writes a time.Time as a date-time whatever its
		// tag says: format=date tells how an input is read.
		c.format = ""
	}
	var fs *schema
	if f.quoted {
		fs = quotedSchema(f.typ)
	} else if fs, err = g.gen(f.typ, false); err != nil {
		return nil, false, err
	}
	if err := applyConstraints(fs, f, c); err != nil {
		return nil, false, err
	}
	g.asserts = g.asserts || c.asserts()
	if c.def != nil {
		raw, err := defaultJSON(*c.def, fs, f)
		if err != nil {
			return nil, false, err
		}
		fs.Default = raw
	}
	omitted := f.omitEmpty || f.omitZero
	// An output is null where encoding/json writes null: a nil pointer,
	// slice or map without omitempty. An input may be null wherever the Go
	// value can be nil, omitempty or not (see "Null, missing and defaults"
	// in the package documentation), except where minItems asks for items
	// or the tag says null means "not given".
	nullOK := canBeNull(f.typ) && !omitted
	if !g.out {
		nullOK = canBeNull(f.typ) && !c.nullAsMissing && (c.minItems == nil || *c.minItems == 0)
	}
	if nullOK {
		// A nil pointer is null, ",string" or not.
		fs = nullable(fs)
	}
	required := c.required || (!c.optional && !omitted && f.typ.Kind() != reflect.Pointer && c.def == nil)
	if g.out {
		// What encoding/json always writes: a field behind a nil embedded
		// pointer is left out, and so is an empty one with omitempty.
		required = !omitted && !f.viaPointer
	}
	return fs, required, nil
}

// quotedSchema is the schema of a field with the json ",string" option: its
// value travels as a JSON string.
func quotedSchema(t reflect.Type) *schema {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t.Kind() == reflect.Bool:
		return &schema{Type: "string", Enum: []any{"true", "false"}}
	case isIntKind(t.Kind()):
		return &schema{Type: "string", Pattern: `^-?[0-9]+$`}
	case isUintKind(t.Kind()):
		return &schema{Type: "string", Pattern: `^[0-9]+$`}
	}
	return &schema{Type: "string"}
}

// applyConstraints puts a field's tag constraints on its schema. Value
// constraints of an array field go on its items; a constraint that cannot
// apply to the value's type is an error, so that a typo fails at
// declaration and not in front of a model.
func applyConstraints(fs *schema, f field, c constraints) error {
	fs.Title = c.title
	fs.Description = c.description
	fs.WriteOnly = c.sensitive
	fs.NullAsMissing = c.nullAsMissing
	if c.minItems != nil || c.maxItems != nil || c.uniqueItems {
		if fs.typeName() != "array" {
			return fmt.Errorf("minItems, maxItems and uniqueItems apply to arrays only")
		}
		if c.minItems != nil {
			fs.MinItems = c.minItems
		}
		if c.maxItems != nil {
			fs.MaxItems = c.maxItems
		}
		fs.UniqueItems = c.uniqueItems
	}
	target := fs
	if fs.typeName() == "array" && fs.Items != nil {
		target = fs.Items
	}
	hasValue := c.pattern != "" || c.format != "" || c.minLength != nil || c.maxLength != nil || len(c.enum) > 0 ||
		c.minimum != "" || c.maximum != "" || c.exclusiveMinimum != "" || c.exclusiveMaximum != ""
	if !hasValue {
		return nil
	}
	if target.Ref != "" {
		return fmt.Errorf("value constraints cannot apply to a recursive type")
	}
	typ := target.typeName()
	if c.pattern != "" || c.minLength != nil || c.maxLength != nil {
		if typ != "string" {
			return fmt.Errorf("pattern, minLength and maxLength apply to strings only")
		}
		if c.pattern != "" {
			if _, err := regexp.Compile(c.pattern); err != nil {
				return fmt.Errorf("pattern: %w", err)
			}
			target.Pattern = c.pattern
		}
		target.MinLength, target.MaxLength = c.minLength, c.maxLength
	}
	if c.format != "" {
		target.Format = c.format
	}
	if c.minimum != "" || c.maximum != "" || c.exclusiveMinimum != "" || c.exclusiveMaximum != "" {
		if typ != "integer" && typ != "number" {
			return fmt.Errorf("minimum, maximum, exclusiveMinimum and exclusiveMaximum apply to numbers only")
		}
		// A tag narrows the width's bounds; it never widens them.
		if c.minimum != "" {
			target.Minimum = tighter(target.Minimum, c.minimum, true)
		}
		if c.maximum != "" {
			target.Maximum = tighter(target.Maximum, c.maximum, false)
		}
		target.ExclusiveMinimum, target.ExclusiveMaximum = c.exclusiveMinimum, c.exclusiveMaximum
	}
	if len(c.enum) > 0 {
		target.Enum = target.Enum[:0]
		for _, v := range c.enum {
			ev, err := enumValue(v, typ)
			if err != nil {
				return err
			}
			target.Enum = append(target.Enum, ev)
		}
	}
	return nil
}

func tighter(width, tag json.Number, lower bool) json.Number {
	if width == "" {
		return tag
	}
	c := compareNumbers(string(tag), string(width))
	if (lower && c > 0) || (!lower && c < 0) {
		return tag
	}
	return width
}

func enumValue(v, typ string) (any, error) {
	switch typ {
	case "string":
		return v, nil
	case "integer":
		if _, ok := canonicalInteger(v); !ok {
			return nil, fmt.Errorf("enum value %q is not an integer", v)
		}
		return json.Number(v), nil
	case "number":
		if !isJSONNumber(v) {
			return nil, fmt.Errorf("enum value %q is not a number", v)
		}
		return json.Number(v), nil
	case "boolean":
		if v != "true" && v != "false" {
			return nil, fmt.Errorf("enum value %q is not a boolean", v)
		}
		return v == "true", nil
	}
	return nil, fmt.Errorf("enum applies to strings, numbers and booleans only")
}

// defaultJSON turns a default tag into JSON: plain text for a string field,
// so that `default:"a, b"` needs no quotes, and JSON for anything else.
func defaultJSON(text string, fs *schema, f field) (json.RawMessage, error) {
	if fs.typeName() == "string" && !f.quoted || (f.quoted && text != "" && text[0] != '"') {
		b, _ := json.Marshal(text)
		return b, nil
	}
	if !json.Valid([]byte(text)) {
		return nil, fmt.Errorf("default %q is not valid JSON", text)
	}
	var buf bytes.Buffer
	_ = json.Compact(&buf, []byte(text))
	return buf.Bytes(), nil
}

func nullable(s *schema) *schema {
	switch t := s.Type.(type) {
	case string:
		s.Type = []string{t, "null"}
		if len(s.Enum) > 0 {
			s.Enum = append(s.Enum, nil)
		}
		return s
	case nil:
		if s.Ref == "" {
			return s // any value, null included
		}
		// A $ref cannot take a sibling type that widens it, so offer null
		// as an alternative, and keep the field's annotations outside.
		out := &schema{Title: s.Title, Description: s.Description, Default: s.Default, WriteOnly: s.WriteOnly,
			AnyOf: []*schema{{Ref: s.Ref}, {Type: "null"}}}
		return out
	}
	return s
}

func canBeNull(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
		return true
	}
	return false
}

func isBytes(t reflect.Type) bool {
	return t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 &&
		!implements(t.Elem(), marshalerType) && !implements(t.Elem(), textMarshType)
}

func isIntKind(k reflect.Kind) bool {
	return k >= reflect.Int && k <= reflect.Int64
}

func isUintKind(k reflect.Kind) bool {
	return k >= reflect.Uint && k <= reflect.Uintptr
}

func intSchema(lo, hi int64) *schema {
	return &schema{Type: "integer", Minimum: json.Number(strconv.FormatInt(lo, 10)), Maximum: json.Number(strconv.FormatInt(hi, 10))}
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
