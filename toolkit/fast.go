package toolkit

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"math/big"
	"reflect"
	"regexp"
	"strconv"
	"unicode/utf8"
)

// The fast binder reads strict JSON arguments straight into a typed tool's
// Go value, with no map[string]any in between and no generic validation,
// where the typed decoder itself enforces every constraint of the schema.
//
// It only ever accepts: whatever is unusual (anything repair would touch,
// any constraint not met, a name unknown or given twice, an escape in a
// name, text after the object) makes it give up, and the call takes the
// full path of parse, repair, validate and decode, which accepts or
// refuses it and says why. So that the two paths bind alike, a tool gets
// a fast binder only when its schema holds nothing else than what the
// fast binder checks: types, required names, closed objects, string
// enums and patterns, integer bounds, lengths and item counts, and scalar
// defaults.

type fastKind uint8

const (
	fBool fastKind = iota
	fInt
	fUint
	fFloat
	fString
	fBytes
	fStruct
	fPointer
	fSlice
	fMap
)

type fastDec struct {
	kind fastKind
	bits int
	// Bounds of an integer, inclusive, and of a string's length (in
	// characters) or of a slice's items; a max of -1 is none.
	lo, hi             int64
	ulo, uhi           uint64
	minCount, maxCount int
	enum               []string
	pattern            *regexp.Regexp // compiled as the validator compiles it: regexp.Compile
	nullable           bool           // null is nil (pointers, slices, maps)
	elem               *fastDec
	fields             []fastField
	typ                reflect.Type
	// hasDefaults is set on a struct one of whose fields, at any depth
	// through structs, has a default: made when left out, by the slow
	// path.
	hasDefaults bool
}

type fastField struct {
	name          string
	index         int
	dec           *fastDec
	required      bool
	nullAsMissing bool
	def           reflect.Value // a scalar default, or invalid
}

// maxFastFields bounds a struct's fields, so that the names given once
// fit in a bit set.
const maxFastFields = 64

// compileFast builds the fast binder of t for its input schema doc, or
// returns nil when the schema says something the fast binder does not
// check.
func compileFast(t reflect.Type, doc any) *fastDec {
	b := fastBuilder{building: map[reflect.Type]bool{}}
	return b.build(t, doc)
}

type fastBuilder struct {
	building map[reflect.Type]bool // recursive types take the slow path
}

// fastKeywords are the keywords a fast binder's schema may hold; under
// any other, it takes the slow path.
var fastKeywords = map[string]bool{
	"type": true, "description": true, "title": true, "default": true, "enum": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
	"minLength": true, "maxLength": true, "minItems": true, "maxItems": true,
	"items": true, "properties": true, "required": true, "additionalProperties": true,
	"contentEncoding": true, "x-null-as-missing": true, "pattern": true,
}

func (b fastBuilder) build(t reflect.Type, s any) *fastDec {
	m, ok := s.(map[string]any)
	if !ok {
		return nil
	}
	for k := range m {
		if !fastKeywords[k] {
			return nil
		}
	}
	types, ok := m["type"].([]any)
	var typ string
	nullable := false
	switch {
	case ok && len(types) == 2 && types[1] == "null":
		typ, _ = types[0].(string)
		nullable = true
	case !ok:
		typ, _ = m["type"].(string)
	default:
		return nil
	}
	if typ == "" || customJSON(t, false) || textual(t, false) || t == timeType || t == numberType || t == rawMessageType {
		return nil
	}
	d := &fastDec{typ: t, nullable: nullable, maxCount: -1}
	if t.Kind() == reflect.Pointer {
		elem := b.build(t.Elem(), withoutNull(m))
		if elem == nil || !nullable {
			return nil
		}
		d.kind, d.elem = fPointer, elem
		return d
	}
	if nullable && !canBeNull(t) {
		return nil
	}
	if _, ok := m["enum"]; ok && (typ != "string" || t.Kind() != reflect.String) {
		return nil
	}
	if _, ok := m["pattern"]; ok && (typ != "string" || t.Kind() != reflect.String) {
		return nil
	}
	switch t.Kind() {
	case reflect.Bool:
		if typ != "boolean" {
			return nil
		}
		d.kind = fBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if typ != "integer" {
			return nil
		}
		d.kind, d.bits = fInt, t.Bits()
		lo, hi, ok := intBounds(m, big.NewInt(int64(-1)<<(t.Bits()-1)), big.NewInt(int64(1)<<(t.Bits()-1)-1))
		if !ok {
			return nil
		}
		d.lo, d.hi = lo.Int64(), hi.Int64()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if typ != "integer" {
			return nil
		}
		d.kind, d.bits = fUint, t.Bits()
		lo, hi, ok := intBounds(m, new(big.Int), new(big.Int).SetUint64(math.MaxUint64>>(64-t.Bits())))
		if !ok {
			return nil
		}
		d.ulo, d.uhi = lo.Uint64(), hi.Uint64()
	case reflect.Float32, reflect.Float64:
		// Bounds on a float would be compared in binary, not exactly as the
		// validator compares them.
		if typ != "number" || hasAny(m, "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum") {
			return nil
		}
		d.kind, d.bits = fFloat, t.Bits()
	case reflect.String:
		if typ != "string" || hasAny(m, "contentEncoding") {
			return nil
		}
		d.kind = fString
		if !b.counts(d, m, "minLength", "maxLength") {
			return nil
		}
		if p, ok := m["pattern"]; ok {
			ps, ok := p.(string)
			re, err := regexp.Compile(ps)
			if !ok || err != nil {
				return nil
			}
			d.pattern = re
		}
		if e, ok := m["enum"].([]any); ok {
			for _, v := range e {
				s, ok := v.(string)
				if !ok {
					return nil
				}
				d.enum = append(d.enum, s)
			}
		}
	case reflect.Slice:
		if isBytes(t) {
			if typ != "string" || m["contentEncoding"] != "base64" {
				return nil
			}
			d.kind = fBytes
			return d
		}
		if typ != "array" {
			return nil
		}
		d.kind = fSlice
		if d.elem = b.build(t.Elem(), m["items"]); d.elem == nil || !b.counts(d, m, "minItems", "maxItems") {
			return nil
		}
	case reflect.Map:
		if typ != "object" || t.Key().Kind() != reflect.String || implements(t.Key(), textUnmarshType) || hasAny(m, "properties", "required") {
			return nil
		}
		d.kind = fMap
		if d.elem = b.build(t.Elem(), m["additionalProperties"]); d.elem == nil {
			return nil
		}
	case reflect.Struct:
		if typ != "object" || m["additionalProperties"] != false || b.building[t] {
			return nil
		}
		b.building[t] = true
		defer delete(b.building, t)
		if !b.structFields(d, t, m) {
			return nil
		}
	default:
		return nil
	}
	return d
}

func (b fastBuilder) structFields(d *fastDec, t reflect.Type, m map[string]any) bool {
	d.kind = fStruct
	props, _ := m["properties"].(map[string]any)
	required := map[string]bool{}
	if req, ok := m["required"].([]any); ok {
		for _, r := range req {
			s, _ := r.(string)
			required[s] = true
		}
	}
	fs := structFields(t)
	if len(fs) > maxFastFields || len(fs) != len(props) {
		return false
	}
	for _, f := range fs {
		// Fields of embedded structs, which may need allocating, and the
		// ",string" option take the slow path.
		if len(f.index) != 1 || f.quoted {
			return false
		}
		ps, ok := props[f.name].(map[string]any)
		if !ok {
			return false
		}
		fd := b.build(f.typ, ps)
		if fd == nil {
			return false
		}
		ff := fastField{name: f.name, index: f.index[0], dec: fd, required: required[f.name], nullAsMissing: ps["x-null-as-missing"] == true}
		if raw, ok := ps["default"]; ok {
			v, ok := scalarDefault(f.typ, raw)
			if !ok {
				return false
			}
			ff.def = v
			d.hasDefaults = true
		}
		if fd.kind == fStruct && fd.hasDefaults {
			d.hasDefaults = true
		}
		d.fields = append(d.fields, ff)
	}
	return true
}

// scalarDefault is the Go value of a default of a string, number or
// boolean field, as the slow path would bind it.
func scalarDefault(t reflect.Type, raw any) (reflect.Value, bool) {
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
	default:
		return reflect.Value{}, false
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return reflect.Value{}, false
	}
	v := reflect.New(t)
	if err := json.Unmarshal(b, v.Interface()); err != nil {
		return reflect.Value{}, false
	}
	return v.Elem(), true
}

func withoutNull(m map[string]any) map[string]any {
	types, ok := m["type"].([]any)
	if !ok || len(types) != 2 {
		return m
	}
	c := make(map[string]any, len(m))
	for k, v := range m {
		c[k] = v
	}
	c["type"] = types[0]
	return c
}

func hasAny(m map[string]any, keys ...string) bool {
	for _, k := range keys {
		if _, ok := m[k]; ok {
			return true
		}
	}
	return false
}

// counts reads a pair of count keywords into d.
func (b fastBuilder) counts(d *fastDec, m map[string]any, minKey, maxKey string) bool {
	for i, k := range []string{minKey, maxKey} {
		v, ok := m[k]
		if !ok {
			continue
		}
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		c, err := strconv.ParseInt(string(n), 10, 32)
		if err != nil || c < 0 {
			return false
		}
		if i == 0 {
			d.minCount = int(c)
		} else {
			d.maxCount = int(c)
		}
	}
	return true
}

// intBounds narrows [lo, hi] by the schema's bounds, exactly: an
// exclusive bound, or a fractional one, admits the integers within it.
func intBounds(m map[string]any, lo, hi *big.Int) (*big.Int, *big.Int, bool) {
	for _, k := range []string{"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"} {
		v, ok := m[k]
		if !ok {
			continue
		}
		n, ok := v.(json.Number)
		if !ok || len(n) > 40 {
			return nil, nil, false
		}
		r, ok := new(big.Rat).SetString(string(n))
		if !ok {
			return nil, nil, false
		}
		lower := k == "minimum" || k == "exclusiveMinimum"
		l := integerLimit(r, lower, k[0] == 'e')
		if lower && l.Cmp(lo) > 0 {
			lo = l
		}
		if !lower && l.Cmp(hi) < 0 {
			hi = l
		}
	}
	return lo, hi, lo.Cmp(hi) <= 0
}

// integerLimit is the first integer a bound admits, from below (lower) or
// from above.
func integerLimit(r *big.Rat, lower, exclusive bool) *big.Int {
	q, rem := new(big.Int).DivMod(r.Num(), r.Denom(), new(big.Int)) // floor
	whole := rem.Sign() == 0
	switch {
	case lower && (exclusive || !whole):
		q.Add(q, big.NewInt(1))
	case !lower && exclusive && whole:
		q.Sub(q, big.NewInt(1))
	}
	return q
}

// fastReader reads strict JSON. Every method reports false for anything
// it does not take, and the caller gives up.
type fastReader struct {
	data  []byte
	pos   int
	depth int
}

func (r *fastReader) space() {
	for r.pos < len(r.data) {
		switch r.data[r.pos] {
		case ' ', '\t', '\n', '\r':
			r.pos++
		default:
			return
		}
	}
}

// peek returns the next byte after space, or 0 at the end.
func (r *fastReader) peek() byte {
	r.space()
	if r.pos >= len(r.data) {
		return 0
	}
	return r.data[r.pos]
}

func (r *fastReader) consume(c byte) bool {
	if r.peek() != c {
		return false
	}
	r.pos++
	return true
}

func (r *fastReader) literal(word string) bool {
	if !bytes.HasPrefix(r.data[r.pos:], []byte(word)) {
		return false
	}
	r.pos += len(word)
	return r.pos >= len(r.data) || !isWordByte(r.data[r.pos])
}

// rawString returns the bytes of a string without escapes, and whether
// the string is one; a string with an escape, a control character or
// invalid UTF-8 is not taken.
func (r *fastReader) rawString() ([]byte, bool) {
	if r.peek() != '"' {
		return nil, false
	}
	start := r.pos + 1
	ascii := true
	for i := start; i < len(r.data); i++ {
		c := r.data[i]
		switch {
		case c == '"':
			s := r.data[start:i]
			if !ascii && !utf8.Valid(s) {
				return nil, false
			}
			r.pos = i + 1
			return s, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= 0x80:
			ascii = false
		}
	}
	return nil, false
}

// number returns the text of a number in JSON syntax.
func (r *fastReader) number() ([]byte, bool) {
	r.space()
	start := r.pos
	for r.pos < len(r.data) {
		c := r.data[r.pos]
		if c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
			r.pos++
			continue
		}
		break
	}
	n := r.data[start:r.pos]
	return n, len(n) > 0 && isJSONNumber(string(n))
}

// bind reads the arguments into v, a zero value of the tool's input type,
// and reports whether it took them.
func (d *fastDec) bind(data []byte, v reflect.Value) bool {
	r := fastReader{data: data}
	if r.peek() != '{' || !d.value(&r, v) {
		return false
	}
	r.space()
	return r.pos == len(r.data)
}

func (d *fastDec) value(r *fastReader, v reflect.Value) bool {
	c := r.peek()
	if c == 'n' {
		if !d.nullable || !r.literal("null") {
			return false
		}
		v.SetZero()
		return true
	}
	switch d.kind {
	case fBool:
		switch c {
		case 't':
			if !r.literal("true") {
				return false
			}
			v.SetBool(true)
		case 'f':
			if !r.literal("false") {
				return false
			}
			v.SetBool(false)
		default:
			return false
		}
	case fInt:
		n, ok := r.number()
		if !ok || !plainInteger(n) {
			return false
		}
		i, err := strconv.ParseInt(string(n), 10, d.bits)
		if err != nil || i < d.lo || i > d.hi {
			return false
		}
		v.SetInt(i)
	case fUint:
		n, ok := r.number()
		if !ok || !plainInteger(n) || n[0] == '-' {
			return false
		}
		u, err := strconv.ParseUint(string(n), 10, d.bits)
		if err != nil || u < d.ulo || u > d.uhi {
			return false
		}
		v.SetUint(u)
	case fFloat:
		n, ok := r.number()
		// A long literal, and one that underflows to 0, are the full path's
		// to judge: it bounds the digits and magnitude of any number.
		if !ok || len(n) > maxFastNumber {
			return false
		}
		f, err := strconv.ParseFloat(string(n), d.bits)
		if err != nil || f == 0 && !zeroText(n) {
			return false
		}
		v.SetFloat(f)
	case fString:
		s, ok := r.rawString()
		if !ok || !d.stringOK(s) {
			return false
		}
		v.SetString(string(s))
	case fBytes:
		s, ok := r.rawString()
		if !ok {
			return false
		}
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			if raw, err := enc.DecodeString(string(s)); err == nil {
				v.SetBytes(raw)
				return true
			}
		}
		return false
	case fPointer:
		p := reflect.New(d.typ.Elem())
		if !d.elem.value(r, p.Elem()) {
			return false
		}
		v.Set(p)
	case fSlice:
		return d.slice(r, v)
	case fMap:
		return d.object(r, v)
	case fStruct:
		return d.object(r, v)
	}
	return true
}

func (d *fastDec) stringOK(s []byte) bool {
	if d.minCount > 0 || d.maxCount >= 0 {
		n := utf8.RuneCount(s)
		if n < d.minCount || d.maxCount >= 0 && n > d.maxCount {
			return false
		}
	}
	if d.pattern != nil && !d.pattern.Match(s) {
		return false
	}
	if d.enum == nil {
		return true
	}
	for _, e := range d.enum {
		if e == string(s) {
			return true
		}
	}
	return false
}

// maxFastNumber bounds the text of a number the fast binder reads.
const maxFastNumber = 64

// zeroText reports whether the number n has no digit but 0 before its
// exponent.
func zeroText(n []byte) bool {
	for _, c := range n {
		switch {
		case c == 'e' || c == 'E':
			return true
		case c >= '1' && c <= '9':
			return false
		}
	}
	return true
}

// plainInteger reports whether n is an integer written without fraction
// or exponent, which repair leaves as it is.
func plainInteger(n []byte) bool {
	for _, c := range n {
		if (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

func (d *fastDec) slice(r *fastReader, v reflect.Value) bool {
	if !r.consume('[') {
		return false
	}
	if r.depth++; r.depth >= MaxArgumentDepth {
		return false
	}
	s := reflect.MakeSlice(d.typ, 0, 4)
	if r.peek() == ']' {
		r.pos++
	} else {
		for {
			s = reflect.Append(s, reflect.Zero(d.typ.Elem()))
			if !d.elem.value(r, s.Index(s.Len()-1)) {
				return false
			}
			if r.consume(']') {
				break
			}
			if !r.consume(',') {
				return false
			}
		}
	}
	r.depth--
	if s.Len() < d.minCount || d.maxCount >= 0 && s.Len() > d.maxCount {
		return false
	}
	v.Set(s)
	return true
}

// object reads a struct's members or a map's entries.
func (d *fastDec) object(r *fastReader, v reflect.Value) bool {
	if !r.consume('{') {
		return false
	}
	if r.depth++; r.depth >= MaxArgumentDepth {
		return false
	}
	// given holds the names given, to refuse one given twice; set, those
	// that count as given (a null that means "not given" does not).
	var given, set uint64
	var m reflect.Value
	if d.kind == fMap {
		m = reflect.MakeMap(d.typ)
	}
	if r.peek() == '}' {
		r.pos++
	} else {
		for {
			name, ok := r.rawString()
			if !ok || !r.consume(':') {
				return false
			}
			if d.kind == fMap {
				key := reflect.ValueOf(string(name)).Convert(d.typ.Key())
				if m.MapIndex(key).IsValid() {
					return false // given twice
				}
				e := reflect.New(d.typ.Elem()).Elem()
				if !d.elem.value(r, e) {
					return false
				}
				m.SetMapIndex(key, e)
			} else {
				i := d.field(name)
				if i < 0 || given&(1<<i) != 0 {
					return false // unknown, or given twice
				}
				given |= 1 << i
				f := &d.fields[i]
				if f.nullAsMissing && r.peek() == 'n' {
					if !r.literal("null") {
						return false
					}
					// As if left out: its default applies below.
				} else {
					set |= 1 << i
					if !f.dec.value(r, v.Field(f.index)) {
						return false
					}
				}
			}
			if r.consume('}') {
				break
			}
			if !r.consume(',') {
				return false
			}
		}
	}
	r.depth--
	if d.kind == fMap {
		v.Set(m)
		return true
	}
	for i := range d.fields {
		if set&(1<<i) != 0 {
			continue
		}
		f := &d.fields[i]
		switch {
		case f.def.IsValid():
			v.Field(f.index).Set(f.def)
		case f.required:
			return false
		case f.dec.kind == fStruct && f.dec.hasDefaults:
			return false // made by the slow path, so that its defaults apply
		}
	}
	return true
}

func (d *fastDec) field(name []byte) int {
	for i := range d.fields {
		if d.fields[i].name == string(name) {
			return i
		}
	}
	return -1
}
