package toolkit

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/toolplane/toolplane/toolkit/spec"
)

type weather struct {
	City  string  `json:"city"`
	TempC float64 `json:"tempC"`
}

type named string

func call(t *testing.T, tool *Tool, args string) *spec.CallResult {
	t.Helper()
	r := Registry{Logger: slog.New(slog.DiscardHandler)}
	if err := r.Add(tool); err != nil {
		t.Fatal(err)
	}
	res, err := r.Call(context.Background(), tool.Name(), json.RawMessage(args))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestResults(t *testing.T) {
	tests := []struct {
		name       string
		tool       *Tool
		text       string
		structured string
		outSchema  string
		isError    bool
	}{
		{
			name: "string is text",
			tool: MustNew("t", "", func(context.Context, greetIn) (string, error) { return "plain, text", nil }),
			text: "plain, text",
		},
		{
			name: "named string is text",
			tool: MustNew("t", "", func(context.Context, greetIn) (named, error) { return "n", nil }),
			text: "n",
		},
		{
			name: "no output is Success",
			tool: MustNewAction("t", "", func(context.Context, greetIn) error { return nil }),
			text: "Success",
		},
		{
			name: "empty struct is Success",
			tool: MustNew("t", "", func(context.Context, greetIn) (struct{}, error) { return struct{}{}, nil }),
			text: "Success",
		},
		{
			name:       "struct is JSON text and structured content",
			tool:       MustNew("t", "", func(context.Context, greetIn) (weather, error) { return weather{"Oslo", -3.5}, nil }),
			text:       `{"city":"Oslo","tempC":-3.5}`,
			structured: `{"city":"Oslo","tempC":-3.5}`,
			outSchema:  `{"type":"object","properties":{"city":{"type":"string"},"tempC":{"type":"number"}},"required":["city","tempC"],"additionalProperties":false}`,
		},
		{
			name:       "map is structured",
			tool:       MustNew("t", "", func(context.Context, greetIn) (map[string]int, error) { return map[string]int{"a": 1}, nil }),
			text:       `{"a":1}`,
			structured: `{"a":1}`,
			outSchema:  `{"type":"object","additionalProperties":{"type":"integer"}}`,
		},
		{
			name: "slice is JSON text only",
			tool: MustNew("t", "", func(context.Context, greetIn) ([]int, error) { return []int{1, 2}, nil }),
			text: `[1,2]`,
		},
		{
			name: "number is JSON text only",
			tool: MustNew("t", "", func(context.Context, greetIn) (int64, error) { return 9007199254740993, nil }),
			text: `9007199254740993`,
		},
		{
			name: "any is judged per call: a string is text",
			tool: MustNew("t", "", func(context.Context, greetIn) (any, error) { return "as text", nil }),
			text: "as text",
		},
		{
			name:       "any is judged per call: a map is structured",
			tool:       MustNew("t", "", func(context.Context, greetIn) (any, error) { return map[string]int{"n": 1}, nil }),
			text:       `{"n":1}`,
			structured: `{"n":1}`,
		},
		{
			name: "a CallResult is returned as it is",
			tool: MustNew("t", "", func(context.Context, greetIn) (*spec.CallResult, error) {
				return &spec.CallResult{Content: []spec.Content{{Type: "text", Text: "a"}, {Type: "text", Text: "b"}}, IsError: true}, nil
			}),
			text:    "ab",
			isError: true,
		},
		{
			name:    "error is an error result with its message",
			tool:    MustNew("t", "", func(context.Context, greetIn) (string, error) { return "", errors.New("no such city") }),
			text:    "no such city",
			isError: true,
		},
		{
			name:    "panic is an error result without internals",
			tool:    MustNew("t", "", func(context.Context, greetIn) (string, error) { panic("secret internals") }),
			text:    `tool "t" failed unexpectedly (internal error)`,
			isError: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := call(t, tt.tool, `{"name":"x"}`)
			if got := res.Text(); got != tt.text {
				t.Errorf("text = %q, want %q", got, tt.text)
			}
			if string(res.StructuredContent) != tt.structured {
				t.Errorf("structuredContent = %s, want %s", res.StructuredContent, tt.structured)
			}
			if res.IsError != tt.isError {
				t.Errorf("isError = %v, want %v", res.IsError, tt.isError)
			}
			if got := string(tt.tool.Spec().OutputSchema); got != tt.outSchema {
				t.Errorf("outputSchema = %s, want %s", got, tt.outSchema)
			}
		})
	}
}

func TestToolSpecMetadata(t *testing.T) {
	tool := MustNew("crm.query", "Queries customers.", func(context.Context, greetIn) (string, error) { return "", nil },
		Title("Query customers"), ReadOnly(), Idempotent(), Destructive(false), OpenWorld(false),
		Version("1.2.0"), Category("crm"), Tags("customers", "read"), Scopes("crm:read"), Meta("example.com/team", "sales"))
	got, err := json.Marshal(tool.Spec())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"crm.query","title":"Query customers","description":"Queries customers.",` +
		`"inputSchema":{"type":"object","properties":{"name":{"type":"string","description":"Who to greet"}},"required":["name"],"additionalProperties":false},` +
		`"annotations":{"title":"Query customers","readOnlyHint":true,"destructiveHint":false,"idempotentHint":true,"openWorldHint":false},` +
		`"_meta":{"example.com/team":"sales","toolplane.io/category":"crm","toolplane.io/scopes":["crm:read"],"toolplane.io/tags":["customers","read"],"toolplane.io/version":"1.2.0"}}`
	if string(got) != want {
		t.Errorf("spec\n got: %s\nwant: %s", got, want)
	}
	if bare := greeter(t, "bare").Spec(); bare.Annotations != nil || bare.Meta != nil || bare.Title != "" {
		t.Errorf("a tool without options has annotations or meta: %+v", bare)
	}
}

func TestInputKinds(t *testing.T) {
	t.Run("pointer to struct", func(t *testing.T) {
		tool := MustNew("p", "", func(_ context.Context, in *greetIn) (string, error) { return in.Name, nil })
		if res := call(t, tool, `{"name":"ptr"}`); res.Text() != "ptr" {
			t.Errorf("text = %q", res.Text())
		}
	})
	t.Run("map with string keys", func(t *testing.T) {
		tool := MustNew("m", "", func(_ context.Context, in map[string]int) (int, error) { return in["a"] + in["b"], nil })
		if got := string(tool.Spec().InputSchema); got != `{"type":"object","additionalProperties":{"type":"integer"}}` {
			t.Errorf("schema %s", got)
		}
		if res := call(t, tool, `{"a":"2","b":3.0}`); res.Text() != "5" {
			t.Errorf("text = %q", res.Text())
		}
	})
	for _, bad := range []struct {
		name string
		new  func() error
	}{
		{"string input", func() error {
			_, err := New("s", "", func(context.Context, string) (string, error) { return "", nil })
			return err
		}},
		{"slice input", func() error {
			_, err := NewAction("s", "", func(context.Context, []int) error { return nil })
			return err
		}},
		{"time input", func() error {
			_, err := NewAction("s", "", func(context.Context, time.Time) error { return nil })
			return err
		}},
		{"channel output", func() error {
			_, err := New("s", "", func(context.Context, greetIn) (chan int, error) { return nil, nil })
			return err
		}},
		{"nil function", func() error {
			_, err := New[greetIn, string]("s", "", nil)
			return err
		}},
	} {
		t.Run(bad.name, func(t *testing.T) {
			if err := bad.new(); !errors.Is(err, ErrInvalidSchema) {
				t.Errorf("err = %v, want ErrInvalidSchema", err)
			}
		})
	}
}
