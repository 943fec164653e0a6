package toolkit_test

import (
	"context"
	"encoding/json"
	"syscall"
	"testing"
	"time"

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

// floorServer serves a raw go-sdk tool that returns a constant result, of
// the same content as the others': what the transport and the SDK cost
// with no handler work at all. A handler's own cost is its impl's time
// above this floor.
func floorServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "floor", Version: "v0"}, nil)
	out, _ := createUser(context.Background(), benchIn{Name: "Ada Lovelace", Age: 36, Address: benchAddress{City: "London"}})
	structured, _ := json.Marshal(out)
	s.AddTool(&mcp.Tool{Name: "create_user", Description: "Creates a user.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(structured)}}, StructuredContent: json.RawMessage(structured)}, nil
		})
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
// go-sdk's in-memory transport: impl=floor is a raw tool that returns a
// constant, impl=gosdk is go-sdk's typed mcp.AddTool path, impl=toolkit is
// the toolkit registry behind the same server. A handler's own cost is its
// time (and allocations) above impl=floor's in the same run. Compare with
// benchstat -col /impl.
func BenchmarkMCPCall(b *testing.B) {
	for _, impl := range []struct {
		name   string
		server func(*testing.B) *mcp.Server
	}{
		{"floor", func(*testing.B) *mcp.Server { return floorServer() }},
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
			cpu := processCPU()
			for b.Loop() {
				if _, err := cs.CallTool(ctx, params); err != nil {
					b.Fatal(err)
				}
			}
			// CPU time, the client's, the transport's and the server's: on
			// a shared machine it varies far less than wall time, which
			// counts the time other processes hold the cores.
			b.ReportMetric(float64((processCPU()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU is the user and system time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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

// readmeOrder is the README's example tool's type.
type readmeOrder struct {
	ID     string `json:"id" description:"Order id, e.g. O-5001"`
	Status string `json:"status,omitempty" tool:"enum=created|paid|shipped" default:"paid"`
}

// BenchmarkDirectCallREADME is the README's example tool, set_order_status,
// called directly with the arguments its curl example sends, well-formed.
func BenchmarkDirectCallREADME(b *testing.B) {
	reg := &toolkit.Registry{}
	if err := reg.Add(toolkit.MustNew("set_order_status", "Set an order's status",
		func(_ context.Context, in readmeOrder) (readmeOrder, error) { return in, nil },
		toolkit.Destructive(false), toolkit.Idempotent())); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	args := json.RawMessage(`{"id":"O-5001","status":"shipped"}`)
	b.ReportAllocs()
	for b.Loop() {
		res, err := reg.Call(ctx, "set_order_status", args)
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
