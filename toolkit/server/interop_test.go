package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/server"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// interopDir holds the TypeScript SDK harness: package.json pins
// @modelcontextprotocol/sdk, package-lock.json pins the rest, and
// `npm ci --prefix hack/interop` installs them.
var interopDir = filepath.Join("..", "..", "hack", "interop")

// requireNode returns the node binary and checks that the harness is
// installed. Outside CI a missing node or harness skips the test; in CI
// (CI=true) it fails it, so that the interop check cannot silently vanish.
func requireNode(t *testing.T) string {
	t.Helper()
	inCI := os.Getenv("CI") == "true"
	node, err := exec.LookPath("node")
	if err != nil {
		if inCI {
			t.Fatal("node is required in CI for the TypeScript SDK interop test")
		}
		t.Skip("node is not installed")
	}
	sdk := filepath.Join(interopDir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")
	if _, err := os.Stat(sdk); err != nil {
		if inCI {
			t.Fatalf("the interop harness is not installed: run npm ci --prefix hack/interop (%v)", err)
		}
		t.Skip("the interop harness is not installed: run npm ci --prefix hack/interop")
	}
	return node
}

// interopEvent is one line of the harness's output.
type interopEvent struct {
	Event           string          `json:"event"`
	ProtocolVersion string          `json:"protocolVersion"`
	SessionID       *string         `json:"sessionId"`
	ServerInfo      json.RawMessage `json:"serverInfo"`
	Tools           json.RawMessage `json:"tools"`
	Result          json.RawMessage `json:"result"`
	Progress        float64         `json:"progress"`
	Total           float64         `json:"total"`
	Message         string          `json:"message"`
	Level           string          `json:"level"`
	Data            string          `json:"data"`
	// Raw is the whole line, for the events of one test.
	Raw json.RawMessage `json:"-"`
}

// runInterop starts the harness and returns its events as they come.
func runInterop(t *testing.T, node, url, tool, args string, flags ...string) <-chan interopEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	cmd := exec.CommandContext(ctx, node, append([]string{"interop.mjs", url + spec.MCPPath, tool, args}, flags...)...)
	cmd.Dir = interopDir
	cmd.Stderr = &testWriter{t: t}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	events := make(chan interopEvent)
	done := make(chan struct{})
	go func() {
		defer close(events)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 8<<20)
		for sc.Scan() {
			var e interopEvent
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Errorf("harness printed %q: %v", sc.Text(), err)
				continue
			}
			e.Raw = slices.Clone(sc.Bytes())
			select {
			case events <- e:
			case <-done:
				return
			}
		}
	}()
	t.Cleanup(func() {
		close(done)
		if t.Failed() {
			cancel() // do not wait for a harness that waits for what failed
		}
		if err := cmd.Wait(); err != nil && !t.Failed() {
			t.Errorf("harness: %v", err)
		}
		cancel()
	})
	return events
}

func next(t *testing.T, events <-chan interopEvent, want string) interopEvent {
	t.Helper()
	select {
	case e, ok := <-events:
		if !ok {
			t.Fatalf("harness ended before %q", want)
		}
		if e.Event != want {
			t.Fatalf("harness event %q, want %q", e.Event, want)
		}
		return e
	case <-time.After(60 * time.Second):
		t.Fatalf("no %q from the harness within 60s", want)
	}
	panic("unreachable")
}

// testWriter sends the harness's stderr to the test log.
type testWriter struct{ t *testing.T }

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Logf("harness: %s", p)
	return len(p), nil
}

func TestTypeScriptSDKInterop(t *testing.T) {
	node := requireNode(t)
	// The same sloppy arguments as the Go clients send: a count as a
	// string, a boolean as a string, an enum in capitals and an array
	// encoded as a string.
	const tool, args = "echo", `{"text":"x","count":"3","flag":"true","status":"PAID","tags":"[\"a\",\"b\"]"}`

	for _, tc := range []struct {
		name string
		opts *server.Options
	}{
		{"stateless", nil},
		{"sessions", &server.Options{MCPSessions: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestServer(t, tc.opts)
			doc, _ := s.document(t)
			var flags []string
			if tc.opts != nil && tc.opts.MCPSessions {
				flags = append(flags, "--await-list-changed")
			}
			events := runInterop(t, node, s.URL, tool, args, flags...)

			connected := next(t, events, "connected")
			if connected.ProtocolVersion != "2025-11-25" {
				t.Errorf("the TypeScript client negotiated %q", connected.ProtocolVersion)
			}
			if hasSession := connected.SessionID != nil; hasSession != (tc.opts != nil && tc.opts.MCPSessions) {
				t.Errorf("session id %v", connected.SessionID)
			}

			var tools []spec.Tool
			if err := json.Unmarshal(next(t, events, "tools").Tools, &tools); err != nil {
				t.Fatal(err)
			}
			for i := range tools {
				tools[i] = normaliseHints(tools[i])
			}
			want := make([]spec.Tool, len(doc.Tools))
			for i, tl := range doc.Tools {
				want[i] = normaliseHints(tl)
			}
			if canonical(t, tools) != canonical(t, want) {
				t.Errorf("the TypeScript client's tools/list differs from the spec document:\n got %s\nwant %s", canonical(t, tools), canonical(t, want))
			}

			var got spec.CallResult
			if err := json.Unmarshal(next(t, events, "called").Result, &got); err != nil {
				t.Fatal(err)
			}
			if got.IsError {
				t.Fatalf("the sloppy call failed: %s", got.Text())
			}
			if inv := s.invoke(t, tool, args); canonical(t, got) != canonical(t, inv) {
				t.Errorf("tools/call differs from invoke:\n  mcp    %s\n  invoke %s", canonical(t, got), canonical(t, inv))
			}

			if slices.Contains(flags, "--await-list-changed") {
				next(t, events, "ready")
				waitFor(t, s.streams, "the standalone SSE stream to open")
				if err := s.reg.Add(must(toolkit.New("late", "Added at run time", echo))); err != nil {
					t.Fatal(err)
				}
				var after []spec.Tool
				if err := json.Unmarshal(next(t, events, "changed").Tools, &after); err != nil {
					t.Fatal(err)
				}
				if !slices.ContainsFunc(after, func(tl spec.Tool) bool { return tl.Name == "late" }) {
					t.Errorf("after list_changed the TypeScript client lists %s", canonical(t, after))
				}
			}
		})
	}
}

// TestTypeScriptSDKInterop_Progress checks that the TypeScript client,
// which asks for progress with a progressToken, receives the tool's
// notifications/progress on the call's stream, and, after
// logging/setLevel, its notifications/message; and that it reads the
// tool's image, audio and resource blocks.
func TestTypeScriptSDKInterop_Progress(t *testing.T) {
	node := requireNode(t)
	for _, tc := range []struct {
		name string
		opts *server.Options
	}{
		{"stateless", &server.Options{}},
		{"sessions", &server.Options{MCPSessions: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := new(toolkit.Registry)
			if err := reg.Add(richTool()); err != nil {
				t.Fatal(err)
			}
			h := server.New(reg, tc.opts)
			srv := httptest.NewServer(h)
			t.Cleanup(func() { h.Close(); srv.Close() })
			events := runInterop(t, node, srv.URL, "render", `{}`, "--progress")
			next(t, events, "connected")
			next(t, events, "tools")
			var progress, logs []string
			for {
				e := <-events
				if e.Event == "progress" {
					progress = append(progress, fmt.Sprintf("%g/%g %s", e.Progress, e.Total, e.Message))
					continue
				}
				if e.Event == "log" {
					logs = append(logs, e.Level+" "+e.Data)
					continue
				}
				if e.Event != "called" {
					t.Fatalf("harness event %q, want progress, log or called", e.Event)
				}
				var got spec.CallResult
				if err := json.Unmarshal(e.Result, &got); err != nil {
					t.Fatal(err)
				}
				if len(got.Content) != 4 || got.Content[1].Type != "image" || string(got.Content[1].Data) != string(png) ||
					got.Content[3].Resource == nil || got.Content[3].Resource.URI != "file:///chart.csv" {
					t.Errorf("content %+v", got.Content)
				}
				break
			}
			if strings.Join(progress, ", ") != "1/3 step 1, 2/3 step 2, 3/3 step 3" {
				t.Errorf("progress %q", progress)
			}
			if wantLogs := "warning the cache was cold"; strings.Join(logs, ", ") != wantLogs {
				t.Errorf("logs %q, want %q", logs, wantLogs)
			}
		})
	}
}
