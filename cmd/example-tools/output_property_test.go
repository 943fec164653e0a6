package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	santhosh "github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolplane/toolplane/toolkit"
)

// fill sets v to a random value of its type: a property-test generator for
// the output types of the example tools.
func fill(r *rand.Rand, v reflect.Value, depth int) {
	if v.Type() == reflect.TypeFor[time.Time]() {
		v.Set(reflect.ValueOf(time.Unix(r.Int64N(1<<35), r.Int64N(1e9)).In(time.FixedZone("", (r.IntN(27)-13)*3600))))
		return
	}
	switch v.Kind() {
	case reflect.String:
		pool := []string{"", "x", "北京", "a\"b\\c", "\n\t😀", "paid"}
		v.SetString(pool[r.IntN(len(pool))])
	case reflect.Bool:
		v.SetBool(r.IntN(2) == 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt([]int64{0, 1, -1, 1000, r.Int64() >> (65 - v.Type().Bits())}[r.IntN(5)])
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint([]uint64{0, 1, r.Uint64() >> (64 - v.Type().Bits())}[r.IntN(3)])
	case reflect.Float32, reflect.Float64:
		v.SetFloat([]float64{0, -2.5, 1e300, r.NormFloat64()}[r.IntN(4)])
	case reflect.Pointer:
		if r.IntN(3) > 0 && depth < 4 {
			p := reflect.New(v.Type().Elem())
			fill(r, p.Elem(), depth+1)
			v.Set(p)
		}
	case reflect.Slice:
		if r.IntN(4) > 0 && depth < 4 {
			n := r.IntN(3)
			s := reflect.MakeSlice(v.Type(), n, n)
			for i := range n {
				fill(r, s.Index(i), depth+1)
			}
			v.Set(s)
		}
	case reflect.Map:
		if r.IntN(4) > 0 && depth < 4 {
			m := reflect.MakeMap(v.Type())
			for range r.IntN(3) {
				k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
				fill(r, k, depth+1)
				fill(r, e, depth+1)
				m.SetMapIndex(k, e)
			}
			v.Set(m)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Field(i).CanSet() {
				fill(r, v.Field(i), depth+1)
			}
		}
	}
}

// conformsToOutputs returns generated values of Out from a tool, and checks
// that every structuredContent toolkit produces passes the output schema,
// which must be the one the example tool named declares. fix makes most
// values meet their tags' enums and bounds, so that conforming results are
// tested too; the rest must come back as errors, never as structured
// content that breaks the schema.
func conformsToOutputs[Out any](t *testing.T, tools map[string]*toolkit.Tool, name string, fix func(*rand.Rand, *Out)) {
	t.Helper()
	var next Out
	gen := toolkit.MustNew("gen", "", func(context.Context, struct{}) (Out, error) { return next, nil })
	want := tools[name].Spec().OutputSchema
	if got := gen.Spec().OutputSchema; !bytes.Equal(got, want) || len(want) == 0 {
		t.Fatalf("%s's output schema is %s, not the generated type's %s", name, want, got)
	}
	doc, err := santhosh.UnmarshalJSON(bytes.NewReader(want))
	if err != nil {
		t.Fatal(err)
	}
	c := santhosh.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("urn:out", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("urn:out")
	if err != nil {
		t.Fatal(err)
	}
	reg := &toolkit.Registry{Logger: slog.New(slog.DiscardHandler)}
	if err := reg.Add(gen); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(28, 3))
	conforming := 0
	const n = 300
	for i := range n {
		next = *new(Out)
		if i > 0 {
			fill(r, reflect.ValueOf(&next).Elem(), 0)
			if fix != nil && r.IntN(4) > 0 {
				fix(r, &next)
			}
		}
		res, err := reg.Call(context.Background(), "gen", json.RawMessage(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError {
			continue // a result its schema refuses
		}
		if len(res.StructuredContent) == 0 {
			t.Fatalf("%s: no structuredContent for %s", name, res.Text())
		}
		v, err := santhosh.UnmarshalJSON(bytes.NewReader(res.StructuredContent))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(v); err != nil {
			t.Fatalf("%s: structuredContent %s breaks its output schema:\n%v", name, res.StructuredContent, err)
		}
		conforming++
	}
	if conforming < n/10 {
		t.Errorf("%s: only %d of %d generated results conform", name, conforming, n)
	}
}

func pick[T any](r *rand.Rand, vs ...T) T { return vs[r.IntN(len(vs))] }

// TestOutputSchemasHoldForGeneratedResults is MCP's rule for every typed
// example tool: structuredContent conforms to the declared outputSchema.
func TestOutputSchemasHoldForGeneratedResults(t *testing.T) {
	all, err := exampleTools(&toolkit.Registry{}, &Helpdesk{})
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]*toolkit.Tool{}
	for _, tool := range all {
		tools[tool.Name()] = tool
	}
	conformsToOutputs(t, tools, "typed_echo", func(r *rand.Rand, e *EchoInput) {
		e.Count, e.Status = r.IntN(1001), pick(r, "", "created", "paid", "shipped")
	})
	conformsToOutputs(t, tools, "query_customer", func(r *rand.Rand, l *CustomerList) {
		for i := range l.Customers {
			l.Customers[i].Tier = pick(r, "bronze", "silver", "gold")
		}
	})
	conformsToOutputs[Weather](t, tools, "get_weather", nil)
	conformsToOutputs(t, tools, "evaluate_transaction_risk", func(r *rand.Rand, a *RiskAssessment) {
		a.RiskLevel = pick(r, "LOW", "MEDIUM", "HIGH")
	})
	conformsToOutputs(t, tools, "search_orders", func(r *rand.Rand, l *OrderList) {
		for i := range l.Orders {
			l.Orders[i].Status = pick(r, "created", "paid", "shipped")
		}
	})
	conformsToOutputs(t, tools, "create_ticket", func(r *rand.Rand, tk *Ticket) { tk.Priority = pick(r, "low", "medium", "high") })
	conformsToOutputs[Report](t, tools, "build_report", nil)
	conformsToOutputs[Insight](t, tools, "system_insight", nil)
}
