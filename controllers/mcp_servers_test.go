package controllers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// interopDir holds the MCP servers that toolkit did not write, installed
// from npm by `make interop-deps` (npm ci --prefix hack/interop).
var interopDir = filepath.Join("..", "hack", "interop")

// errNoInterop means node or the npm packages are missing. Outside CI the
// specs that need them are skipped; in CI (CI=true) they fail, so that the
// interop checks cannot silently vanish.
var errNoInterop = errors.New("the MCP interop servers are not installed: run make interop-deps")

func interopInstalled() error {
	if _, err := exec.LookPath("node"); err != nil {
		return fmt.Errorf("%w (node: %w)", errNoInterop, err)
	}
	for _, pkg := range []string{"sdk", "server-everything"} {
		if _, err := os.Stat(filepath.Join(interopDir, "node_modules", "@modelcontextprotocol", pkg, "package.json")); err != nil {
			return fmt.Errorf("%w (%w)", errNoInterop, err)
		}
	}
	return nil
}

// nodeServer is an MCP server in a node process on loopback.
type nodeServer struct {
	cmd  *exec.Cmd
	port int32
	// stdin is held open: the TypeScript server stops when it closes.
	stdin io.WriteCloser
	log   *syncBuffer
}

// base is the server's root URL.
func (s *nodeServer) base() string { return "http://127.0.0.1:" + strconv.Itoa(int(s.port)) }

// tail is the end of what the server wrote to its stderr, for a failure's
// message.
func (s *nodeServer) tail() string {
	const keep = 600
	log := s.log.String()
	if len(log) > keep {
		log = "…" + log[len(log)-keep:]
	}
	return log
}

// stop ends the process this test started, and no other.
func (s *nodeServer) stop() {
	_ = s.stdin.Close()
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

// startTSServer starts hack/interop/mcp-server.mjs, the TypeScript SDK
// server whose tools a test changes, with its flags.
func startTSServer(ctx context.Context, args ...string) (*nodeServer, error) {
	if err := interopInstalled(); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "node", append([]string{"mcp-server.mjs"}, args...)...)
	cmd.Dir = interopDir
	s := &nodeServer{cmd: cmd, log: &syncBuffer{}}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	s.stdin = stdin
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = s.log
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	select {
	case line := <-lines:
		var ev struct {
			Event string `json:"event"`
			Port  int32  `json:"port"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Event != "listening" {
			s.stop()
			return nil, fmt.Errorf("mcp-server.mjs said %q first; stderr: %s", line, s.log.String())
		}
		s.port = ev.Port
		return s, nil
	case <-time.After(30 * time.Second):
		s.stop()
		return nil, fmt.Errorf("mcp-server.mjs did not listen within 30s; stderr: %s", s.log.String())
	}
}

// setTools replaces the tools the TypeScript server serves.
func (s *nodeServer) setTools(tools ...spec.Tool) error {
	body, err := json.Marshal(tools)
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPut, s.base()+"/control/tools", bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("PUT /control/tools: %d %s", resp.StatusCode, b)
	}
	return nil
}

// tsStats is what the TypeScript server counted.
type tsStats struct {
	Lists    int `json:"lists"`
	Calls    int `json:"calls"`
	Sessions int `json:"sessions"`
	Deletes  int `json:"deletes"`
	Open     int `json:"open"`
}

func (s *nodeServer) stats() (tsStats, error) {
	var st tsStats
	resp, err := http.Get(s.base() + "/control/stats")
	if err != nil {
		return st, err
	}
	defer func() { _ = resp.Body.Close() }()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// startEverythingServer starts @modelcontextprotocol/server-everything in its
// Streamable HTTP mode, serving /mcp. It takes its port from PORT and says
// nothing machine-readable, so the port is a free one picked here and the
// server is ready once it accepts a connection.
func startEverythingServer(ctx context.Context) (*nodeServer, error) {
	if err := interopInstalled(); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	script := filepath.Join("node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	cmd := exec.CommandContext(ctx, "node", script, "streamableHttp")
	cmd.Dir = interopDir
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	s := &nodeServer{cmd: cmd, port: int32(port), log: &syncBuffer{}}
	if s.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = io.Discard, s.log
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if strings.Contains(s.log.String(), "listening on port") {
			return s, nil
		}
		if strings.Contains(s.log.String(), "Failed to start") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.stop()
	return nil, fmt.Errorf("server-everything did not listen on %d within 30s; stderr: %s", port, s.log.String())
}
