package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/server"
	"github.com/toolplane/toolplane/toolkit/spec"
)

type taskIn struct {
	Q string `json:"q,omitempty"`
}

func taskTool(name string, opts ...toolkit.Option) *toolkit.Tool {
	t, err := toolkit.New(name, "A tool.", func(context.Context, taskIn) (taskIn, error) { return taskIn{}, nil }, opts...)
	if err != nil {
		panic(err)
	}
	return t
}

// An MCP server's tools keep their execution (MCP 2025-11-25 tasks),
// which the SDK's Tool does not decode, over SSE replies of a session and
// of a stateless server alike.
func TestListMCPKeepsExecution(t *testing.T) {
	reg := new(toolkit.Registry)
	for _, tl := range []*toolkit.Tool{
		taskTool("may", toolkit.TaskSupport(spec.TaskSupportOptional)),
		taskTool("must", toolkit.TaskSupport(spec.TaskSupportRequired)),
		taskTool("plain"),
	} {
		if err := reg.Add(tl); err != nil {
			t.Fatal(err)
		}
	}
	for _, sessions := range []bool{false, true} {
		t.Run(fmt.Sprint("sessions=", sessions), func(t *testing.T) {
			h := server.New(reg, &server.Options{MCPSessions: sessions})
			srv := httptest.NewServer(h)
			t.Cleanup(func() { h.Close(); srv.Close() })
			doc, err := listMCPOnce(newScraper(1, 0), mcpTarget(10, 10*time.Second), srv.URL+"/mcp", nil)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, tl := range doc.Tools {
				got[tl.Name] = "none"
				if tl.Execution != nil {
					got[tl.Name] = tl.Execution.TaskSupport
				}
			}
			if fmt.Sprint(got) != "map[may:optional must:required plain:none]" {
				t.Errorf("executions %v", got)
			}
		})
	}
}

// A taskSupport MCP does not define makes the tool Invalid, with the
// reason; MCP's default is the same as none.
func TestListMCPExecutionOfAHostileServer(t *testing.T) {
	srv := rawMCPServer(t, "2025-11-25", "h", func(w http.ResponseWriter, id json.RawMessage) {
		obj := `"inputSchema":{"type":"object"}`
		_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[`+
			`{"name":"always",%s,"execution":{"taskSupport":"always"}},`+
			`{"name":"number",%s,"execution":{"taskSupport":5}},`+
			`{"name":"forbidden",%s,"execution":{"taskSupport":"forbidden"}},`+
			`{"name":"empty",%s,"execution":{}},`+
			`{"name":"optional",%s,"execution":{"taskSupport":"optional"}}]}}`, id, obj, obj, obj, obj, obj)
	})
	doc, err := listMCPOnce(newScraper(1, 0), mcpTarget(10, 10*time.Second), srv.URL+"/mcp", nil)
	if err != nil {
		t.Fatal(err)
	}
	bounds := toolBounds{description: 100, title: 20, annotations: 30, meta: 50}
	reasons := map[string]string{}
	for _, tl := range doc.Tools {
		if err := validateTool(tl.Name, tl, v1alpha1.Limits{}, bounds); err != nil {
			reasons[tl.Name] = err.Error()
		}
		if (tl.Name == "forbidden" || tl.Name == "empty") && tl.Execution != nil {
			t.Errorf("%s: execution %+v, want MCP's default left out", tl.Name, *tl.Execution)
		}
	}
	if len(reasons) != 2 || !strings.Contains(reasons["always"], `not "always"`) || !strings.Contains(reasons["number"], `not "5"`) ||
		!strings.Contains(reasons["always"], "execution.taskSupport must be") {
		t.Errorf("reasons %v, want always and number invalid", reasons)
	}
}
