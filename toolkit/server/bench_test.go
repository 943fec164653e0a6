package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// BenchmarkCall calls the same tool with the same arguments over loopback
// HTTP, in the same run: through the invoke endpoint, and through /mcp
// tools/call with the official Go SDK client at each protocol era.
//
//	go test ./server -run '^$' -bench Call -count 10 | tee bench.txt
//	benchstat -col /transport bench.txt
func BenchmarkCall(b *testing.B) {
	s := newTestServer(b, nil)
	const args = `{"text":"ab","count":"2","status":"PAID","tags":["a","b"]}`

	b.Run("transport=invoke", func(b *testing.B) {
		b.ReportAllocs()
		client := s.Client()
		for b.Loop() {
			req, _ := http.NewRequest(http.MethodPost, s.URL+spec.InvokePrefix+"echo", strings.NewReader(args))
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			var res spec.CallResult
			err = json.NewDecoder(resp.Body).Decode(&res)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil || res.IsError {
				b.Fatalf("%v %+v", err, res)
			}
		}
	})
	for _, v := range protocolVersions {
		b.Run("transport=mcp-"+v, func(b *testing.B) {
			b.ReportAllocs()
			cs := connect(b, s.URL, v, nil)
			for b.Loop() {
				res, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(args)})
				if err != nil || res.IsError {
					b.Fatalf("%v %+v", err, res)
				}
			}
		})
	}
}

// BenchmarkCallWithTasks is an ordinary tools/call over /mcp (2025-11-25)
// in the same run: before and after the registry gains a tool with task
// support, which puts the tasks front (a read and a decode of each message
// before the SDK's) in the path.
//
//	go test ./server -run '^$' -bench CallWithTasks -count 10 | tee bench.txt
//	benchstat -col /tasks bench.txt
func BenchmarkCallWithTasks(b *testing.B) {
	s := newTestServer(b, nil)
	const args = `{"text":"ab","count":"2","status":"PAID","tags":["a","b"]}`
	for _, on := range []bool{false, true} {
		name := "tasks=off"
		if on {
			name = "tasks=on"
			if err := s.reg.Add(waitTool("wait", spec.TaskSupportOptional)); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			cs := connect(b, s.URL, "2025-11-25", nil)
			for b.Loop() {
				res, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(args)})
				if err != nil || res.IsError {
					b.Fatalf("%v %+v", err, res)
				}
			}
		})
	}
}
