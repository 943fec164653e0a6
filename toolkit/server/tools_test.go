package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/server"
	"github.com/toolplane/toolplane/toolkit/spec"
)

type askIn struct {
	Question string `json:"question"`
	Count    int    `json:"count,omitempty" default:"1"`
}

type askOut struct {
	Answer     string `json:"answer"`
	Count      int    `json:"count"`
	CanElicit  bool   `json:"canElicit"`
	Elicited   string `json:"elicited,omitempty"`
	Middleware bool   `json:"middleware"`
}

type mwKey struct{}

// ownedServer is a go-sdk server its user owns, with a prompt and a
// resource of its own, and a registry's tools added to it.
func ownedServer(t *testing.T, reg *toolkit.Registry) (*mcp.Server, *server.Tools) {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "owned", Version: "v1"}, nil)
	s.AddPrompt(&mcp.Prompt{Name: "greet"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}}, nil
	})
	s.AddResource(&mcp.Resource{URI: "file:///readme", Name: "readme"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "file:///readme", Text: "read me"}}}, nil
	})
	tools, err := server.AddTools(s, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tools.Close() })
	return s, tools
}

func askRegistry(t *testing.T) *toolkit.Registry {
	t.Helper()
	reg := new(toolkit.Registry)
	reg.Use(func(next toolkit.CallHandler) toolkit.CallHandler {
		return func(ctx context.Context, req *toolkit.Request) (*spec.CallResult, error) {
			return next(context.WithValue(ctx, mwKey{}, true), req)
		}
	})
	if err := reg.Add(toolkit.MustNew("ask", "Asks", func(ctx context.Context, in askIn) (askOut, error) {
		out := askOut{Answer: "re: " + in.Question, Count: in.Count, Middleware: ctx.Value(mwKey{}) == true}
		toolkit.Progress(ctx, 1, 2, "halfway")
		req, ok := server.CallToolRequest(ctx)
		if !ok {
			return out, errors.New("no MCP request in the context")
		}
		caps := req.ClientCapabilities()
		out.CanElicit = caps != nil && caps.Elicitation != nil
		res, err := server.Elicit(ctx, &mcp.ElicitParams{Message: "Which one?", RequestedSchema: map[string]any{
			"type": "object", "properties": map[string]any{"pick": map[string]any{"type": "string"}}}})
		switch {
		case errors.Is(err, server.ErrElicitationUnsupported):
		case err != nil:
			return out, err
		default:
			out.Elicited, _ = res.Content["pick"].(string)
		}
		return out, nil
	})); err != nil {
		t.Fatal(err)
	}
	return reg
}

// inMemory connects a client to s; elicit, if set, answers elicitation.
func inMemory(t *testing.T, s *mcp.Server, opts *mcp.ClientOptions, version ...string) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	var so *mcp.ClientSessionOptions
	if len(version) > 0 {
		so = &mcp.ClientSessionOptions{ProtocolVersion: version[0]}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "v0"}, opts).Connect(context.Background(), ct, so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestAddToolsServesARegistryOnAServerItsUserOwns: binding, middleware,
// progress and structured results as on the Handler, beside the server's
// own prompt and resource, with the request and elicitation in reach.
func TestAddToolsServesARegistryOnAServerItsUserOwns(t *testing.T) {
	reg := askRegistry(t)
	s, tools := ownedServer(t, reg)
	elicit := func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"pick": "blue"}}, nil
	}
	for _, tc := range []struct {
		name      string
		opts      *mcp.ClientOptions
		version   string
		canElicit bool
		elicits   string
		runs      int // the tool's runs, each reporting progress once
	}{
		{"a 2025 client that elicits", &mcp.ClientOptions{ElicitationHandler: elicit}, "2025-11-25", true, "blue", 1},
		{"a 2025 client that does not", &mcp.ClientOptions{}, "2025-11-25", false, "", 1},
		// In 2026-07-28 the question is the call's input_required result,
		// and the SDK's client calls again with the answer.
		{"a 2026 client, asked with input_required", &mcp.ClientOptions{ElicitationHandler: elicit}, "2026-07-28", true, "blue", 2},
		{"a 2026 client that does not elicit", &mcp.ClientOptions{}, "2026-07-28", false, "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var progress []string
			tc.opts.ProgressNotificationHandler = func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
				mu.Lock()
				progress = append(progress, r.Params.Message)
				mu.Unlock()
			}
			cs := inMemory(t, s, tc.opts, tc.version)
			ctx := bounded(t)
			if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet"}); err != nil {
				t.Errorf("the server's own prompt: %v", err)
			}
			if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///readme"}); err != nil {
				t.Errorf("the server's own resource: %v", err)
			}
			params := &mcp.CallToolParams{Name: "ask", Arguments: json.RawMessage(`{"QUESTION":"why?","count":"2"}`)}
			params.SetProgressToken("p1")
			res, err := cs.CallTool(ctx, params)
			if err != nil || res.IsError {
				text := ""
				if res != nil && len(res.Content) > 0 {
					text = res.Content[0].(*mcp.TextContent).Text
				}
				t.Fatalf("CallTool = %s, %v", text, err)
			}
			var out askOut
			b, _ := json.Marshal(res.StructuredContent)
			if err := json.Unmarshal(b, &out); err != nil {
				t.Fatal(err)
			}
			want := askOut{Answer: "re: why?", Count: 2, CanElicit: tc.canElicit, Elicited: tc.elicits, Middleware: true}
			if out != want {
				t.Errorf("result %+v, want %+v", out, want)
			}
			// The client's SDK hands notifications to their handler on a
			// goroutine of their own, so the result can overtake them.
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				mu.Lock()
				n := len(progress)
				mu.Unlock()
				if n >= tc.runs {
					break
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(progress) != tc.runs || progress[0] != "halfway" {
				t.Errorf("progress %q", progress)
			}
		})
	}

	// It follows the registry, and Close takes its tools away.
	cs := inMemory(t, s, nil)
	if err := reg.Add(toolkit.MustNewAction("later", "", func(context.Context, struct{}) error { return nil })); err != nil {
		t.Fatal(err)
	}
	if names := toolNames(t, cs); strings.Join(names, ",") != "ask,later" {
		t.Errorf("tools after Add: %v", names)
	}
	_, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "aks"})
	if err == nil || !strings.Contains(err.Error(), `(did you mean "ask"?)`) {
		t.Errorf("an unknown tool: %v", err)
	}
	tools.Close()
	if names := toolNames(t, cs); len(names) != 0 {
		t.Errorf("tools after Close: %v", names)
	}
}

func TestNewHandlerReturnsErrors(t *testing.T) {
	for _, o := range []*server.Options{{MaxBodyBytes: -1}, {SessionTimeout: -1}, {SpecPath: "tools"}} {
		if _, err := server.NewHandler(new(toolkit.Registry), o); !errors.Is(err, server.ErrInvalidOptions) {
			t.Errorf("NewHandler(%+v) = %v", o, err)
		}
	}
	if _, err := server.NewHandler(nil, nil); !errors.Is(err, server.ErrInvalidOptions) {
		t.Errorf("NewHandler(nil) = %v", err)
	}
}

// TestShutdownEndsStreamsWithoutClose: a Handler whose owner forgot to
// register Close still lets http.Server.Shutdown return.
func TestShutdownEndsStreamsWithoutClose(t *testing.T) {
	h := server.New(testRegistry(t), &server.Options{MCPSessions: true})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	streams := make(chan struct{}, 1)
	srv := &http.Server{Handler: observeStreams(streams, h)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	url := "http://" + ln.Addr().String()
	connect(t, url, "2026-07-28", make(chan struct{}, 1))
	waitFor(t, streams, "subscriptions/listen to open")
	connect(t, url, "2025-11-25", make(chan struct{}, 1))
	waitFor(t, streams, "the standalone SSE stream to open")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
}

func TestInvokeSuggestsTheToolMeant(t *testing.T) {
	ts := newTestServer(t, nil)
	resp, err := http.Post(ts.URL+"/tools/gret", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), `(did you mean \"greet\"?)`) {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
}
