package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/server"
	"github.com/toolplane/toolplane/toolkit/spec"
)

type greeting struct {
	Name string `json:"name" description:"Who to greet"`
}

func greetFn(_ context.Context, in greeting) (string, error) {
	return "Hello, " + in.Name + "!", nil
}

// A Handler serves a registry's tools over the spec endpoint, invoke and
// MCP. Here a plain HTTP client invokes a tool.
func ExampleNew() {
	reg := new(toolkit.Registry)
	tool, err := toolkit.New("greet", "Greet someone by name", greetFn)
	if err != nil {
		panic(err)
	}
	if err := reg.Add(tool); err != nil {
		panic(err)
	}

	h := server.New(reg, &server.Options{Name: "greeter"})
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()

	resp, err := http.Post(srv.URL+"/tools/greet", "application/json", strings.NewReader(`{"name":"Changlu"}`))
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var res spec.CallResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		panic(err)
	}
	fmt.Println(resp.StatusCode, res.Text())
	// Output: 200 Hello, Changlu!
}

// Any MCP client reaches the same tools at /mcp; here, the official Go SDK
// client.
func ExampleNew_mcp() {
	reg := new(toolkit.Registry)
	if err := reg.Add(toolkit.MustNew("greet", "Greet someone by name", greetFn)); err != nil {
		panic(err)
	}
	h := server.New(reg, nil)
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()

	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "example", Version: "1.0.0"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, nil)
	if err != nil {
		panic(err)
	}
	defer cs.Close()

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(tools.Tools[0].Name, "-", tools.Tools[0].Description)

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "Changlu"}})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Content[0].(*mcp.TextContent).Text)
	// Output:
	// greet - Greet someone by name
	// Hello, Changlu!
}

// AddTools puts a registry's tools on a go-sdk server of one's own, here
// served in memory beside a prompt of its own; over stdio it would be
// s.Run(ctx, &mcp.StdioTransport{}). The arguments are bound by toolkit:
// the name in another case is repaired.
func ExampleAddTools() {
	reg := new(toolkit.Registry)
	if err := reg.Add(toolkit.MustNew("greet", "Greet someone by name", greetFn)); err != nil {
		panic(err)
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "greeter", Version: "v1"}, nil)
	s.AddPrompt(&mcp.Prompt{Name: "welcome"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	})
	tools, err := server.AddTools(s, reg, nil)
	if err != nil {
		panic(err)
	}
	defer tools.Close()

	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		panic(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "v1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		panic(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "greet", Arguments: json.RawMessage(`{"NAME":"Ada"}`)})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Content[0].(*mcp.TextContent).Text)
	// Output: Hello, Ada!
}
