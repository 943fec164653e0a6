package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	googleschema "github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	santhosh "github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolplane/toolplane/toolkit/spec"
)

var allTools = []string{
	"add", "build_report", "create_ticket", "delete_ticket", "evaluate_transaction_risk", "get_weather",
	"query_customer", "search_orders", "system_insight", "typed_echo", "whoami",
}

// syncBuffer collects the logs that run writes from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type instance struct {
	url  string
	logs *syncBuffer
	stop func() error // cancels run's context and returns what run returned
}

// start runs the command as main does, on a loopback port.
func start(t *testing.T, args ...string) *instance {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &syncBuffer{}
	addrs := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"--addr", "127.0.0.1:0"}, args...), logs, func(a net.Addr) { addrs <- a })
	}()
	var stopped bool
	var runErr error
	stop := func() error {
		if !stopped {
			stopped = true
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("run did not return within 30s of cancellation")
			}
		}
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	select {
	case a := <-addrs:
		return &instance{url: "http://" + a.String(), logs: logs, stop: stop}
	case err := <-done:
		t.Fatalf("run: %v\n%s", err, logs)
	case <-time.After(10 * time.Second):
		t.Fatal("not listening within 10s")
	}
	return nil
}

func (in *instance) document(t *testing.T) spec.Document {
	t.Helper()
	resp, err := http.Get(in.url + spec.DefaultPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc spec.Document
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func (in *instance) invoke(t *testing.T, tool, args string) (int, spec.CallResult) {
	t.Helper()
	resp, err := http.Post(in.url+spec.InvokePrefix+tool, "application/json", strings.NewReader(args))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var res spec.CallResult
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
	}
	return resp.StatusCode, res
}

func names(doc spec.Document) []string {
	var n []string
	for _, t := range doc.Tools {
		n = append(n, t.Name)
	}
	return n
}

func TestServesEveryTool(t *testing.T) {
	in := start(t)
	doc := in.document(t)
	if got := names(doc); !slices.Equal(got, allTools) {
		t.Fatalf("tools %v, want %v", got, allTools)
	}
	if doc.Server.Name != "example-tools" {
		t.Errorf("server %+v", doc.Server)
	}
	byName := map[string]spec.Tool{}
	for _, tool := range doc.Tools {
		byName[tool.Name] = tool
	}
	// The argument names the issue fixes.
	for tool, args := range map[string][]string{
		"typed_echo":                {"text", "count", "big", "unsigned", "small", "ratio", "flag", "status", "tags", "scores", "labels", "address", "when", "payload"},
		"query_customer":            {"name", "limit"},
		"get_weather":               {"city"},
		"evaluate_transaction_risk": {"amount", "customerRiskScore", "transactionType"},
		"search_orders":             {"status", "tags"},
		"create_ticket":             {"title", "priority"},
		"delete_ticket":             {"id"},
		"add":                       {"a", "b"},
		"system_insight":            {"category"},
		"whoami":                    {},
		"build_report":              {"sections", "delayMs"},
	} {
		var s struct {
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if err := json.Unmarshal(byName[tool].InputSchema, &s); err != nil {
			t.Fatal(err)
		}
		for _, a := range args {
			if _, ok := s.Properties[a]; !ok {
				t.Errorf("%s has no argument %q: %s", tool, a, byName[tool].InputSchema)
			}
		}
		if len(s.Properties) != len(args) {
			t.Errorf("%s arguments %v, want %v", tool, s.Properties, args)
		}
		if tool == "typed_echo" && !slices.Equal(s.Required, []string{"text"}) {
			t.Errorf("typed_echo requires %v, want only text", s.Required)
		}
		if tool == "typed_echo" {
			// A *time.Time is a date-time, as a time.Time is: a model is
			// told the format rather than offered any value; being a
			// pointer, it may be null.
			want := `{"type":["string","null"],"description":"An RFC 3339 date-time","format":"date-time"}`
			if got := string(s.Properties["when"]); got != want {
				t.Errorf("typed_echo when schema\n got: %s\nwant: %s", got, want)
			}
		}
	}
	if a := byName["create_ticket"].Annotations; a == nil || a.DestructiveHint == nil || !*a.DestructiveHint {
		t.Errorf("create_ticket annotations %+v, want destructive", a)
	}
	if a := byName["search_orders"].Annotations; a == nil || a.ReadOnlyHint == nil || !*a.ReadOnlyHint {
		t.Errorf("search_orders annotations %+v, want read-only", a)
	}
}

// TestSchemasAreValid checks every input and output schema with two
// validators that did not produce it: the JSON Schema 2020-12 metaschema,
// and google/jsonschema-go, which must resolve it.
func TestSchemasAreValid(t *testing.T) {
	in := start(t)
	meta, err := santhosh.NewCompiler().Compile("https://json-schema.org/draft/2020-12/schema")
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range in.document(t).Tools {
		for kind, raw := range map[string]json.RawMessage{"input": tool.InputSchema, "output": tool.OutputSchema} {
			if len(raw) == 0 {
				if kind == "input" {
					t.Errorf("%s has no %s schema", tool.Name, kind)
				}
				continue
			}
			inst, err := santhosh.UnmarshalJSON(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			if err := meta.Validate(inst); err != nil {
				t.Errorf("%s %s schema is not valid 2020-12: %v\n%s", tool.Name, kind, err, raw)
			}
			var gs googleschema.Schema
			if err := json.Unmarshal(raw, &gs); err != nil {
				t.Errorf("%s %s schema: %v", tool.Name, kind, err)
				continue
			}
			if _, err := gs.Resolve(&googleschema.ResolveOptions{ValidateDefaults: true}); err != nil {
				t.Errorf("%s %s schema does not resolve: %v\n%s", tool.Name, kind, err, raw)
			}
		}
	}
}

// calls are sloppy arguments, as a small model sends them, and what each
// tool must make of them.
var calls = []struct {
	tool, args string
	want       string // a fragment of the result's text
}{
	{"typed_echo", `{"text":"hi","count":"2","big":"9223372036854775807","unsigned":"18446744073709551615","small":"-128",` +
		`"ratio":"0.5","flag":"true","status":"PAID","tags":"[\"a\",\"b\"]","scores":["1",2],"labels":{"k":"v"},` +
		`"address":"{\"city\":\"Xi'an\"}","when":"2026-07-28T12:00:00Z","payload":"aGk=",}`,
		`{"text":"hi","count":2,"big":9223372036854775807,"unsigned":18446744073709551615,"small":-128,"ratio":0.5,"flag":true,"status":"paid","tags":["a","b"],"scores":[1,2],"labels":{"k":"v"},"address":{"city":"Xi'an"},"when":"2026-07-28T12:00:00Z","payload":"aGk="}`},
	{"query_customer", `{"name":"changlu","limit":"5"}`, `"name":"Changlu"`},
	{"get_weather", `{"city":"北京市"}`, `"temperature":"25 degrees Celsius"`},
	{"get_weather", `"{\"city\":\"Xi'an\"}"`, `"city":"西安"`},
	{"evaluate_transaction_risk", `{"amount":"15000.00","customerRiskScore":"70","transactionType":"INTERNATIONAL"}`,
		`{"riskScore":8.6,"riskLevel":"LOW","manualReviewRequired":true,"recommendation":"Proceed with standard monitoring"}`},
	{"evaluate_transaction_risk", `{"amount":190000,"customerRiskScore":0,"transactionType":"wire_transfer"}`, `"riskLevel":"HIGH"`},
	{"search_orders", `{"status":"Paid","tags":"[\"gift\"]"}`, `"id":"O-5001"`},
	{"create_ticket", `{"title":"Printer on fire","priority":"HIGH"}`, `"priority":"high"`},
	{"add", `{"a":"9007199254740993","b":1}`, `9007199254740994`},
	{"system_insight", `{"category":"Tools"}`, `"count":11`},
	{"build_report", `{"sections":"2","delayMs":"1"}`, `"sections":["Section 1","Section 2"]`},
	{"system_insight", `{"category":"version"}`, `"goVersion":"go`},
	// Without --caller-jwks-url every call is anonymous.
	{"whoami", `{}`, `{"subject":"","groups":[]}`},
}

func TestToolsRepairSloppyArguments(t *testing.T) {
	in := start(t)
	for _, c := range calls {
		status, res := in.invoke(t, c.tool, c.args)
		if status != http.StatusOK || res.IsError || !strings.Contains(res.Text(), c.want) {
			t.Errorf("%s %s: %d %+v\nwant text containing %s", c.tool, c.args, status, res, c.want)
		}
	}
}

func TestToolErrorsAreResults(t *testing.T) {
	in := start(t)
	for _, c := range []struct{ tool, args, want string }{
		{"get_weather", `{"city":"Paris"}`, "北京 (Beijing)"},
		{"evaluate_transaction_risk", `{"amount":"12abc","customerRiskScore":50,"transactionType":"other"}`, "amount"},
		{"evaluate_transaction_risk", `{"amount":1,"customerRiskScore":101,"transactionType":"other"}`, "customerRiskScore"},
		{"query_customer", `{"name":"x","limit":0}`, "limit"},
		{"add", `{"a":9223372036854775807,"b":1}`, "64-bit"},
		{"typed_echo", `{"text":"x","small":128}`, "small"},
	} {
		status, res := in.invoke(t, c.tool, c.args)
		if status != http.StatusOK || !res.IsError || !strings.Contains(res.Text(), c.want) {
			t.Errorf("%s %s: %d %+v, want an error result mentioning %q", c.tool, c.args, status, res, c.want)
		}
	}
}

func TestMCPServesTheSameTools(t *testing.T) {
	in := start(t)
	doc := in.document(t)
	for _, v := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(v, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: in.url + spec.MCPPath, MaxRetries: -1},
				&mcp.ClientSessionOptions{ProtocolVersion: v})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			var listed []string
			for tool, err := range cs.Tools(ctx, nil) {
				if err != nil {
					t.Fatal(err)
				}
				listed = append(listed, tool.Name)
			}
			if !slices.Equal(listed, names(doc)) {
				t.Errorf("tools/list %v, spec document %v", listed, names(doc))
			}
			for _, c := range calls {
				if !json.Valid([]byte(c.args)) {
					// MCP carries arguments inside a JSON-RPC message, so
					// a trailing comma cannot reach the server that way.
					continue
				}
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: json.RawMessage(c.args)})
				if err != nil || res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, c.want) {
					t.Errorf("%s %s over MCP: %v %+v", c.tool, c.args, err, res)
				}
			}
		})
	}
}

func TestOnly(t *testing.T) {
	in := start(t, "--only", "get_weather, add,get_weather", "--name", "weather-tools")
	doc := in.document(t)
	if got := names(doc); !slices.Equal(got, []string{"add", "get_weather"}) {
		t.Errorf("--only served %v", got)
	}
	if doc.Server.Name != "weather-tools" {
		t.Errorf("--name: %+v", doc.Server)
	}
	if status, _ := in.invoke(t, "typed_echo", `{"text":"x"}`); status != http.StatusNotFound {
		t.Errorf("a tool left out by --only: %d", status)
	}
}

func TestBadFlagsFailAtStart(t *testing.T) {
	for _, args := range [][]string{
		{"--only", "get_weather,nope"},
		{"--bogus"},
		{"extra"},
		{"--caller-jwks-url", "http://127.0.0.1:1/jwks.json"},
		{"--caller-audience", "crm/crm-tools"},
		{"--caller-jwks-url", "http://127.0.0.1:1/jwks.json", "--caller-audience", "crm-tools"},
	} {
		var logs syncBuffer
		err := run(context.Background(), append([]string{"--addr", "127.0.0.1:0"}, args...), &logs, func(net.Addr) {
			t.Errorf("%v: started", args)
		})
		if err == nil {
			t.Errorf("%v: no error", args)
		}
	}
	err := run(context.Background(), []string{"--only", "nope"}, io.Discard, nil)
	if err == nil || !strings.Contains(err.Error(), `"nope"`) || !strings.Contains(err.Error(), "get_weather") {
		t.Errorf("unknown --only name: %v", err)
	}
}

func TestGracefulShutdown(t *testing.T) {
	in := start(t)
	// An MCP client that listens for list changes holds a stream open;
	// shutdown must end it rather than wait for it.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {},
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: in.url + spec.MCPPath, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	if err := in.stop(); err != nil {
		t.Fatalf("run returned %v\n%s", err, in.logs)
	}
	logs := in.logs.String()
	for _, want := range []string{`"msg":"Serving tools"`, `"msg":"Shutting down"`, `"msg":"Stopped"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %s:\n%s", want, logs)
		}
	}
	// Every line is a JSON object.
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("log line is not JSON: %s", line)
		}
	}
}
