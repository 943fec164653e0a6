package toolkit_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/toolkit"
)

// The benchmark tool: six typed fields and one nested struct, the same Go
// types for toolkit and for the official SDK.
type benchAddress struct {
	Street string `json:"street"`
	City   string `json:"city"`
	Zip    string `json:"zip,omitempty"`
}

type benchIn struct {
	Name    string       `json:"name"`
	Email   string       `json:"email"`
	Age     int          `json:"age"`
	Score   float64      `json:"score"`
	Active  bool         `json:"active"`
	Tags    []string     `json:"tags"`
	Address benchAddress `json:"address"`
}

type benchOut struct {
	ID       int64  `json:"id"`
	Greeting string `json:"greeting"`
}

var benchArgs = json.RawMessage(`{"name":"Ada Lovelace","email":"ada@example.com","age":36,"score":99.5,"active":true,` +
	`"tags":["math","poetry"],"address":{"street":"12 St James's Square","city":"London","zip":"SW1Y"}}`)

func createUser(_ context.Context, in benchIn) (benchOut, error) {
	return benchOut{ID: int64(in.Age) * 1000, Greeting: "Hello, " + in.Name + " of " + in.Address.City}, nil
}

func benchRegistry(b *testing.B) *toolkit.Registry {
	reg := &toolkit.Registry{}
	if err := reg.Add(toolkit.MustNew("create_user", "Creates a user.", createUser)); err != nil {
		b.Fatal(err)
	}
	return reg
}

// connect serves s over go-sdk's in-memory transport and returns a client
// session to it.
func connect(b *testing.B, s *mcp.Server) *mcp.ClientSession {
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cs.Close() })
	return cs
}

// toolkitServer serves the registry's tool from a go-sdk server as a raw
// tool whose handler is Registry.Call, as the MCP transport does.
func toolkitServer(reg *toolkit.Registry) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "toolkit", Version: "v0"}, nil)
	for _, t := range reg.Specs() {
		tool := &mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}
		if t.OutputSchema != nil {
			tool.OutputSchema = t.OutputSchema
		}
		s.AddTool(tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res, err := reg.Call(ctx, req.Params.Name, req.Params.Arguments)
			if err != nil {
				return nil, err
			}
			out := &mcp.CallToolResult{IsError: res.IsError, Content: make([]mcp.Content, len(res.Content))}
			for i, c := range res.Content {
				out.Content[i] = &mcp.TextContent{Text: c.Text}
			}
			if res.StructuredContent != nil {
				out.StructuredContent = res.StructuredContent
			}
			return out, nil
		})
	}
	return s
}

func sdkServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "sdk", Version: "v0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "create_user", Description: "Creates a user."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in benchIn) (*mcp.CallToolResult, benchOut, error) {
			out, err := createUser(ctx, in)
			return nil, out, err
		})
	return s
}

// BenchmarkMCPCall calls the same tool with the same arguments through
// go-sdk's in-memory transport: impl=gosdk is go-sdk's typed mcp.AddTool
// path, impl=toolkit is the toolkit registry behind the same server. Compare
// with benchstat -col /impl.
func BenchmarkMCPCall(b *testing.B) {
	for _, impl := range []struct {
		name   string
		server func(*testing.B) *mcp.Server
	}{
		{"gosdk", func(*testing.B) *mcp.Server { return sdkServer() }},
		{"toolkit", func(b *testing.B) *mcp.Server { return toolkitServer(benchRegistry(b)) }},
	} {
		b.Run("impl="+impl.name, func(b *testing.B) {
			cs := connect(b, impl.server(b))
			ctx := context.Background()
			params := &mcp.CallToolParams{Name: "create_user", Arguments: benchArgs}
			res, err := cs.CallTool(ctx, params)
			if err != nil || res.IsError {
				b.Fatalf("CallTool = %+v, %v", res, err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := cs.CallTool(ctx, params); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDirectCall is toolkit's own call path, without a transport:
// what the HTTP invoke handler adds its I/O to.
func BenchmarkDirectCall(b *testing.B) {
	reg := benchRegistry(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := reg.Call(ctx, "create_user", benchArgs)
		if err != nil || res.IsError {
			b.Fatalf("Call = %+v, %v", res, err)
		}
	}
}

// BenchmarkDirectCallRepaired is the direct call path with arguments that
// need repair: numbers as strings, a double-encoded array, a trailing
// comma.
func BenchmarkDirectCallRepaired(b *testing.B) {
	reg := benchRegistry(b)
	ctx := context.Background()
	args := json.RawMessage(`{"name":"Ada Lovelace","email":"ada@example.com","age":"36","score":"99.5","active":"true",` +
		`"tags":"[\"math\",\"poetry\"]","address":{"street":"12 St James's Square","city":"London","zip":"SW1Y"},}`)
	b.ReportAllocs()
	for b.Loop() {
		res, err := reg.Call(ctx, "create_user", args)
		if err != nil || res.IsError {
			b.Fatalf("Call = %+v, %v", res, err)
		}
	}
}

// BenchmarkCallHugeNumbers is a call whose integer array holds 200 numbers
// written 1e999999 (1.8 KB), against the same array of ordinary numbers,
// in the same run: the huge ones are refused before repair and validation
// parse them, so both answer in the same order of time (before, the huge
// body took some 8 s of CPU in big.Rat).
//
//	go test ./ -run '^$' -bench BenchmarkCallHugeNumbers -benchmem
func BenchmarkCallHugeNumbers(b *testing.B) {
	type in struct {
		IDs []int64 `json:"ids"`
	}
	reg := &toolkit.Registry{}
	if err := reg.Add(toolkit.MustNew("sum", "Adds ids.", func(_ context.Context, in in) (int64, error) {
		var n int64
		for _, id := range in.IDs {
			n += id
		}
		return n, nil
	})); err != nil {
		b.Fatal(err)
	}
	body := func(n string) json.RawMessage {
		s := `{"ids":[` + n
		for range 199 {
			s += "," + n
		}
		return json.RawMessage(s + "]}")
	}
	for _, c := range []struct {
		name, number string
		isError      bool
	}{{"ordinary", "1234567", false}, {"huge-exponent", "1e999999", true}, {"huge-exponent-string", `"1e999999"`, true}} {
		args := body(c.number)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res, err := reg.Call(context.Background(), "sum", args)
				if err != nil || res.IsError != c.isError {
					b.Fatalf("Call = %+v, %v", res, err)
				}
			}
		})
	}
}
