package toolkit

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

type bindAddr struct {
	Street string `json:"street"`
	Zip    string `json:"zip,omitempty"`
}

type bindItem struct {
	SKU string `json:"sku"`
	Qty uint16 `json:"qty,omitempty"`
}

type bindIn struct {
	Name   string          `json:"name"`
	Count  int             `json:"count,omitempty"`
	Small  int8            `json:"small,omitempty"`
	Big    int64           `json:"big,omitempty"`
	Huge   uint64          `json:"huge,omitempty"`
	Ratio  float64         `json:"ratio,omitempty"`
	Flag   bool            `json:"flag,omitempty"`
	Color  string          `json:"color,omitempty" tool:"enum=Red|Green|Blue"`
	Units  string          `json:"units,omitempty" default:"metric, SI"`
	Limit  int             `json:"limit,omitempty" default:"10" tool:"minimum=1;maximum=100"`
	Tags   []string        `json:"tags,omitempty"`
	Addr   *bindAddr       `json:"addr,omitempty"`
	Items  []bindItem      `json:"items,omitempty"`
	Labels map[string]int  `json:"labels,omitempty"`
	When   time.Time       `json:"when,omitzero"`
	Data   []byte          `json:"data,omitempty"`
	Extra  json.RawMessage `json:"extra,omitempty"`
	Any    any             `json:"any,omitempty"`
}

// bindTool returns a registry with a tool that hands back what it bound.
func bindTool(t testing.TB) (*Registry, *bindIn) {
	t.Helper()
	got := new(bindIn)
	tool, err := NewAction("bind", "", func(_ context.Context, in bindIn) error {
		*got = in
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &Registry{PropagateErrors: true}
	if err := r.Add(tool); err != nil {
		t.Fatal(err)
	}
	return r, got
}

// want returns the value bound from {"name":"a"} (defaults included),
// changed by edit.
func want(edit func(*bindIn)) bindIn {
	in := bindIn{Name: "a", Units: "metric, SI", Limit: 10}
	if edit != nil {
		edit(&in)
	}
	return in
}

// TestBindRepairs has one row per repair: each is accepted and bound to the
// value the model meant.
func TestBindRepairs(t *testing.T) {
	tests := []struct {
		name string
		args string
		want bindIn
	}{
		{"well-formed arguments", `{"name":"a"}`, want(nil)},
		{"trailing comma in an object", `{"name":"a",}`, want(nil)},
		{"trailing comma in an array", `{"name":"a","tags":["x","y",],}`, want(func(in *bindIn) { in.Tags = []string{"x", "y"} })},
		{"comments", "{\"name\":\"a\" /* the name */, // end\n}", want(nil)},
		{"argument object sent as a JSON string", `"{\"name\":\"a\",\"count\":2}"`, want(func(in *bindIn) { in.Count = 2 })},
		{"array double-encoded", `{"name":"a","tags":"[\"x\",\"y\"]"}`, want(func(in *bindIn) { in.Tags = []string{"x", "y"} })},
		{"object double-encoded", `{"name":"a","addr":"{\"street\":\"Main St, 1\"}"}`, want(func(in *bindIn) { in.Addr = &bindAddr{Street: "Main St, 1"} })},
		{"double-encoded with a trailing comma", `{"name":"a","tags":"[\"x\",]"}`, want(func(in *bindIn) { in.Tags = []string{"x"} })},
		{"integer sent as a string", `{"name":"a","count":"42"}`, want(func(in *bindIn) { in.Count = 42 })},
		{"integer string with spaces", `{"name":"a","count":" 7 "}`, want(func(in *bindIn) { in.Count = 7 })},
		{"number sent as a string", `{"name":"a","ratio":"2.5"}`, want(func(in *bindIn) { in.Ratio = 2.5 })},
		{"integral float for an integer", `{"name":"a","count":5.0}`, want(func(in *bindIn) { in.Count = 5 })},
		{"integral exponent for an integer", `{"name":"a","count":1.5e3}`, want(func(in *bindIn) { in.Count = 1500 })},
		{"integral float as a string", `{"name":"a","count":"5.00"}`, want(func(in *bindIn) { in.Count = 5 })},
		{"\"true\" for a boolean", `{"name":"a","flag":"true"}`, want(func(in *bindIn) { in.Flag = true })},
		{"\"FALSE\" for a boolean", `{"name":"a","flag":"FALSE","count":1}`, want(func(in *bindIn) { in.Count = 1 })},
		{"enum in another case", `{"name":"a","color":"gREEN"}`, want(func(in *bindIn) { in.Color = "Green" })},
		{"argument name in another case", `{"NAME":"a","Count":3}`, want(func(in *bindIn) { in.Count = 3 })},
		{"null for an optional pointer", `{"name":"a","addr":null}`, want(nil)},
		{"null for an optional slice and map", `{"name":"a","tags":null,"labels":null}`, want(nil)},
		{"missing optional argument takes its default", `{"name":"a"}`, want(nil)},
		{"given argument overrides the default", `{"name":"a","limit":"50","units":"imperial"}`, want(func(in *bindIn) { in.Limit, in.Units = 50, "imperial" })},
		{"repairs inside arrays of objects", `{"name":"a","items":[{"sku":"x","qty":"2"},{"SKU":"y"}]}`, want(func(in *bindIn) { in.Items = []bindItem{{"x", 2}, {"y", 0}} })},
		{"repairs inside map values", `{"name":"a","labels":{"k":"3"}}`, want(func(in *bindIn) { in.Labels = map[string]int{"k": 3} })},
		{"date-time", `{"name":"a","when":"2026-11-30T03:04:05.5Z"}`, want(func(in *bindIn) { in.When = time.Date(2026, 11, 30, 3, 4, 5, 5e8, time.UTC) })},
		{"base64", `{"name":"a","data":"aGk="}`, want(func(in *bindIn) { in.Data = []byte("hi") })},
		{"unpadded base64", `{"name":"a","data":"aGk"}`, want(func(in *bindIn) { in.Data = []byte("hi") })},
		{"raw JSON kept", `{"name":"a","extra":{"b":[1,2]}}`, want(func(in *bindIn) { in.Extra = json.RawMessage(`{"b":[1,2]}`) })},
		{"any keeps exact numbers", `{"name":"a","any":{"n":12345678901234567890}}`, want(func(in *bindIn) { in.Any = map[string]any{"n": json.Number("12345678901234567890")} })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, got := bindTool(t)
			res, err := r.Call(context.Background(), "bind", json.RawMessage(tt.args))
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if res.Text() != "Success" {
				t.Fatalf("result %q", res.Text())
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("bound\n got: %+v\nwant: %+v", *got, tt.want)
			}
		})
	}
}

// TestBindExactIntegers checks the full int64 and uint64 ranges, which
// float64 cannot hold.
func TestBindExactIntegers(t *testing.T) {
	tests := []struct {
		name string
		args string
		want bindIn
	}{
		{"max int64", `{"name":"a","big":9223372036854775807}`, want(func(in *bindIn) { in.Big = math.MaxInt64 })},
		{"min int64", `{"name":"a","big":-9223372036854775808}`, want(func(in *bindIn) { in.Big = math.MinInt64 })},
		{"max uint64", `{"name":"a","huge":18446744073709551615}`, want(func(in *bindIn) { in.Huge = math.MaxUint64 })},
		{"2^53+1", `{"name":"a","big":9007199254740993}`, want(func(in *bindIn) { in.Big = 1<<53 + 1 })},
		{"max int64 as a string", `{"name":"a","big":"9223372036854775807"}`, want(func(in *bindIn) { in.Big = math.MaxInt64 })},
		{"max int64 in exponent form", `{"name":"a","big":9.223372036854775807e18}`, want(func(in *bindIn) { in.Big = math.MaxInt64 })},
		{"max uint64 with a zero fraction", `{"name":"a","huge":18446744073709551615.000}`, want(func(in *bindIn) { in.Huge = math.MaxUint64 })},
		{"int8 bounds", `{"name":"a","small":-128}`, want(func(in *bindIn) { in.Small = -128 })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, got := bindTool(t)
			if _, err := r.Call(context.Background(), "bind", json.RawMessage(tt.args)); err != nil {
				t.Fatalf("Call: %v", err)
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("bound\n got: %+v\nwant: %+v", *got, tt.want)
			}
		})
	}
}

// TestBindRefusals has one row per refusal: the call fails with an
// *ArgumentError whose problem names the path, what was expected and what
// was received.
func TestBindRefusals(t *testing.T) {
	tests := []struct {
		name string
		args string
		want string // one problem, as Problem.String renders it
	}{
		{"non-integral value for an integer", `{"name":"a","count":5.5}`, `$.count: expected an integer, received 5.5`},
		{"non-integral string for an integer", `{"name":"a","count":"5.5"}`, `$.count: expected an integer, received 5.5`},
		{"text for an integer", `{"name":"a","count":"five"}`, `$.count: expected an integer, received "five"`},
		{"above the int8 range", `{"name":"a","small":128}`, `$.small: expected a number <= 127, received 128`},
		{"below the int8 range", `{"name":"a","small":-129}`, `$.small: expected a number >= -128, received -129`},
		{"above the int64 range", `{"name":"a","big":9223372036854775808}`, `$.big: expected an integer from -9223372036854775808 to 9223372036854775807, received 9223372036854775808`},
		{"above the uint64 range", `{"name":"a","huge":18446744073709551616}`, `$.huge: expected an integer from 0 to 18446744073709551615, received 18446744073709551616`},
		{"negative for an unsigned integer", `{"name":"a","huge":-1}`, `$.huge: expected a number >= 0, received -1`},
		{"huge exponent", `{"name":"a","count":1e400}`, `$.count: expected a number in range (a magnitude from 4.9e-324 to 1.8e308, at most 800 significant digits), received 1e400`},
		{"huge exponent in a string", `{"name":"a","count":"1e999999"}`, `$.count: expected a number in range (a magnitude from 4.9e-324 to 1.8e308, at most 800 significant digits), received "1e999999"`},
		{"tiny exponent", `{"name":"a","limit":1e-999999}`, `$.limit: expected a number in range (a magnitude from 4.9e-324 to 1.8e308, at most 800 significant digits), received 1e-999999`},
		{"below the schema minimum", `{"name":"a","limit":0}`, `$.limit: expected a number >= 1, received 0`},
		{"above the schema maximum", `{"name":"a","limit":"101"}`, `$.limit: expected a number <= 100, received 101`},
		{"other string for a boolean", `{"name":"a","flag":"yes"}`, `$.flag: expected a boolean (true or false), received "yes"`},
		{"number for a boolean", `{"name":"a","flag":1}`, `$.flag: expected a boolean, received 1`},
		{"value not in the enum", `{"name":"a","color":"purple"}`, `$.color: expected one of "Red", "Green", "Blue", received "purple"`},
		{"missing required argument", `{}`, `$.name: expected a string (required), received nothing`},
		{"null for a required argument", `{"name":null}`, `$.name: expected a string, received null`},
		{"null for an optional value", `{"name":"a","count":null}`, `$.count: expected an integer, received null`},
		{"null for an optional value with a default", `{"name":"a","limit":null}`, `$.limit: expected an integer, received null`},
		{"missing required argument in an object", `{"name":"a","addr":{"zip":"1"}}`, `$.addr.street: expected a string (required), received nothing`},
		{"missing required argument in an array item", `{"name":"a","items":[{"sku":"x"},{"qty":1}]}`, `$.items[1].sku: expected a string (required), received nothing`},
		{"unknown argument name", `{"name":"a","colour":"Red"}`, `$.colour: expected a known argument name, received unknown name "colour" (did you mean "color"?); valid names are addr, any, big, color, count, data, extra, flag, huge, items, labels, limit, name, ratio, small, tags, units, when`},
		{"unknown argument name, nothing near it", `{"name":"a","zzzzzz":1}`, `$.zzzzzz: expected a known argument name, received unknown name "zzzzzz"; valid names are addr, any, big, color, count, data, extra, flag, huge, items, labels, limit, name, ratio, small, tags, units, when`},
		{"unknown nested argument name", `{"name":"a","addr":{"street":"s","cty":"x"}}`, `$.addr.cty: expected a known argument name, received unknown name "cty"; valid names are street, zip`},
		{"not JSON", `{"name":`, `$: expected a JSON object of arguments, received text that is not JSON (unexpected EOF)`},
		{"not an object", `[1,2]`, `$: expected an object, received [1,2]`},
		{"string that is not an object", `"hello"`, `$: expected an object, received "hello"`},
		{"object for a string", `{"name":{"first":"a"}}`, `$.name: expected a string, received {"first":"a"}`},
		{"bad date-time", `{"name":"a","when":"yesterday"}`, `$.when: expected a valid date-time string, received "yesterday"`},
		{"bad base64", `{"name":"a","data":"!!"}`, `$.data: expected a base64 string, received "!!"`},
		{"number for an array of strings", `{"name":"a","tags":5}`, `$.tags: expected an array or null, received 5`},
		{"long values are cut", `{"name":"a","count":"` + strings.Repeat("9", 200) + `x"}`, `$.count: expected an integer, received "` + strings.Repeat("9", 79) + `…`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := bindTool(t)
			_, err := r.Call(context.Background(), "bind", json.RawMessage(tt.args))
			var ae *ArgumentError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v, want an *ArgumentError", err)
			}
			if len(ae.Problems) != 1 {
				t.Fatalf("want one problem, got:\n%v", ae)
			}
			if got := ae.Problems[0].String(); got != tt.want {
				t.Errorf("problem\n got: %s\nwant: %s", got, tt.want)
			}
			assertNoGoTypes(t, ae.Error())
		})
	}
}

func assertNoGoTypes(t *testing.T, msg string) {
	t.Helper()
	for _, goish := range []string{"int64", "uint", "float", "int8", "struct", "map[", "[]", "bindIn", "toolkit.", "json.", "reflect", "interface"} {
		if strings.Contains(msg, goish) {
			t.Errorf("message shows Go type %q: %s", goish, msg)
		}
	}
}

func TestBindReportsEveryProblemAtOnce(t *testing.T) {
	r, _ := bindTool(t)
	_, err := r.Call(context.Background(), "bind", json.RawMessage(
		`{"count":1.5,"flag":"maybe","color":"pink","addr":{},"items":[{"sku":1}],"naem":"a"}`))
	var ae *ArgumentError
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v", err)
	}
	want := `invalid arguments for tool "bind":
- $.addr.street: expected a string (required), received nothing
- $.color: expected one of "Red", "Green", "Blue", received "pink"
- $.count: expected an integer, received 1.5
- $.flag: expected a boolean (true or false), received "maybe"
- $.items[0].sku: expected a string, received 1
- $.naem: expected a known argument name, received unknown name "naem" (did you mean "name"?); valid names are addr, any, big, color, count, data, extra, flag, huge, items, labels, limit, name, ratio, small, tags, units, when
- $.name: expected a string (required), received nothing`
	if ae.Error() != want {
		t.Errorf("message\n got: %s\nwant: %s", ae.Error(), want)
	}
}

func TestBindDoesNotShareDefaults(t *testing.T) {
	type in struct {
		Tags []string `json:"tags,omitempty" default:"[\"a\"]"`
	}
	var r Registry
	_ = r.Add(MustNew("t", "", func(_ context.Context, in in) ([]string, error) {
		in.Tags[0] = "changed"
		return in.Tags, nil
	}))
	for range 2 {
		res, _ := r.Call(context.Background(), "t", nil)
		if res.Text() != `["changed"]` {
			t.Fatalf("text = %s", res.Text())
		}
	}
	if d := r.Specs()[0].InputSchema; !strings.Contains(string(d), `"default":["a"]`) {
		t.Errorf("schema default changed: %s", d)
	}
}

func TestBindStringOption(t *testing.T) {
	type in struct {
		ID   int64 `json:"id,string"`
		Flag bool  `json:"flag,string,omitempty"`
	}
	var got in
	r := &Registry{PropagateErrors: true}
	_ = r.Add(MustNewAction("t", "", func(_ context.Context, v in) error { got = v; return nil }))
	if _, err := r.Call(context.Background(), "t", json.RawMessage(`{"id":"9223372036854775807","flag":"true"}`)); err != nil {
		t.Fatal(err)
	}
	if got.ID != math.MaxInt64 || !got.Flag {
		t.Errorf("bound %+v", got)
	}
	// What encoding/json writes for it is accepted back.
	b, _ := json.Marshal(in{ID: -5, Flag: true})
	if _, err := r.Call(context.Background(), "t", b); err != nil || got.ID != -5 {
		t.Errorf("round trip of %s: %v, %+v", b, err, got)
	}
}

func TestNearestName(t *testing.T) {
	names := []string{"city", "country", "days", "name", "units"}
	for _, tc := range []struct{ typed, want string }{
		{"naem", "name"},  // swapped letters
		{"cty", "city"},   // a letter missing
		{"Days", "days"},  // case
		{"unit", "units"}, // one short
		{"contry", "country"},
		{"zip", ""}, // nothing near
		{"n", ""},   // too short to guess
		{"weather", ""},
	} {
		if got := nearest(tc.typed, names); got != tc.want {
			t.Errorf("nearest(%q) = %q, want %q", tc.typed, got, tc.want)
		}
	}
	for _, c := range []struct {
		a, b string
		d    int
	}{{"naem", "name", 1}, {"", "abc", 3}, {"abc", "", 3}, {"kitten", "sitting", 3}, {"ab", "ba", 1}, {"same", "same", 0}, {"ca", "abc", 3}} {
		if got := editDistance(c.a, c.b); got != c.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
	}
}

func TestBindCustomTypes(t *testing.T) {
	type in struct {
		Addr  netip.Addr `json:"addr"`
		Count *big.Int   `json:"count,omitempty"`
	}
	var got in
	r := &Registry{PropagateErrors: true}
	_ = r.Add(MustNewAction("t", "", func(_ context.Context, v in) error { got = v; return nil }))
	if _, err := r.Call(context.Background(), "t", json.RawMessage(`{"addr":"10.0.0.1","count":123456789012345678901234567890}`)); err != nil {
		t.Fatal(err)
	}
	if got.Addr.String() != "10.0.0.1" || got.Count.String() != "123456789012345678901234567890" {
		t.Errorf("bound %v %v", got.Addr, got.Count)
	}
	_, err := r.Call(context.Background(), "t", json.RawMessage(`{"addr":"not an address","count":"x"}`))
	var ae *ArgumentError
	if !errors.As(err, &ae) || len(ae.Problems) != 2 {
		t.Fatalf("err = %v", err)
	}
	if ae.Problems[0].String() != `$.addr: expected a valid value, received "not an address"` {
		t.Errorf("problem %s", ae.Problems[0])
	}
	assertNoGoTypes(t, ae.Error())
	for _, goish := range []string{"ParseAddr", "big", "netip"} {
		if strings.Contains(ae.Error(), goish) {
			t.Errorf("message shows %q: %s", goish, ae.Error())
		}
	}
}
