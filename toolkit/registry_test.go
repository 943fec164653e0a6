package toolkit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/toolplane/toolplane/toolkit/spec"
)

type greetIn struct {
	Name string `json:"name" description:"Who to greet"`
}

func greeter(t testing.TB, name string) *Tool {
	t.Helper()
	return MustNew(name, "Greets someone.", func(_ context.Context, in greetIn) (string, error) {
		return "Hello, " + in.Name, nil
	})
}

func TestRegistryAddLookupRemove(t *testing.T) {
	var r Registry // the zero value is ready
	if got := r.Specs(); len(got) != 0 {
		t.Fatalf("empty registry has specs %v", got)
	}
	empty := r.Revision()
	if empty != spec.Revision(nil) {
		t.Errorf("empty revision %q, want %q", empty, spec.Revision(nil))
	}
	if err := r.Add(greeter(t, "b_tool"), greeter(t, "a_tool")); err != nil {
		t.Fatal(err)
	}
	specs := r.Specs()
	if len(specs) != 2 || specs[0].Name != "a_tool" || specs[1].Name != "b_tool" {
		t.Fatalf("specs not sorted by name: %+v", specs)
	}
	if r.Revision() != spec.Revision(specs) {
		t.Errorf("revision %q is not spec.Revision of the specs", r.Revision())
	}
	if _, ok := r.Lookup("a_tool"); !ok {
		t.Error("Lookup(a_tool) found nothing")
	}
	if _, ok := r.Lookup("nope"); ok {
		t.Error("Lookup(nope) found something")
	}
	if n := r.Remove("a_tool", "nope"); n != 1 {
		t.Errorf("Remove = %d, want 1", n)
	}
	if _, ok := r.Lookup("a_tool"); ok {
		t.Error("a_tool still registered after Remove")
	}
	if n := r.Remove("nope"); n != 0 {
		t.Errorf("Remove(nope) = %d, want 0", n)
	}
}

func TestRegistryAddRefusesAndAddsNothing(t *testing.T) {
	var r Registry
	if err := r.Add(greeter(t, "taken")); err != nil {
		t.Fatal(err)
	}
	before := r.Revision()
	tests := []struct {
		name  string
		tools []*Tool
		want  error
	}{
		{"duplicate of a registered tool", []*Tool{greeter(t, "fresh"), greeter(t, "taken")}, ErrDuplicateTool},
		{"duplicate within one call", []*Tool{greeter(t, "twice"), greeter(t, "twice")}, ErrDuplicateTool},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := r.Add(tt.tools...); !errors.Is(err, tt.want) {
				t.Fatalf("Add = %v, want %v", err, tt.want)
			}
			if r.Revision() != before || len(r.Specs()) != 1 {
				t.Errorf("a failed Add changed the registry: %v", r.Specs())
			}
		})
	}
}

func TestToolNames(t *testing.T) {
	tests := []struct {
		name     string
		valid    bool
		portable bool
	}{
		{"get_weather", true, true},
		{"get-weather2", true, true},
		{"crm.query", true, false},
		{string(make65('a')), true, false},
		{"", false, false},
		{"has space", false, false},
		{"emoji_😀", false, false},
		{"slash/name", false, false},
		{string(make129('a')), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckName(tt.name)
			if (err == nil) != tt.valid {
				t.Errorf("CheckName = %v, want valid=%v", err, tt.valid)
			}
			if err != nil && !errors.Is(err, ErrInvalidName) {
				t.Errorf("error %v does not wrap ErrInvalidName", err)
			}
			if got := PortableName(tt.name); got != tt.portable {
				t.Errorf("PortableName = %v, want %v", got, tt.portable)
			}
			_, err = New(tt.name, "", func(context.Context, greetIn) (string, error) { return "", nil })
			if (err == nil) != tt.valid {
				t.Errorf("New = %v, want valid=%v", err, tt.valid)
			}
		})
	}
}

func make65(c byte) []byte  { return bytesOf(c, 65) }
func make129(c byte) []byte { return bytesOf(c, 129) }
func bytesOf(c byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return b
}

func TestRegistryRevisionChangesIffListChanges(t *testing.T) {
	var r Registry
	r0 := r.Revision()
	if err := r.Add(greeter(t, "x")); err != nil {
		t.Fatal(err)
	}
	r1 := r.Revision()
	if r1 == r0 {
		t.Fatal("revision did not change when a tool was added")
	}
	r.Remove("x")
	if r.Revision() != r0 {
		t.Error("revision after removing the only tool differs from the empty one")
	}
	if err := r.Add(greeter(t, "x")); err != nil {
		t.Fatal(err)
	}
	if r.Revision() != r1 {
		t.Error("the same tool list gave a different revision")
	}
	r.Use(Logging(nil))
	if r.Revision() != r1 {
		t.Error("adding middleware changed the revision")
	}
}

func TestRegistrySubscribe(t *testing.T) {
	var r Registry
	var calls []string
	cancel := r.Subscribe(func() { calls = append(calls, fmt.Sprint(len(r.Specs()))) })
	_ = r.Add(greeter(t, "a"))
	_ = r.Add(greeter(t, "a")) // refused: no change, no call
	_ = r.Add(greeter(t, "b"))
	r.Remove("nope") // no change
	r.Remove("a")
	cancel()
	_ = r.Add(greeter(t, "c"))
	want := []string{"1", "2", "1"}
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Errorf("subscriber saw %v, want %v", calls, want)
	}
}

func TestRegistryCall(t *testing.T) {
	boom := errors.New("the database is down")
	failing := MustNew("failing", "", func(context.Context, greetIn) (string, error) { return "", boom })
	var r Registry
	if err := r.Add(greeter(t, "greet"), failing); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	res, err := r.Call(ctx, "greet", json.RawMessage(`{"name":"Ada"}`))
	if err != nil || res.IsError || res.Text() != "Hello, Ada" {
		t.Fatalf("Call = %+v, %v", res, err)
	}
	if _, err := r.Call(ctx, "missing", nil); !errors.Is(err, ErrToolNotFound) || err.Error() != `toolkit: tool not found: "missing"` {
		t.Errorf("unknown tool: err = %v, want ErrToolNotFound", err)
	}
	if _, err := r.Call(ctx, "greeet", nil); !errors.Is(err, ErrToolNotFound) || err.Error() != `toolkit: tool not found: "greeet" (did you mean "greet"?)` {
		t.Errorf("misspelt tool: err = %v", err)
	}
	res, err = r.Call(ctx, "failing", json.RawMessage(`{"name":"x"}`))
	if err != nil || !res.IsError || res.Text() != boom.Error() {
		t.Errorf("execution error: %+v, %v", res, err)
	}
	res, err = r.Call(ctx, "greet", json.RawMessage(`{}`))
	if err != nil || !res.IsError || res.Text() != "invalid arguments for tool \"greet\":\n- $.name: expected a string (required), received nothing" {
		t.Errorf("argument error: %+v, %v", res, err)
	}

	propagating := &Registry{PropagateErrors: true}
	if err := propagating.Add(greeter(t, "greet"), failing); err != nil {
		t.Fatal(err)
	}
	if _, err := propagating.Call(ctx, "failing", json.RawMessage(`{"name":"x"}`)); !errors.Is(err, boom) {
		t.Errorf("propagated execution error = %v, want %v", err, boom)
	}
	_, err = propagating.Call(ctx, "greet", json.RawMessage(`{}`))
	var ae *ArgumentError
	if !errors.As(err, &ae) || !errors.Is(err, ErrInvalidArguments) || errors.Is(err, boom) {
		t.Fatalf("propagated argument error = %v, want an *ArgumentError", err)
	}
	if len(ae.Problems) != 1 || ae.Problems[0].Path != "$.name" {
		t.Errorf("problems = %+v", ae.Problems)
	}
}

// TestRegistryConcurrent is meant for -race: calls run while tools come
// and go and middleware is added.
func TestRegistryConcurrent(t *testing.T) {
	var r Registry
	if err := r.Add(greeter(t, "stable")); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 50 {
				name := fmt.Sprintf("t%d_%d", i, j)
				if err := r.Add(greeter(t, name)); err != nil {
					t.Error(err)
					return
				}
				_ = r.Revision()
				r.Remove(name)
			}
		})
		wg.Go(func() {
			for range 100 {
				res, err := r.Call(context.Background(), "stable", json.RawMessage(`{"name":"x"}`))
				if err != nil || res.Text() != "Hello, x" {
					t.Errorf("Call = %+v, %v", res, err)
					return
				}
			}
		})
	}
	wg.Go(func() { r.Use(Recover(nil)) })
	wg.Wait()
	if len(r.Specs()) != 1 {
		t.Errorf("left with %d tools, want 1", len(r.Specs()))
	}
}

func TestRegistryWarnsOfNamesNotPortable(t *testing.T) {
	var logs bytes.Buffer
	r := &Registry{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	if err := r.Add(greeter(t, "portable_name"), greeter(t, "crm.query")); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if !strings.Contains(out, "tool=crm.query") || !strings.Contains(out, "not portable") {
		t.Errorf("no warning for crm.query: %s", out)
	}
	if strings.Contains(out, "portable_name") {
		t.Errorf("warned about a portable name: %s", out)
	}
}

// TestCallBuildsNothing checks that a call reuses what declaration built:
// compiling the schema, the plan or the decoder per call would cost
// thousands of allocations, binding costs about a hundred.
func TestCallBuildsNothing(t *testing.T) {
	var r Registry
	if err := r.Add(greeter(t, "g")); err != nil {
		t.Fatal(err)
	}
	tool, _ := r.Lookup("g")
	plan, validator := tool.plan, tool.validator
	args := json.RawMessage(`{"name":"Ada"}`)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := r.Call(context.Background(), "g", args); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("%.0f allocs per call", allocs)
	if allocs > 100 {
		t.Errorf("a call allocates %.0f times; is something built per call?", allocs)
	}
	if tool.plan != plan || tool.validator != validator {
		t.Error("a call replaced the tool's plan or validator")
	}
}
