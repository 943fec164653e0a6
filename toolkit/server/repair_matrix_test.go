package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/internal/bindcases"
	"github.com/toolplane/toolplane/toolkit/server"
)

// matrixServer serves the tool of the binder's case table. Its body limit
// is above toolkit.MaxArgumentBytes, so that the registry's own limit is
// what a too-large case meets.
func matrixServer(t *testing.T) *testServer {
	t.Helper()
	reg := new(toolkit.Registry)
	if err := reg.Add(must(toolkit.New("bind", "Returns what it bound",
		func(_ context.Context, in bindcases.In) (bindcases.In, error) { return in, nil }))); err != nil {
		t.Fatal(err)
	}
	h := server.New(reg, &server.Options{MaxBodyBytes: 2 * toolkit.MaxArgumentBytes})
	srv := httptest.NewServer(h)
	t.Cleanup(func() { h.Close(); srv.Close() })
	return &testServer{Server: srv, reg: reg, h: h}
}

// TestInvokeRepairMatrix runs the binder's table of repairs and refusals
// through POST /tools/{name}; the toolkit package runs it through
// Registry.Call.
func TestInvokeRepairMatrix(t *testing.T) {
	s := matrixServer(t)
	for _, c := range bindcases.Repairs {
		t.Run("repair/"+c.Name, func(t *testing.T) {
			res := s.invoke(t, "bind", c.Args)
			want, _ := json.Marshal(c.Want)
			if res.IsError || string(res.StructuredContent) != string(want) {
				t.Errorf("bound\n got: %s %s\nwant: %s", res.StructuredContent, res.Text(), want)
			}
		})
	}
	for _, c := range bindcases.Refusals {
		t.Run("refusal/"+c.Name, func(t *testing.T) {
			resp, body := s.do(t, http.MethodPost, "/tools/bind", c.Args)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %.200s", resp.StatusCode, body)
			}
			var res struct {
				Content []struct{ Text string } `json:"content"`
				IsError bool                    `json:"isError"`
			}
			if err := json.Unmarshal(body, &res); err != nil || len(res.Content) != 1 {
				t.Fatalf("%v: %.200s", err, body)
			}
			text := res.Content[0].Text
			if !res.IsError || !strings.Contains(text, "\n- "+c.Path+": expected ") || !strings.Contains(text, c.Reason) {
				t.Errorf("error does not name %s and say %q:\n%s", c.Path, c.Reason, text)
			}
		})
	}
}
