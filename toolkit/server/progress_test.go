package server_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/server"
	"github.com/toolplane/toolplane/toolkit/spec"
)

var png = []byte("\x89PNG\r\n\x1a\n-not-really")

// richTool reports progress and log messages, and returns one block of
// every type.
func richTool() *toolkit.Tool {
	return must(toolkit.New("render", "Render a chart", func(ctx context.Context, _ struct{}) (*spec.CallResult, error) {
		for i := 1; i <= 3; i++ {
			toolkit.Progress(ctx, float64(i), 3, "step "+string(rune('0'+i)))
		}
		toolkit.Progress(ctx, 2, 3, "going back is dropped")
		toolkit.Log(ctx, slog.LevelDebug, "below the level: dropped")
		toolkit.Log(ctx, slog.LevelWarn, "the cache was cold")
		return &spec.CallResult{Content: []spec.Content{
			toolkit.Text("the chart"),
			toolkit.Image(png, "image/png"),
			toolkit.Audio([]byte("RIFF"), "audio/wav"),
			toolkit.Resource("file:///chart.csv", "text/csv", "a,b\n1,2\n", nil),
		}}, nil
	}))
}

func richServer(t *testing.T) *testServer {
	t.Helper()
	reg := new(toolkit.Registry)
	if err := reg.Add(richTool()); err != nil {
		t.Fatal(err)
	}
	h := server.New(reg, &server.Options{MCPSessions: true})
	srv := httptest.NewServer(h)
	t.Cleanup(func() { h.Close(); srv.Close() })
	return &testServer{Server: srv, reg: reg, h: h}
}

func TestProgressAndLogsReachAnMCPClient(t *testing.T) {
	s := richServer(t)
	for _, version := range protocolVersions {
		t.Run(version, func(t *testing.T) {
			var mu sync.Mutex
			var progress []string
			var logs []string
			client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1.0.0"}, &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
					mu.Lock()
					defer mu.Unlock()
					progress = append(progress, r.Params.Message)
				},
				LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) { //nolint:staticcheck // logging is deprecated in 2026-07-28, and still served
					mu.Lock()
					defer mu.Unlock()
					logs = append(logs, string(r.Params.Level)+" "+r.Params.Logger+": "+r.Params.Data.(string))
				},
			})
			cs, err := client.Connect(bounded(t), &mcp.StreamableClientTransport{Endpoint: s.URL + spec.MCPPath, MaxRetries: -1},
				&mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
			params := &mcp.CallToolParams{Name: "render", Arguments: map[string]any{}}
			params.SetProgressToken("p-1")
			if version >= "2026" {
				params.Meta[mcp.MetaKeyLogLevel] = "info" //nolint:staticcheck // logging is deprecated in 2026-07-28, and still served
			} else if err := cs.SetLoggingLevel(bounded(t), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil { //nolint:staticcheck // logging is deprecated in 2026-07-28, and still served
				t.Fatal(err)
			}
			res, err := cs.CallTool(bounded(t), params)
			if err != nil || res.IsError {
				t.Fatalf("CallTool = %+v, %v", res, err)
			}
			// Notifications of the call come before its result on its stream.
			deadline := time.Now().Add(10 * time.Second)
			for {
				mu.Lock()
				n, m := len(progress), len(logs)
				mu.Unlock()
				if n >= 3 && m >= 1 || time.Now().After(deadline) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			mu.Lock()
			defer mu.Unlock()
			if strings.Join(progress, ",") != "step 1,step 2,step 3" {
				t.Errorf("progress %q", progress)
			}
			if strings.Join(logs, ",") != "warning render: the cache was cold" {
				t.Errorf("logs %q", logs)
			}
			if len(res.Content) != 4 {
				t.Fatalf("content %+v", res.Content)
			}
			if c, ok := res.Content[1].(*mcp.ImageContent); !ok || string(c.Data) != string(png) || c.MIMEType != "image/png" {
				t.Errorf("image block %#v", res.Content[1])
			}
			if c, ok := res.Content[2].(*mcp.AudioContent); !ok || string(c.Data) != "RIFF" || c.MIMEType != "audio/wav" {
				t.Errorf("audio block %#v", res.Content[2])
			}
			if c, ok := res.Content[3].(*mcp.EmbeddedResource); !ok || c.Resource.URI != "file:///chart.csv" || c.Resource.Text != "a,b\n1,2\n" {
				t.Errorf("resource block %#v", res.Content[3])
			}
		})
	}
}

// Over invoke, progress and logs go nowhere, and the blocks come as they
// are.
func TestInvokeCarriesRichContent(t *testing.T) {
	s := richServer(t)
	res := s.invoke(t, "render", `{}`)
	if res.IsError || len(res.Content) != 4 {
		t.Fatalf("result %+v", res)
	}
	img, res3 := res.Content[1], res.Content[3]
	if img.Type != "image" || string(img.Data) != string(png) || img.MIMEType != "image/png" {
		t.Errorf("image block %+v", img)
	}
	if res.Content[2].Type != "audio" || string(res.Content[2].Data) != "RIFF" {
		t.Errorf("audio block %+v", res.Content[2])
	}
	if res3.Type != "resource" || res3.Resource == nil || res3.Resource.MIMEType != "text/csv" || res3.Resource.Text != "a,b\n1,2\n" {
		t.Errorf("resource block %+v", res3)
	}
}
