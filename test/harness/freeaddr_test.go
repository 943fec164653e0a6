package harness_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/test/harness"
)

// TestFreeAddrIsOutsideTheEphemeralRange: a port the kernel never hands
// out on its own can be taken between FreeAddr and the listen only by
// another FreeAddr. Before, FreeAddr returned a port of 127.0.0.1:0, and a
// gateway under CI's parallel tests once exited early on it.
func TestFreeAddrIsOutsideTheEphemeralRange(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Skipf("no ephemeral range to stay out of here: %v", err)
	}
	lo, err := strconv.Atoi(strings.Fields(string(b))[0])
	if err != nil {
		t.Fatal(err)
	}
	if lo < 21024 {
		t.Skipf("the ephemeral range starts at %d: too little room below it", lo)
	}
	seen := map[string]bool{}
	for range 50 {
		addr, err := harness.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		_, p, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		port, _ := strconv.Atoi(p)
		if port < 20000 || port >= lo {
			t.Fatalf("FreeAddr gave %s: want a port in [20000, %d)", addr, lo)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("FreeAddr gave %s, which cannot be listened on: %v", addr, err)
		}
		// The port stays taken while the loop goes on: FreeAddr must not
		// give it again.
		t.Cleanup(func() { _ = l.Close() })
		if seen[addr] {
			t.Fatalf("FreeAddr gave %s twice while it was taken", addr)
		}
		seen[addr] = true
	}
}

// TestStartQuotesTheLogOfAProcessThatExitsEarly: CI keeps no log files,
// so why a process would not start must be in the error.
func TestStartQuotesTheLogOfAProcessThatExitsEarly(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("uses sh")
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	addr, err := harness.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "early.log")
	if err := os.WriteFile(log, []byte("an older start's line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &harness.Process{Name: "early", Bin: sh, LogPath: log,
		Args: []string{"-c", "echo 'listening on " + addr + ": address already in use' >&2; exit 1"}}
	done := make(chan error, 1)
	go func() { done <- p.Start(t.Context(), "http://"+addr+"/readyz") }()
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatal("Start did not return after the process exited")
	}
	if err == nil {
		t.Fatal("Start succeeded for a process that exited")
	}
	if !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("the error does not quote the log: %v", err)
	}
	if strings.Contains(err.Error(), "an older start's line") {
		t.Errorf("the error quotes an older start's log: %v", err)
	}
}
