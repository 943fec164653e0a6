package toolkit

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

type RTEmbedded struct {
	Promoted string `json:"promoted"`
	Shadowed int    `json:"shadowed"`
}

type rtInner struct {
	Label string   `json:"label"`
	Score *float32 `json:"score"`
}

// rtIn holds every kind of type the schema maps, without value constraints,
// for the round-trip test.
type rtIn struct {
	RTEmbedded
	*rtInner `json:"inner,omitempty"`
	Shadowed string            `json:"shadowed"`
	S        string            `json:"s"`
	B        bool              `json:"b"`
	I        int               `json:"i"`
	I8       int8              `json:"i8"`
	I16      int16             `json:"i16"`
	I32      int32             `json:"i32"`
	I64      int64             `json:"i64"`
	U        uint              `json:"u"`
	U8       uint8             `json:"u8"`
	U16      uint16            `json:"u16"`
	U32      uint32            `json:"u32"`
	U64      uint64            `json:"u64"`
	F32      float32           `json:"f32"`
	F64      float64           `json:"f64"`
	Quoted   int64             `json:"quoted,string"`
	QBool    bool              `json:"qbool,string"`
	Ptr      *int              `json:"ptr"`
	PtrOmit  *string           `json:"ptrOmit,omitempty"`
	Strings  []string          `json:"strings"`
	Ptrs     []*rtInner        `json:"ptrs"`
	Arr      [2]uint8          `json:"arr"`
	Map      map[string]int64  `json:"map"`
	IntMap   map[int32]string  `json:"intMap"`
	Nested   rtInner           `json:"nested"`
	When     time.Time         `json:"when"`
	Bytes    []byte            `json:"bytes"`
	Raw      json.RawMessage   `json:"raw"`
	Any      any               `json:"any"`
	Tree     tree              `json:"tree"`
	Num      json.Number       `json:"num"`
	Skipped  func()            `json:"-"`
	Omitted  map[string]string `json:"omitted,omitempty"`
	private  int               //nolint:unused // unexported fields must stay out of the schema
}

// randomValue fills v with random contents, as a property-based generator
// that knows the types toolkit maps.
func randomValue(r *rand.Rand, v reflect.Value, depth int) {
	t := v.Type()
	switch t {
	case timeType:
		sec := r.Int64N(1 << 35)
		loc := time.FixedZone("", (r.IntN(27)-13)*3600)
		v.Set(reflect.ValueOf(time.Unix(sec, r.Int64N(1e9)).In(loc)))
		return
	case rawMessageType:
		raws := []string{"", `{"a":[1,2.5,"x"]}`, `"s"`, `12345678901234567890`, `null`}
		if s := raws[r.IntN(len(raws))]; s != "" {
			v.SetBytes([]byte(s))
		}
		return
	case numberType:
		nums := []string{"0", "-1.5e300", "18446744073709551615", "3.14"}
		v.SetString(nums[r.IntN(len(nums))])
		return
	}
	switch t.Kind() {
	case reflect.String:
		runes := []rune("aZ09 ,;|\"\\/é😀\n\t<>&")
		n := r.IntN(8)
		s := make([]rune, n)
		for i := range s {
			s[i] = runes[r.IntN(len(runes))]
		}
		v.SetString(string(s))
	case reflect.Bool:
		v.SetBool(r.IntN(2) == 1)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bits := t.Bits()
		lo, hi := int64(-1)<<(bits-1), int64(1)<<(bits-1)-1
		choices := []int64{lo, hi, 0, -1, 1, r.Int64() >> (64 - bits)}
		v.SetInt(choices[r.IntN(len(choices))])
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		hi := uint64(math.MaxUint64) >> (64 - t.Bits())
		choices := []uint64{0, 1, hi, r.Uint64() & hi}
		v.SetUint(choices[r.IntN(len(choices))])
	case reflect.Float32:
		choices := []float32{0, -1.5, math.MaxFloat32, math.SmallestNonzeroFloat32, r.Float32() * 1e10}
		v.SetFloat(float64(choices[r.IntN(len(choices))]))
	case reflect.Float64:
		choices := []float64{0, -2.5, math.MaxFloat64, math.SmallestNonzeroFloat64, r.NormFloat64() * 1e100}
		v.SetFloat(choices[r.IntN(len(choices))])
	case reflect.Pointer:
		if r.IntN(3) == 0 || depth > 3 {
			return
		}
		p := reflect.New(t.Elem())
		randomValue(r, p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			if r.IntN(4) > 0 {
				b := make([]byte, r.IntN(6))
				for i := range b {
					b[i] = byte(r.IntN(256))
				}
				v.SetBytes(b)
			}
			return
		}
		if r.IntN(4) == 0 || depth > 3 {
			return
		}
		n := r.IntN(3)
		s := reflect.MakeSlice(t, n, n)
		for i := range n {
			randomValue(r, s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Array:
		for i := range v.Len() {
			randomValue(r, v.Index(i), depth+1)
		}
	case reflect.Map:
		if r.IntN(4) == 0 || depth > 3 {
			return
		}
		m := reflect.MakeMap(t)
		for range r.IntN(3) {
			k := reflect.New(t.Key()).Elem()
			randomValue(r, k, depth+1)
			e := reflect.New(t.Elem()).Elem()
			randomValue(r, e, depth+1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Interface:
		choices := []any{nil, "x", 1.5, true, map[string]any{"k": []any{"v", 2.0}}, []any{}}
		if c := choices[r.IntN(len(choices))]; c != nil {
			v.Set(reflect.ValueOf(c))
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() && t.Field(i).Type.Kind() != reflect.Func {
				randomValue(r, f, depth+1)
			}
		}
	}
}

// TestSchemaRoundTrip checks that the schema generated for a type accepts
// every value json.Marshal produces for it, and that binding it back gives
// the same JSON: schema, binder and encoding/json agree.
func TestSchemaRoundTrip(t *testing.T) {
	tool, err := New("echo", "", func(_ context.Context, in rtIn) (rtIn, error) { return in, nil })
	if err != nil {
		t.Fatal(err)
	}
	r := &Registry{PropagateErrors: true}
	if err := r.Add(tool); err != nil {
		t.Fatal(err)
	}
	outDoc, err := jsonschema.UnmarshalJSON(bytes.NewReader(tool.Spec().OutputSchema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("urn:out", outDoc); err != nil {
		t.Fatal(err)
	}
	outSchema, err := c.Compile("urn:out")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		var in rtIn
		if i > 0 { // the zero value first
			randomValue(rng, reflect.ValueOf(&in).Elem(), 0)
		}
		raw, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := parseStrict(raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := tool.validator.Validate(doc); err != nil {
			t.Fatalf("the schema refuses json.Marshal's output %s:\n%v", raw, err)
		}
		res, err := r.Call(context.Background(), "echo", raw)
		if err != nil {
			t.Fatalf("binding %s: %v", raw, err)
		}
		if !bytes.Equal(res.StructuredContent, raw) {
			t.Fatalf("round trip changed the value\n sent: %s\n back: %s", raw, res.StructuredContent)
		}
		// The structured result conforms to the advertised output schema.
		out, err := parseStrict(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		if err := outSchema.Validate(out); err != nil {
			t.Fatalf("structured content fails the output schema: %s\n%v", res.StructuredContent, err)
		}
	}
}
