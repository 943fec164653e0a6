package toolkit

import (
	"context"
	"errors"
	"log/slog"
	"math/big"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// readmeOrder is the README's example tool's type, input and output.
type readmeOrder struct {
	ID     string `json:"id" description:"Order id, e.g. O-5001"`
	Status string `json:"status,omitempty" tool:"enum=created|paid|shipped" default:"paid"`
}

// propLevel writes itself as text with a pointer receiver only.
type propLevel struct{ n int }

func (l *propLevel) MarshalText() ([]byte, error) { return []byte("L" + strconv.Itoa(l.n)), nil }

type propOut struct {
	Level  propLevel            `json:"level"`
	Big    big.Float            `json:"big"`
	ByKey  map[string]propLevel `json:"byKey"`
	Levels []propLevel          `json:"levels"`
	Ptr    *propLevel           `json:"ptr,omitempty"`
	Counts map[string]int       `json:"counts,omitempty"`
	Code   string               `json:"code,omitempty" pattern:"^[A-Z]{2}$"`
	Days   int                  `json:"days" tool:"minimum=1;maximum=14"`
	RT     rtIn                 `json:"rt"`
}

// checkGeneratedResults returns n generated values of Out from a tool and
// checks that every structuredContent it produces passes the tool's output
// schema, and that one is there whenever a schema is declared. A result
// the schema would refuse must be an error, never structured content.
// fix, if not nil, makes most generated values meet the tags' constraints,
// so that conforming results are tested too.
func checkGeneratedResults[Out any](t *testing.T, n int, fix func(*rand.Rand, *Out)) {
	t.Helper()
	var next Out
	tool := MustNew("gen", "", func(context.Context, struct{}) (Out, error) { return next, nil })
	raw := tool.Spec().OutputSchema
	if len(raw) == 0 {
		t.Fatalf("%T declares no output schema", next)
	}
	sch, err := compileOutput(raw)
	if err != nil {
		t.Fatal(err)
	}
	r := &Registry{PropagateErrors: true, Logger: slog.New(slog.DiscardHandler)}
	if err := r.Add(tool); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, uint64(n)))
	conforming := 0
	for i := range n {
		next = *new(Out)
		if i > 0 { // the zero value first
			randomValue(rng, reflect.ValueOf(&next).Elem(), 0)
			if fix != nil && rng.IntN(4) > 0 {
				fix(rng, &next)
			}
		}
		res, err := r.Call(context.Background(), "gen", nil)
		if err != nil {
			if ee := (*encodeError)(nil); !errors.As(err, &ee) {
				t.Fatalf("call %d: %v", i, err)
			}
			continue
		}
		if len(res.StructuredContent) == 0 {
			t.Fatalf("call %d: an output schema is declared, but the result has no structuredContent: %s", i, res.Text())
		}
		if err := conforms(sch, res.StructuredContent); err != nil {
			t.Fatalf("call %d: structuredContent %s breaks the output schema %s:\n%v", i, res.StructuredContent, raw, err)
		}
		conforming++
	}
	if conforming < n/10 {
		t.Errorf("only %d of %d generated results conform: the generator tests little", conforming, n)
	}
}

// TestOutputSchemaHoldsForGeneratedResults is the property that MCP asks
// of a server: structuredContent conforms to the declared outputSchema.
// cmd/example-tools holds its own tools to it the same way.
func TestOutputSchemaHoldsForGeneratedResults(t *testing.T) {
	fixOrder := func(r *rand.Rand, o *readmeOrder) { o.Status = []string{"", "created", "paid", "shipped"}[r.IntN(4)] }
	fixOut := func(r *rand.Rand, o *propOut) { o.Code, o.Days = []string{"", "AB", "ZZ"}[r.IntN(3)], 1+r.IntN(14) }
	t.Run("README order", func(t *testing.T) { checkGeneratedResults(t, 300, fixOrder) })
	t.Run("pointer receivers, bounds and maps", func(t *testing.T) { checkGeneratedResults(t, 300, fixOut) })
	t.Run("a map", func(t *testing.T) {
		checkGeneratedResults(t, 300, func(r *rand.Rand, m *map[string]propOut) {
			for k, v := range *m {
				fixOut(r, &v)
				(*m)[k] = v
			}
		})
	})
	t.Run("every mapped type", func(t *testing.T) { checkGeneratedResults[rtIn](t, 300, nil) })
	t.Run("a call result is its own", func(t *testing.T) {
		if s := MustNew("r", "", func(context.Context, struct{}) (*spec.CallResult, error) { return nil, nil }).Spec().OutputSchema; s != nil {
			t.Errorf("a *spec.CallResult declares %s", s)
		}
	})
}
