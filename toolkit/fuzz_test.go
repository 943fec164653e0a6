package toolkit

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolplane/toolplane/toolkit/internal/bindcases"
)

// fuzzTools are the tools FuzzBind binds into: a typed one covering every
// mapped type and constraint kind, and a dynamic one over a hand-written
// schema.
func fuzzTools(tb testing.TB) (typed, dynamic *Tool, bound *any) {
	bound = new(any)
	typed, err := NewAction("typed", "", func(_ context.Context, in bindIn) error {
		*bound = in
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	dynamic, err = NewDynamic("dynamic", "", new(Params).
		String("s", "", MaxLength(5)).
		Integer("i", "", Minimum(-3), Maximum(uint64(1)<<63), Default(1)).
		Enum("e", "", []string{"Up", "down"}, Optional()).
		Array("a", "", "integer", MaxItems(3), Optional()).
		Object("o", "", new(Params).Boolean("b", "").Number("n", "", Optional()), Optional()).
		Schema(),
		func(_ context.Context, args map[string]any) (any, error) {
			*bound = args
			return nil, nil
		})
	if err != nil {
		tb.Fatal(err)
	}
	return typed, dynamic, bound
}

// FuzzBind checks that binding never panics, and that whatever it binds
// passes the tool's own schema: leniency never lets an invalid value
// through. Plain go test runs its seeds: inline, in testdata/fuzz/FuzzBind
// (one file for each repair and refusal of the matrix that go beyond
// JSON's syntax), and every row of the shared repair and refusal table.
// To fuzz briefly, from the toolkit directory:
//
//	go test -run='^$' -fuzz='^FuzzBind$' -fuzztime=5s .
func FuzzBind(f *testing.F) {
	for _, seed := range []string{
		`{"name":"a"}`,
		`{"name":"a","count":"5.0","flag":"TRUE","color":"red","tags":"[\"x\",]",}`,
		`"{\"name\":\"a\",\"limit\":\"100\"}"`,
		`{"name":"a","big":9223372036854775807,"huge":18446744073709551615,"small":-128}`,
		`{"name":"a","addr":"{\"street\":\"s\"}","items":[{"sku":"x","qty":"65535"}]}`,
		`{"name":"a","when":"2026-01-02T03:04:05Z","data":"aGk=","extra":[1,{"x":null}],"any":1e400}`,
		`{"s":"abc","i":"-3","e":"UP","a":"[1,2.0]","o":{"b":"false","n":"1e-3"}}`,
		`{"NAME":"a","Count":1e2,"labels":{"k":"7"}}`,
		`{"name":null,"count":1.5,"naem":1}`,
		`[1,2,3]`, `null`, ``, `{"name":"a" /* c */}`,
	} {
		f.Add([]byte(seed))
	}
	for _, c := range bindcases.Repairs {
		f.Add([]byte(c.Args))
	}
	for _, c := range bindcases.Refusals {
		if len(c.Args) <= 4<<10 {
			f.Add([]byte(c.Args))
		}
	}
	typed, dynamic, bound := fuzzTools(f)
	f.Fuzz(func(t *testing.T, args []byte) {
		for _, tool := range []*Tool{typed, dynamic} {
			*bound = nil
			_, err := tool.call(context.Background(), args, nil)
			if err != nil {
				var ae *ArgumentError
				if !errors.As(err, &ae) || len(ae.Problems) == 0 {
					t.Fatalf("%s: error %v is not an *ArgumentError with problems", tool.Name(), err)
				}
				if *bound != nil {
					t.Fatalf("%s: the function ran despite %v", tool.Name(), err)
				}
				continue
			}
			if *bound == nil {
				t.Fatalf("%s: no error, but the function did not run", tool.Name())
			}
			assertValid(t, tool.validator, *bound)
		}
	})
}

// assertValid checks that the JSON of a bound value passes the schema.
func assertValid(t *testing.T, sch *jsonschema.Schema, v any) {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("bound value cannot be encoded: %v", err)
	}
	doc, err := parseStrict(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(doc); err != nil {
		t.Fatalf("bound a value that fails the schema: %s\n%v", raw, err)
	}
}
