package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestCallTemplateReplacesTheToolNameOnly(t *testing.T) {
	tmpl := callTemplate{
		name:   "t00000_add",
		body:   []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t00000_add","arguments":{"a":1,"b":2}}}`),
		header: http.Header{"Mcp-Name": {"t00000_add"}, "Mcp-Protocol-Version": {"2026-07-28"}},
	}
	body, hdr := tmpl.with("t01234_add")
	if want := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t01234_add","arguments":{"a":1,"b":2}}}`; string(body) != want {
		t.Errorf("body %s, want %s", body, want)
	}
	if hdr.Get("Mcp-Name") != "t01234_add" || hdr.Get("Mcp-Protocol-Version") != "2026-07-28" {
		t.Errorf("headers %v", hdr)
	}
	if tmpl.header.Get("Mcp-Name") != "t00000_add" {
		t.Error("the template's own headers changed")
	}
}

func TestTableRoutesEveryToolToItsOwnNamespacesService(t *testing.T) {
	tools, resolve := table(1000, 10, "127.0.0.1:1")
	if len(resolve) != 10 {
		t.Errorf("%d hosts to resolve, want 10", len(resolve))
	}
	seen := map[string]bool{}
	for _, tt := range tools {
		if seen[tt.Name] {
			t.Fatalf("%s twice", tt.Name)
		}
		seen[tt.Name] = true
		if want := "http://" + service + "." + tt.ToolSet.Namespace + ".svc:8080/tools/" + sourceTool; tt.Endpoints.Invoke != want {
			t.Fatalf("%s: invoke %s, want %s", tt.Name, tt.Endpoints.Invoke, want)
		}
		if !strings.HasSuffix(tt.Name, "_"+tt.SourceName) {
			t.Fatalf("%s does not end in its source name %s", tt.Name, tt.SourceName)
		}
	}
	if d := description(7); d != description(7) || d == description(8) {
		t.Error("descriptions must be the same for one tool and differ between tools")
	}
}

func TestFigureLine(t *testing.T) {
	r := result{tools: 10000, clients: 32, rpsDirect: 2000, rpsGateway: 1500, p50Added: 1500 * time.Microsecond, p99Added: 2 * time.Millisecond, rssMiB: 61.25}
	want := "tools=10000 clients=32 rps_direct=2000 rps_gateway=1500 ratio=0.75 p50_added_ms=1.50 p99_added_ms=2.00 rss_mib=61.2"
	if got := r.figureLine(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	r.pinned = true
	if got := r.figureLine(); got != want+" pinned=1" {
		t.Errorf("pinned: got  %s\nwant %s pinned=1", got, want)
	}
	r.rpsFloor, r.p99AddedFloor = 1800, 500*time.Microsecond
	if got, want := r.figureLine(), want+" rps_floor=1800 ratio_floor=0.90 p99_added_floor_ms=0.50 pinned=1"; got != want {
		t.Errorf("with the floor: got  %s\nwant %s", got, want)
	}
}

func TestGatewayEnvTakesOnePairAFlag(t *testing.T) {
	var e envList
	for _, v := range []string{"GOGC=200", "GODEBUG=gctrace=1,madvdontneed=1"} {
		if err := e.Set(v); err != nil {
			t.Fatal(err)
		}
	}
	if len(e) != 2 || e[1] != "GODEBUG=gctrace=1,madvdontneed=1" {
		t.Errorf("got %q", e)
	}
	for _, bad := range []string{"GOGC", "=1", ""} {
		if err := e.Set(bad); err == nil {
			t.Errorf("%q was taken", bad)
		}
	}
}

func TestFloorPassesTheCallOnAsSent(t *testing.T) {
	type seen struct {
		path, host, contentType, body string
	}
	got := make(chan seen, 1)
	wl := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.URL.Path, r.Host, r.Header.Get("Content-Type"), string(b)}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"content":[{"type":"text","text":"3"}]}`)
	}))
	defer wl.Close()
	to, err := url.Parse(wl.URL)
	if err != nil {
		t.Fatal(err)
	}
	floor := httptest.NewServer(newFloor(to))
	defer floor.Close()
	resp, err := http.Post(floor.URL+"/tools/add", "application/json", strings.NewReader(`{"a":1,"b":2}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || string(body) != `{"content":[{"type":"text","text":"3"}]}` {
		t.Fatalf("%d %s %v", resp.StatusCode, body, err)
	}
	if s := <-got; s != (seen{"/tools/add", to.Host, "application/json", `{"a":1,"b":2}`}) {
		t.Errorf("the workload saw %+v", s)
	}
}

func TestPinBindsEveryThreadOfAProcess(t *testing.T) {
	plan, err := planCPUs()
	if err != nil {
		t.Skip(err)
	}
	// A Go process has several threads by the time it is up: the test
	// binary itself, run again as a child that says so once its test runs
	// (a time to wait instead was too short under -race on a loaded
	// machine: the child had one thread yet).
	cmd := exec.Command(os.Args[0], "-test.run", "^TestHelperWaits$")
	cmd.Env = append(os.Environ(), "BENCH_GATEWAY_HELPER=1")
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
	defer func() { _ = stdin.Close(); _ = cmd.Wait() }()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != helperReady+"\n" {
		t.Fatalf("the helper said %q, %v", line, err)
	}
	if err := pin(cmd.Process.Pid, plan.gateway); err != nil {
		t.Fatal(err)
	}
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/task")
	if err != nil || len(tasks) < 2 {
		t.Fatalf("%d threads, %v", len(tasks), err)
	}
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &set); err != nil {
			t.Fatal(err)
		}
		if set.Count() != 1 || !set.IsSet(plan.gateway) {
			t.Errorf("thread %d may run on %d CPUs (CPU %d: %v)", tid, set.Count(), plan.gateway, set.IsSet(plan.gateway))
		}
	}
}

// TestHelperWaits is the child of TestPinBindsEveryThreadOfAProcess.
func TestHelperWaits(t *testing.T) {
	if os.Getenv("BENCH_GATEWAY_HELPER") != "1" {
		t.Skip("a helper process")
	}
	fmt.Println(helperReady)
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// helperReady is what TestHelperWaits prints once it runs.
const helperReady = "helper ready"
