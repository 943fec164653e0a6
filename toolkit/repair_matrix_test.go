package toolkit_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/internal/bindcases"
)

func matrixRegistry(t *testing.T) *toolkit.Registry {
	t.Helper()
	reg := new(toolkit.Registry)
	if err := reg.Add(toolkit.MustNew("bind", "Returns what it bound",
		func(_ context.Context, in bindcases.In) (bindcases.In, error) { return in, nil })); err != nil {
		t.Fatal(err)
	}
	return reg
}

// TestRepairMatrix calls through Registry.Call; the server package runs
// the same table through the invoke endpoint.
func TestRepairMatrix(t *testing.T) {
	reg := matrixRegistry(t)
	for _, c := range bindcases.Repairs {
		t.Run(c.Name, func(t *testing.T) {
			res, err := reg.Call(context.Background(), "bind", json.RawMessage(c.Args))
			if err != nil || res.IsError {
				t.Fatalf("Call = %+v, %v", res, err)
			}
			want, _ := json.Marshal(c.Want)
			if string(res.StructuredContent) != string(want) {
				t.Errorf("bound\n got: %s\nwant: %s", res.StructuredContent, want)
			}
		})
	}
}

func TestRefusalMatrix(t *testing.T) {
	reg := matrixRegistry(t)
	for _, c := range bindcases.Refusals {
		t.Run(c.Name, func(t *testing.T) {
			res, err := reg.Call(context.Background(), "bind", json.RawMessage(c.Args))
			if err != nil || !res.IsError {
				t.Fatalf("Call = %+v, %v", res, err)
			}
			text := res.Text()
			if !strings.Contains(text, "\n- "+c.Path+": expected ") || !strings.Contains(text, c.Reason) {
				t.Errorf("error does not name %s and say %q:\n%s", c.Path, c.Reason, text)
			}
		})
	}
}
