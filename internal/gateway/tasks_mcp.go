package gateway

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The Go SDK's Tool has no execution member and its ServerCapabilities no
// tasks: the gateway's tools/list page and its initialize (and
// server/discover) result are written with them added, by results that
// embed the SDK's and encode themselves.

// listWithExecution is a tools/list page whose tools carry their
// execution.taskSupport from the table.
type listWithExecution struct {
	*mcp.ListToolsResult
	exec map[string]string // tool name → taskSupport
}

func (r *listWithExecution) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(r.ListToolsResult)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	var tools []map[string]json.RawMessage
	if err := json.Unmarshal(m["tools"], &tools); err != nil {
		return nil, err
	}
	for _, t := range tools {
		var name string
		_ = json.Unmarshal(t["name"], &name)
		if ts, ok := r.exec[name]; ok {
			t["execution"], _ = json.Marshal(map[string]string{"taskSupport": ts})
		}
	}
	if m["tools"], err = json.Marshal(tools); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// withExecution is res with the execution of its tools that have one in
// the table, or res itself when none has.
func (g *Gateway) withExecution(res *mcp.ListToolsResult) mcp.Result {
	if res == nil {
		return res
	}
	s := g.snapshot()
	var exec map[string]string
	for _, t := range res.Tools {
		i, ok := s.byName[t.Name]
		if !ok {
			continue
		}
		if ts := taskSupport(&s.table.Tools[i]); ts != "" {
			if exec == nil {
				exec = map[string]string{}
			}
			exec[t.Name] = ts
		}
	}
	if exec == nil {
		return res
	}
	return &listWithExecution{ListToolsResult: res, exec: exec}
}

// tasksCapability is what the gateway declares of tasks: cancel, and
// task-augmented tools/call; not list (tasks.go says why).
var tasksCapability = json.RawMessage(`{"cancel":{},"requests":{"tools":{"call":{}}}}`)

// initializeWithTasks is an initialize result that declares tasks.
type initializeWithTasks struct{ *mcp.InitializeResult }

func (r *initializeWithTasks) MarshalJSON() ([]byte, error) {
	return addTasksCapability(json.Marshal(r.InitializeResult))
}

// discoverWithTasks is a server/discover result that declares tasks.
type discoverWithTasks struct{ *mcp.DiscoverResult }

func (r *discoverWithTasks) MarshalJSON() ([]byte, error) {
	return addTasksCapability(json.Marshal(r.DiscoverResult))
}

func addTasksCapability(b []byte, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	var caps map[string]json.RawMessage
	if len(m["capabilities"]) > 0 {
		if err := json.Unmarshal(m["capabilities"], &caps); err != nil {
			return nil, err
		}
	}
	if caps == nil {
		caps = map[string]json.RawMessage{}
	}
	caps["tasks"] = tasksCapability
	if m["capabilities"], err = json.Marshal(caps); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// withTasksCapability is an initialize or server/discover result res that
// declares tasks when any tool of the request's view supports them.
func (g *Gateway) withTasksCapability(req mcp.Request, res mcp.Result) mcp.Result {
	if !g.viewHasTasks(req) {
		return res
	}
	switch r := res.(type) {
	case *mcp.InitializeResult:
		return &initializeWithTasks{r}
	case *mcp.DiscoverResult:
		return &discoverWithTasks{r}
	}
	return res
}

// viewHasTasks reports whether a tool of req's view supports tasks. Under
// auth it does not ask whether the caller may call one: a capability
// says what the server can do, and the lists say what the caller may.
func (g *Gateway) viewHasTasks(req mcp.Request) bool {
	header, _ := extraOf(req)
	v := viewFrom(header)
	s := g.snapshot()
	for i := range s.table.Tools {
		if supportsTasks(&s.table.Tools[i]) && v.contains(s, i) {
			return true
		}
	}
	return false
}
