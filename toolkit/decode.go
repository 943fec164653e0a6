package toolkit

import (
	"encoding"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// decoder stores an already repaired and validated argument value (a tree
// of map[string]any, []any, string, json.Number, bool and nil) into a Go
// value. One decoder is compiled per type when a tool is declared, so a call
// does no reflection on struct tags.
//
// Validation has checked the shape; what is left to refuse is what the
// schema cannot say: an integer beyond int64 or uint64, a float beyond
// float32, bad base64, or a value its own UnmarshalJSON rejects.
type decoder struct {
	fn func(d *decoder, b *binder, v any, rv reflect.Value)
	// For structs: the members by JSON name.
	fields map[string]*fieldDecoder
	elem   *decoder
	key    reflect.Type
	bits   int
	quoted bool
}

type fieldDecoder struct {
	index []int
	dec   *decoder
}

type decoderCache map[reflect.Type]*decoder

func compileDecoder(t reflect.Type) (*decoder, error) {
	return decoderCache{}.compile(t, false)
}

func (c decoderCache) compile(t reflect.Type, quoted bool) (*decoder, error) {
	if !quoted {
		if d, ok := c[t]; ok {
			return d, nil // recursive types come back here while being compiled
		}
	}
	d := &decoder{quoted: quoted}
	if !quoted {
		c[t] = d
	}
	switch {
	case t == timeType:
		d.fn = decodeTime
		return d, nil
	case t == rawMessageType:
		d.fn = decodeRaw
		return d, nil
	case t == numberType:
		d.fn = decodeNumber
		return d, nil
	case implements(t, unmarshalerType):
		d.fn = decodeUnmarshaler
		return d, nil
	case textual(t, false) && t.Kind() != reflect.Pointer:
		// As encoding/json reads it, and as its schema says: a string.
		d.fn = decodeText
		return d, nil
	}
	switch t.Kind() {
	case reflect.Bool:
		d.fn = decodeBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		d.fn, d.bits = decodeInt, t.Bits()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		d.fn, d.bits = decodeUint, t.Bits()
	case reflect.Float32, reflect.Float64:
		d.fn, d.bits = decodeFloat, t.Bits()
	case reflect.String:
		d.fn = decodeString
	case reflect.Interface:
		if t.NumMethod() > 0 {
			return nil, fmt.Errorf("interface type %s cannot be decoded from JSON", t)
		}
		d.fn = decodeInterface
	case reflect.Pointer:
		elem, err := c.compile(t.Elem(), quoted)
		if err != nil {
			return nil, err
		}
		d.elem, d.fn = elem, decodePointer
	case reflect.Slice:
		if isBytes(t) {
			d.fn = decodeBytes
			return d, nil
		}
		elem, err := c.compile(t.Elem(), false)
		if err != nil {
			return nil, err
		}
		d.elem, d.fn = elem, decodeSlice
	case reflect.Array:
		elem, err := c.compile(t.Elem(), false)
		if err != nil {
			return nil, err
		}
		d.elem, d.fn = elem, decodeArray
	case reflect.Map:
		elem, err := c.compile(t.Elem(), false)
		if err != nil {
			return nil, err
		}
		d.elem, d.key, d.fn = elem, t.Key(), decodeMap
	case reflect.Struct:
		fs := structFields(t)
		d.fields = make(map[string]*fieldDecoder, len(fs))
		d.fn = decodeStruct
		for _, f := range fs {
			if f.unsettable {
				// encoding/json fails on it at every call; a tool that
				// requires it could never be called.
				return nil, fmt.Errorf("field %s is promoted through an unexported embedded pointer, which binding cannot allocate: embed the struct by value, or export its type", f.sf.Name)
			}
			fd, err := c.compile(f.typ, f.quoted)
			if err != nil {
				return nil, fmt.Errorf("field %s: %w", f.sf.Name, err)
			}
			if format := f.sf.Tag.Get("tool"); format != "" && holdsTime(f.typ) {
				if fd, err = c.compileTimeFormat(f.typ, f.sf.Tag); err != nil {
					return nil, fmt.Errorf("field %s: %w", f.sf.Name, err)
				}
			}
			d.fields[f.name] = &fieldDecoder{index: f.index, dec: fd}
		}
	default:
		return nil, fmt.Errorf("type %s cannot be decoded from JSON", t)
	}
	return d, nil
}

// holdsTime reports whether t is time.Time, or a pointer, slice or array
// of it.
func holdsTime(t reflect.Type) bool {
	for {
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array:
			t = t.Elem()
			continue
		}
		return t == timeType
	}
}

// compileTimeFormat compiles the decoder of a field that holds time.Time
// with the format its tool tag gives: a date-time (the default), or a
// date alone, read as midnight UTC.
func (c decoderCache) compileTimeFormat(t reflect.Type, tag reflect.StructTag) (*decoder, error) {
	tc, err := parseTags(tag)
	if err != nil {
		return nil, err
	}
	switch tc.format {
	case "", "date-time":
		return c.compile(t, false)
	case "date":
	default:
		return nil, fmt.Errorf("format %q does not apply to time.Time, which reads a date-time or a date", tc.format)
	}
	d := &decoder{}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		elem, err := c.compileTimeFormat(t.Elem(), tag)
		if err != nil {
			return nil, err
		}
		d.elem = elem
		d.fn = map[reflect.Kind]func(*decoder, *binder, any, reflect.Value){
			reflect.Pointer: decodePointer, reflect.Slice: decodeSlice, reflect.Array: decodeArray,
		}[t.Kind()]
	default:
		d.fn = decodeDate
	}
	return d, nil
}

func (d *decoder) decode(b *binder, v any, rv reflect.Value) {
	d.fn(d, b, v, rv)
}

func decodeBool(d *decoder, b *binder, v any, rv reflect.Value) {
	switch x := v.(type) {
	case bool:
		rv.SetBool(x)
	case string:
		// The ",string" option; repair and validation allowed only these.
		rv.SetBool(strings.EqualFold(x, "true"))
	}
}

func numberText(v any) (string, bool) {
	switch x := v.(type) {
	case json.Number:
		return string(x), true
	case string:
		return strings.TrimSpace(x), true
	}
	return "", false
}

func decodeInt(d *decoder, b *binder, v any, rv reflect.Value) {
	n, present, ok := exactInteger(v, func(s string) (int64, error) { return strconv.ParseInt(s, 10, d.bits) })
	switch {
	case ok:
		rv.SetInt(n)
	case present:
		lo, hi := int64(-1)<<(d.bits-1), int64(1)<<(d.bits-1)-1
		b.add(fmt.Sprintf("an integer from %d to %d", lo, hi), received(v), nil)
	}
}

func decodeUint(d *decoder, b *binder, v any, rv reflect.Value) {
	n, present, ok := exactInteger(v, func(s string) (uint64, error) { return strconv.ParseUint(s, 10, d.bits) })
	switch {
	case ok:
		rv.SetUint(n)
	case present:
		b.add(fmt.Sprintf("an integer from 0 to %d", uint64(math.MaxUint64)>>(64-d.bits)), received(v), nil)
	}
}

// exactInteger parses an integer from its text: plain, or any JSON number
// form with an integral value (repair has not run on a value with the
// string option). present is false when v is no number at all; ok is false
// when the value is beyond what parse accepts.
func exactInteger[N int64 | uint64](v any, parse func(string) (N, error)) (n N, present, ok bool) {
	s, present := numberText(v)
	if !present {
		return 0, false, false
	}
	n, err := parse(s)
	if err != nil {
		if c, verdict := integerText(s); verdict == isInteger {
			n, err = parse(c)
		}
	}
	return n, true, err == nil
}

func decodeFloat(d *decoder, b *binder, v any, rv reflect.Value) {
	s, ok := numberText(v)
	if !ok {
		return
	}
	f, err := strconv.ParseFloat(s, d.bits)
	if err != nil {
		b.add(fmt.Sprintf("a number that fits in %d bits", d.bits), received(v), nil)
		return
	}
	rv.SetFloat(f)
}

func decodeString(d *decoder, b *binder, v any, rv reflect.Value) {
	s, ok := v.(string)
	if !ok {
		return
	}
	if d.quoted {
		// The ",string" option on a string: a JSON string inside a string.
		var inner string
		if err := json.Unmarshal([]byte(s), &inner); err == nil {
			s = inner
		}
	}
	rv.SetString(s)
}

func decodeNumber(d *decoder, b *binder, v any, rv reflect.Value) {
	if s, ok := numberText(v); ok {
		rv.SetString(s)
	}
}

func decodeInterface(d *decoder, b *binder, v any, rv reflect.Value) {
	if v == nil {
		rv.SetZero()
		return
	}
	rv.Set(reflect.ValueOf(v))
}

func decodePointer(d *decoder, b *binder, v any, rv reflect.Value) {
	if v == nil {
		rv.SetZero()
		return
	}
	if rv.IsNil() {
		rv.Set(reflect.New(rv.Type().Elem()))
	}
	d.elem.decode(b, v, rv.Elem())
}

func decodeBytes(d *decoder, b *binder, v any, rv reflect.Value) {
	s, ok := v.(string)
	if !ok {
		rv.SetZero()
		return
	}
	// Standard base64 as encoding/json writes it; the URL-safe and unpadded
	// forms are the same bytes, so they are accepted too.
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if raw, err := enc.DecodeString(s); err == nil {
			rv.SetBytes(raw)
			return
		}
	}
	b.add("a base64 string", received(v), nil)
}

func decodeSlice(d *decoder, b *binder, v any, rv reflect.Value) {
	arr, ok := v.([]any)
	if !ok {
		rv.SetZero()
		return
	}
	s := reflect.MakeSlice(rv.Type(), len(arr), len(arr))
	for i, e := range arr {
		b.push("", i)
		d.elem.decode(b, e, s.Index(i))
		b.pop()
	}
	rv.Set(s)
}

func decodeArray(d *decoder, b *binder, v any, rv reflect.Value) {
	arr, _ := v.([]any)
	for i := range rv.Len() {
		if i < len(arr) {
			b.push("", i)
			d.elem.decode(b, arr[i], rv.Index(i))
			b.pop()
		} else {
			rv.Index(i).SetZero()
		}
	}
}

func decodeMap(d *decoder, b *binder, v any, rv reflect.Value) {
	m, ok := v.(map[string]any)
	if !ok {
		rv.SetZero()
		return
	}
	t := rv.Type()
	out := reflect.MakeMapWithSize(t, len(m))
	if d.key.Kind() == reflect.String && !implements(d.key, textUnmarshType) {
		for k, e := range m {
			b.push(k, -1)
			d.decodeEntry(b, k, e, out, nil)
			b.pop()
		}
	} else {
		// Names that differ may be one key ("1", "01" and "001" are all 1):
		// which would win depends on map order, so a collision is refused,
		// and the names are taken in order so that the same arguments
		// always read the same.
		names := make([]string, 0, len(m))
		for k := range m {
			names = append(names, k)
		}
		slices.Sort(names)
		seen := make(map[any]string, len(m))
		for _, k := range names {
			b.push(k, -1)
			d.decodeEntry(b, k, m[k], out, seen)
			b.pop()
		}
	}
	rv.Set(out)
}

func (d *decoder) decodeEntry(b *binder, k string, e any, out reflect.Value, seen map[any]string) {
	{
		kv := reflect.New(d.key).Elem()
		switch {
		case implements(d.key, textUnmarshType):
			// Before the string kind, as in encoding/json.
			if err := kv.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(k)); err != nil {
				b.add("a valid key", strconv.Quote(k), nil)
				return
			}
		case d.key.Kind() == reflect.String:
			kv.SetString(k)
		case isIntKind(d.key.Kind()):
			n, err := strconv.ParseInt(k, 10, d.key.Bits())
			if err != nil {
				b.add("an integer key in range", strconv.Quote(k), nil)
				return
			}
			kv.SetInt(n)
		case isUintKind(d.key.Kind()):
			n, err := strconv.ParseUint(k, 10, d.key.Bits())
			if err != nil {
				b.add("a non-negative integer key in range", strconv.Quote(k), nil)
				return
			}
			kv.SetUint(n)
		}
		if seen != nil {
			if first, dup := seen[kv.Interface()]; dup {
				b.add("each key once", strconv.Quote(k)+", the same key as "+strconv.Quote(first), nil)
				return
			}
			seen[kv.Interface()] = k
		}
		ev := reflect.New(out.Type().Elem()).Elem()
		d.elem.decode(b, e, ev)
		out.SetMapIndex(kv, ev)
	}
}

func decodeStruct(d *decoder, b *binder, v any, rv reflect.Value) {
	m, ok := v.(map[string]any)
	if !ok {
		return
	}
	for k, e := range m {
		fd := d.fields[k]
		if fd == nil {
			continue // validation refused unknown names already
		}
		b.push(k, -1)
		if fv, ok := fieldByIndex(rv, fd.index); ok {
			fd.dec.decode(b, e, fv)
		} else {
			b.add("no value here (it cannot be set)", received(e), nil)
		}
		b.pop()
	}
}

// fieldByIndex is reflect.Value.FieldByIndex that allocates nil embedded
// pointers on the way, as encoding/json does. An unexported embedded
// pointer cannot be allocated.
func fieldByIndex(v reflect.Value, index []int) (reflect.Value, bool) {
	for i, x := range index {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				if !v.CanSet() {
					return reflect.Value{}, false
				}
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v, true
}

func decodeTime(d *decoder, b *binder, v any, rv reflect.Value) {
	s, ok := v.(string)
	if !ok {
		return
	}
	t, ok := parseDateTime(s)
	if !ok {
		b.add("a date-time such as 2006-01-02T15:04:05Z", received(v), nil)
		return
	}
	rv.Set(reflect.ValueOf(t))
}

// parseDateTime reads an RFC 3339 date-time as the schema's format
// accepts it: T and Z in either case, and a leap second, which time.Time
// cannot hold and becomes the second after :59.
func parseDateTime(s string) (time.Time, bool) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, true
	}
	if len(s) < 20 {
		return time.Time{}, false
	}
	b := []byte(s)
	if b[10] == 't' {
		b[10] = 'T'
	}
	if b[len(b)-1] == 'z' {
		b[len(b)-1] = 'Z'
	}
	leap := string(b[17:19]) == "60"
	if leap {
		b[17], b[18] = '5', '9'
	}
	t, err := time.Parse(time.RFC3339Nano, string(b))
	if err != nil {
		return time.Time{}, false
	}
	if leap {
		t = t.Add(time.Second)
	}
	return t, true
}

func decodeDate(d *decoder, b *binder, v any, rv reflect.Value) {
	s, ok := v.(string)
	if !ok {
		return
	}
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		b.add("a date such as 2006-01-02", received(v), nil)
		return
	}
	rv.Set(reflect.ValueOf(t))
}

func decodeRaw(d *decoder, b *binder, v any, rv reflect.Value) {
	raw, err := json.Marshal(v)
	if err != nil {
		b.add("a JSON value", received(v), nil)
		return
	}
	rv.SetBytes(raw)
}

func decodeUnmarshaler(d *decoder, b *binder, v any, rv reflect.Value) {
	raw, err := json.Marshal(v)
	if err != nil {
		b.add("a JSON value", received(v), nil)
		return
	}
	target := rv
	if rv.Kind() == reflect.Pointer {
		if v == nil {
			rv.SetZero()
			return
		}
		if rv.IsNil() {
			rv.Set(reflect.New(rv.Type().Elem()))
		}
	} else {
		target = rv.Addr()
	}
	// The method's error is not quoted: it tends to name Go types and
	// functions, which mean nothing to a model.
	if err := target.Interface().(json.Unmarshaler).UnmarshalJSON(raw); err != nil {
		b.add("a valid value", received(v), nil)
	}
}

func decodeText(d *decoder, b *binder, v any, rv reflect.Value) {
	s, ok := v.(string)
	if !ok {
		return
	}
	if err := rv.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
		b.add("a valid value", received(v), nil)
	}
}
