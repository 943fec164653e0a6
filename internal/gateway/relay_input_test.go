//nolint:staticcheck // MCP's logging and sampling are deprecated in 2026-07-28 and still served: relaying them is the point here.
package gateway_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/internal/gateway"
)

// askSchema is what the backends of these tests ask their users for.
var askSchema = map[string]any{"type": "object", "properties": map[string]any{"color": map[string]any{"type": "string"}}, "required": []string{"color"}}

// askingServer2025 is a 2025-era MCP server (served with sessions) whose
// tool "ask_2025" asks its client for a color with elicitation/create
// during the call, and answers with it.
func askingServer2025() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "ask-2025"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "ask_2025"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Which color?", RequestedSchema: askSchema})
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s %v", res.Action, res.Content["color"])}}}, nil, nil
	})
	return s
}

// askingServer2026 is a stateless 2026-07-28 server whose tool "ask_2026"
// answers input_required, asking for a color, and answers the retry that
// carries it; rounds counts its calls.
func askingServer2026(rounds *atomic.Int32) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "ask-2026"}, nil)
	s.AddTool(&mcp.Tool{Name: "ask_2026", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		rounds.Add(1)
		if res, ok := req.Params.InputResponses["color"].(*mcp.ElicitResult); ok && req.Params.RequestState == "asked-for-color" {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s %v", res.Action, res.Content["color"])}}}, nil
		}
		return &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{"color": &mcp.ElicitParams{Message: "Which color?", RequestedSchema: askSchema}},
			RequestState:  "asked-for-color",
		}, nil
	})
	return s
}

// TestElicitationIsBridgedAcrossEras: a backend's question reaches the
// client in the client's own era, and the client's answer the backend, for
// both eras on both sides: a 2025 backend's elicitation/create during the
// call, and a 2026-07-28 backend's input_required; a 2025 client with a
// session is asked with elicitation/create, a 2026-07-28 client gets
// input_required and retries. A client that cannot answer gets an isError
// result that says why.
func TestElicitationIsBridgedAcrossEras(t *testing.T) {
	var rounds atomic.Int32
	r := new(routes)
	r.set("ask25.apps.svc.cluster.local:8080", mcpBackend(t, askingServer2025(), false))
	r.set("ask26.apps.svc.cluster.local:8080", mcpBackend(t, askingServer2026(&rounds), true))
	tbl := table(mcpTableTools("apps", "ask25", "/mcp", "ask_2025"), mcpTableTools("apps", "ask26", "/mcp", "ask_2026"))
	// Sessions, which a 2025 client needs to be asked; a 2026-07-28 client
	// is stateless either way.
	g, url := newGateway(t, r, gateway.Options{Sessions: true})
	if err := g.SetTable(tbl); err != nil {
		t.Fatal(err)
	}
	for _, era := range eras {
		for _, tool := range []string{"ask_2025", "ask_2026"} {
			t.Run(era+"/"+tool, func(t *testing.T) {
				var asked atomic.Int32
				cs := connectWith(t, url+"/mcp", era, &mcp.ClientOptions{
					ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
						asked.Add(1)
						if req.Params.Message != "Which color?" {
							return nil, fmt.Errorf("asked %q", req.Params.Message)
						}
						return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"color": "teal"}}, nil
					},
				})
				rounds.Store(0)
				res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: tool})
				if err != nil {
					t.Fatal(err)
				}
				if res.IsError || text(res) != "accept teal" {
					t.Fatalf("result %q (isError %v)", text(res), res.IsError)
				}
				if asked.Load() != 1 {
					t.Errorf("the client was asked %d times", asked.Load())
				}
				if tool == "ask_2026" && rounds.Load() != 2 {
					t.Errorf("the 2026 backend was called %d times, want 2 (the question, the answer)", rounds.Load())
				}
			})
		}
	}
	t.Run("a client that cannot answer", func(t *testing.T) {
		for _, era := range eras {
			for _, tool := range []string{"ask_2025", "ask_2026"} {
				cs := connectWith(t, url+"/mcp", era, nil)
				res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: tool})
				if err != nil {
					t.Fatalf("%s %s: %v", era, tool, err)
				}
				t.Logf("%s %s: %s", era, tool, text(res))
				if !res.IsError || !strings.Contains(strings.ToLower(text(res)), "elicitation") {
					t.Errorf("%s %s: %q (isError %v)", era, tool, text(res), res.IsError)
				}
			}
		}
	})
}

// TestParkedCallsAreBounded: the calls that wait for a 2026-07-28 client's
// answer to a 2025 backend's question are bounded per caller (the next one
// gets an isError result at once), and a retry that names no parked call,
// or another tool's, gets an isError result that says so.
func TestParkedCallsAreBounded(t *testing.T) {
	r := new(routes)
	r.set("ask25.apps.svc.cluster.local:8080", mcpBackend(t, askingServer2025(), false))
	r.set("ask26.apps.svc.cluster.local:8080", mcpBackend(t, askingServer2026(new(atomic.Int32)), true))
	g, url := newGateway(t, r, gateway.Options{})
	if err := g.SetTable(table(mcpTableTools("apps", "ask25", "/mcp", "ask_2025"), mcpTableTools("apps", "ask26", "/mcp", "ask_2026"))); err != nil {
		t.Fatal(err)
	}
	const metaCanElicit = `"_meta":{"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}`
	call := func(name, extra string) map[string]any {
		reply := replyOf(t, postCall(t, url+"/mcp", name, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+name+`",`+extra+metaCanElicit+`}}`))
		res, _ := reply["result"].(map[string]any)
		if res == nil {
			t.Fatalf("no result: %v", reply)
		}
		return res
	}
	var state string
	for i := range 8 {
		res := call("ask_2025", "")
		if res["resultType"] != "input_required" {
			t.Fatalf("call %d: %v", i, res)
		}
		state, _ = res["requestState"].(string)
	}
	res := call("ask_2025", "")
	if res["isError"] != true || !strings.Contains(fmt.Sprint(res["content"]), "too many calls wait") {
		t.Errorf("the ninth parked call: %v", res)
	}
	// Another tool's retry does not take it, nor does a made-up state.
	for _, tc := range []struct{ name, state string }{{"ask_2026", state}, {"ask_2025", "toolplane-parked.nonesuch"}} {
		res := call(tc.name, `"requestState":"`+tc.state+`","inputResponses":{"toolplane":{"action":"accept","content":{"color":"red"}}},`)
		if res["isError"] != true || !strings.Contains(fmt.Sprint(res["content"]), "no call of this tool waits") {
			t.Errorf("%s with %s: %v", tc.name, tc.state, res)
		}
	}
	// The right retry is answered.
	res = call("ask_2025", `"requestState":"`+state+`","inputResponses":{"toolplane":{"action":"accept","content":{"color":"red"}}},`)
	if res["isError"] == true || !strings.Contains(fmt.Sprint(res["content"]), "accept red") {
		t.Errorf("the answered call: %v", res)
	}
}

// TestSamplingIsBridgedAcrossEras: a 2025 backend's sampling/createMessage
// reaches a client of either era that can sample (a 2026-07-28 one as
// input_required, answered and retried), and the answer the backend.
func TestSamplingIsBridgedAcrossEras(t *testing.T) {
	r := new(routes)
	r.set("reference.conformance.svc.cluster.local:8080", mcpBackend(t, referenceServer(), false))
	g, url := newGateway(t, r, gateway.Options{Sessions: true})
	if err := g.SetTable(table(mcpTableTools("conformance", "reference", "/mcp", "test_sampling"))); err != nil {
		t.Fatal(err)
	}
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			var prompt atomic.Value
			cs := connectWith(t, url+"/mcp", era, &mcp.ClientOptions{
				CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
					if len(req.Params.Messages) == 1 {
						if tc, ok := req.Params.Messages[0].Content.(*mcp.TextContent); ok {
							prompt.Store(tc.Text)
						}
					}
					return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "forty-two"}}, nil
				},
			})
			res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "test_sampling", Arguments: map[string]any{"prompt": "the answer?"}})
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError || text(res) != "LLM response: forty-two" {
				t.Errorf("result %q (isError %v)", text(res), res.IsError)
			}
			if prompt.Load() != "the answer?" {
				t.Errorf("the client was asked %v", prompt.Load())
			}
		})
	}
}

// TestAParkedCallEndsWhenItsClientDoesNotAnswer: a 2025 backend's call
// that waits for a 2026-07-28 client's answer ends at the park timeout,
// giving back its call slot, and a late retry is told so.
func TestAParkedCallEndsWhenItsClientDoesNotAnswer(t *testing.T) {
	defer gateway.SetParkTimeout(300 * time.Millisecond)()
	r := new(routes)
	r.set("ask25.apps.svc.cluster.local:8080", mcpBackend(t, askingServer2025(), false))
	r.set("gosteps.apps.svc.cluster.local:8080", mcpBackend(t, goStepsServer(), true))
	// One call slot, which the parked call holds.
	g, url := newGateway(t, r, gateway.Options{MaxConcurrentCalls: 1, CallTimeout: 2 * time.Second})
	if err := g.SetTable(table(mcpTableTools("apps", "ask25", "/mcp", "ask_2025"), mcpTableTools("apps", "gosteps", "/mcp", "go_steps"))); err != nil {
		t.Fatal(err)
	}
	const meta = `"_meta":{"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}`
	res, _ := replyOf(t, postCall(t, url+"/mcp", "ask_2025", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask_2025",`+meta+`}}`))["result"].(map[string]any)
	state, _ := res["requestState"].(string)
	if res["resultType"] != "input_required" || state == "" {
		t.Fatalf("first answer %v", res)
	}
	cs := connect(t, url+"/mcp", eras[0], nil, nil)
	for deadline := time.Now().Add(30 * time.Second); ; {
		res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "go_steps", Arguments: map[string]any{"steps": 1}})
		if err == nil && !res.IsError {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the parked call still holds the only call slot: %v %s", err, text(res))
		}
	}
	res, _ = replyOf(t, postCall(t, url+"/mcp", "ask_2025", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask_2025",`+
		`"requestState":"`+state+`","inputResponses":{"toolplane":{"action":"accept","content":{"color":"red"}}},`+meta+`}}`))["result"].(map[string]any)
	if res["isError"] != true || !strings.Contains(fmt.Sprint(res["content"]), "waited longer than") {
		t.Errorf("a late retry: %v", res)
	}
}

// TestSearchCallToolIsBridged: call_tool of /mcp/search relays as a call
// by name does: a 2026-07-28 client answers a 2025 backend's question
// through it.
func TestSearchCallToolIsBridged(t *testing.T) {
	r := new(routes)
	r.set("ask25.apps.svc.cluster.local:8080", mcpBackend(t, askingServer2025(), false))
	g, url := newGateway(t, r, gateway.Options{})
	if err := g.SetTable(table(mcpTableTools("apps", "ask25", "/mcp", "ask_2025"))); err != nil {
		t.Fatal(err)
	}
	cs := connectWith(t, url+"/mcp/search", "2026-07-28", &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"color": "ochre"}}, nil
		},
	})
	res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"name": "ask_2025", "arguments": map[string]any{}}})
	if err != nil || res.IsError || text(res) != "accept ochre" {
		t.Fatalf("%v %q", err, text(res))
	}
}
