package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// mcpTableTools are the entries the operator publishes for the tools names
// of an MCP ToolSet service in namespace whose server listens at path.
func mcpTableTools(namespace, service, path string, names ...string) []spec.TableTool {
	var out []spec.TableTool
	for _, n := range names {
		out = append(out, spec.TableTool{
			Name: n, SourceName: n, InputSchema: json.RawMessage(`{"type":"object"}`),
			ToolSet:   spec.ObjectReference{Namespace: namespace, Name: service},
			Protocol:  spec.ProtocolMCP,
			Endpoints: &spec.Endpoints{MCP: "http://" + service + "." + namespace + ".svc:8080" + path},
		})
	}
	return out
}

// startTSServer starts hack/interop/mcp-server.mjs, a TypeScript SDK server
// of the 2025 era with sessions, and returns its loopback address. Without
// node and the npm packages the test is skipped, and in CI it fails.
func startTSServer(t *testing.T) string {
	t.Helper()
	dir := filepath.Join("..", "..", "hack", "interop")
	_, errNode := exec.LookPath("node")
	_, errSDK := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json"))
	if err := errors.Join(errNode, errSDK); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the interop servers are not installed (make interop-deps): %v", err)
		}
		t.Skipf("the interop servers are not installed (make interop-deps): %v", err)
	}
	cmd := exec.Command("node", "mcp-server.mjs")
	cmd.Dir = dir
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			first <- sc.Text()
		}
		for sc.Scan() {
		}
	}()
	select {
	case line := <-first:
		var ev struct {
			Port int `json:"port"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Port == 0 {
			t.Fatalf("mcp-server.mjs said %q", line)
		}
		addr := fmt.Sprintf("127.0.0.1:%d", ev.Port)
		body, _ := json.Marshal([]map[string]any{
			{"name": "ts_look", "inputSchema": map[string]any{"type": "object"}},
			{"name": "fail", "inputSchema": map[string]any{"type": "object"}},
		})
		req, _ := http.NewRequest(http.MethodPut, "http://"+addr+"/control/tools", strings.NewReader(string(body)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return addr
	case <-time.After(30 * time.Second):
		t.Fatal("mcp-server.mjs did not listen within 30s")
	}
	return ""
}

// TestMCPServersAreCalledWithToolsCall: tools of MCP servers that toolkit
// did not write (a TypeScript SDK server with sessions, a Go SDK server
// without) are called through the gateway with tools/call, and their
// results, of every content type, come back unchanged in both eras.
func TestMCPServersAreCalledWithToolsCall(t *testing.T) {
	tsAddr := startTSServer(t)

	goServer := mcp.NewServer(&mcp.Implementation{Name: "go-mcp"}, nil)
	mcp.AddTool(goServer, &mcp.Tool{Name: "go_image"}, func(_ context.Context, _ *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.ImageContent{Data: []byte{0x89, 'P', 'N', 'G'}, MIMEType: "image/png"},
			&mcp.ResourceLink{URI: "mem://doc", Name: "doc"},
		}}, nil, nil
	})
	goSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return goServer },
		&mcp.StreamableHTTPOptions{Stateless: true, DisableLocalhostProtection: true}))
	t.Cleanup(goSrv.Close)

	r := new(routes)
	r.set("ts.apps.svc.cluster.local:8080", tsAddr)
	r.set("gomcp.apps.svc.cluster.local:8080", goSrv.Listener.Addr().String())
	tbl := table(mcpTableTools("apps", "ts", "/mcp", "ts_look", "fail"), mcpTableTools("apps", "gomcp", "/mcp", "go_image"))
	g, url := newGateway(t, r, gateway.Options{CallTimeout: 20 * time.Second})
	if err := g.SetTable(tbl); err != nil {
		t.Fatal(err)
	}
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			cs := connect(t, url+"/mcp", era, nil, nil)
			if got, _ := listAll(t, cs); strings.Join(got, ",") != "fail,go_image,ts_look" {
				t.Fatalf("tools/list gives %v", got)
			}
			res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "ts_look", Arguments: map[string]any{"q": "x"}})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(res.Content)
			const want = `[{"type":"text","text":"ts_look {\"q\":\"x\"}"},` +
				`{"type":"image","mimeType":"image/png","data":"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="},` +
				`{"type":"audio","mimeType":"audio/wav","data":"UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=","annotations":{"audience":["user"]}},` +
				`{"type":"resource","resource":{"uri":"mem://interop/note.txt","mimeType":"text/plain","text":"an embedded note"}},` +
				`{"type":"resource_link","mimeType":"text/markdown","name":"doc","uri":"mem://interop/doc"}]`
			if !sameJSON(t, string(b), want) {
				t.Errorf("content through the gateway\n%s\nwant\n%s", b, want)
			}
			if res.IsError {
				t.Error("isError")
			}

			res, err = cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "fail"})
			if err != nil || !res.IsError || text(res) != "failed as asked" {
				t.Errorf("the server's isError result: %v %+v", err, res)
			}

			res, err = cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "go_image"})
			if err != nil {
				t.Fatal(err)
			}
			if img, ok := res.Content[0].(*mcp.ImageContent); !ok || string(img.Data) != "\x89PNG" || img.MIMEType != "image/png" {
				t.Errorf("image block %#v", res.Content[0])
			}
			if link, ok := res.Content[1].(*mcp.ResourceLink); !ok || link.URI != "mem://doc" {
				t.Errorf("resource link %#v", res.Content[1])
			}
		})
	}
}

// startEverything starts @modelcontextprotocol/server-everything in its
// Streamable HTTP mode on a free loopback port, skipped as startTSServer is.
func startEverything(t *testing.T) string {
	t.Helper()
	dir := filepath.Join("..", "..", "hack", "interop")
	script := filepath.Join("node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	_, errNode := exec.LookPath("node")
	_, errPkg := os.Stat(filepath.Join(dir, script))
	if err := errors.Join(errNode, errPkg); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the interop servers are not installed (make interop-deps): %v", err)
		}
		t.Skipf("the interop servers are not installed (make interop-deps): %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	cmd := exec.Command("node", script, "streamableHttp")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening on port") {
				close(listening)
				break
			}
		}
		for sc.Scan() {
		}
	}()
	select {
	case <-listening:
		return fmt.Sprintf("127.0.0.1:%d", port)
	case <-time.After(30 * time.Second):
		t.Fatal("server-everything did not listen within 30s")
	}
	return ""
}

// TestServerEverythingIsCalledThroughTheGateway: the reference server's
// tools, called through the gateway in both eras, its image included.
func TestServerEverythingIsCalledThroughTheGateway(t *testing.T) {
	addr := startEverything(t)
	r := new(routes)
	r.set("everything.ref.svc.cluster.local:8080", addr)
	g, url := newGateway(t, r, gateway.Options{CallTimeout: 20 * time.Second})
	if err := g.SetTable(table(mcpTableTools("ref", "everything", "/mcp", "echo", "get-tiny-image"))); err != nil {
		t.Fatal(err)
	}
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			cs := connect(t, url+"/mcp", era, nil, nil)
			res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "through the gateway"}})
			if err != nil || res.IsError || !strings.Contains(text(res), "through the gateway") {
				t.Fatalf("echo: %v %+v", err, res)
			}
			res, err = cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "get-tiny-image"})
			if err != nil || len(res.Content) != 3 {
				t.Fatalf("get-tiny-image: %v %+v", err, res)
			}
			img, ok := res.Content[1].(*mcp.ImageContent)
			if !ok || img.MIMEType != "image/png" || !strings.HasPrefix(string(img.Data), "\x89PNG") {
				t.Fatalf("the image block: %#v", res.Content[1])
			}
		})
	}
}

// TestADeadMCPServerGivesAnErrorResult: the gateway answers for an MCP
// server that is gone, naming the tool, as it does for a toolkit workload.
func TestADeadMCPServerGivesAnErrorResult(t *testing.T) {
	r := new(routes)
	r.set("gone.apps.svc.cluster.local:8080", "127.0.0.1:1")
	g, url := newGateway(t, r, gateway.Options{CallTimeout: 5 * time.Second})
	if err := g.SetTable(table(mcpTableTools("apps", "gone", "/mcp", "gone_tool"))); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, url+"/mcp", eras[0], nil, nil)
	res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "gone_tool"})
	if err != nil || !res.IsError || !strings.Contains(text(res), "gone_tool") || !strings.Contains(text(res), "apps/gone") ||
		!strings.Contains(text(res), "unreachable") {
		t.Fatalf("got %v %+v", err, res)
	}
}

func sameJSON(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatal(err)
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}
