package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// testHostPrefix begins the name of every network namespace and veth a
// test host makes, followed by the pid of the test process that made it:
// what lets a later run find and delete those of a run that crashed.
const testHostPrefix = "tpt"

// testHost is a host of the test's own: a network namespace joined to this
// one by a veth pair, with IP on the namespace's end and HostIP on this
// one's, both in 198.18.0.0/15 (RFC 2544, for benchmarking, routed nowhere).
// A listener made with Listen is in the namespace, so a peer in this
// namespace (the kube-apiserver, the operator, the plugin) reaches it
// through the veth, as it would a Pod, and no traffic leaves the machine.
type testHost struct {
	// IP is the namespace's address, where Listen listens.
	IP string
	// HostIP is this namespace's end of the veth.
	HostIP string

	netns string
	veth  string
}

// testHostUnavailable says why this process cannot make a test host, or
// returns "" if it can.
func testHostUnavailable() string {
	if os.Geteuid() != 0 {
		return "making a network namespace needs root"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "making a network namespace needs ip (iproute2) on PATH"
	}
	return ""
}

// newTestHost makes a test host, after deleting those left by test
// processes that are gone. Close removes it.
func newTestHost() (*testHost, error) {
	if why := testHostUnavailable(); why != "" {
		return nil, errors.New(why)
	}
	deleteStaleTestHosts()
	pid := os.Getpid()
	subnet, err := freeSubnet(pid)
	if err != nil {
		return nil, err
	}
	h := &testHost{
		netns:  fmt.Sprintf("%s-%d", testHostPrefix, pid),
		veth:   fmt.Sprintf("%s%dh", testHostPrefix, pid),
		HostIP: subnet[0],
		IP:     subnet[1],
	}
	peer := fmt.Sprintf("%s%dn", testHostPrefix, pid)
	steps := [][]string{
		{"netns", "add", h.netns},
		{"link", "add", h.veth, "type", "veth", "peer", "name", peer},
		{"link", "set", peer, "netns", h.netns},
		{"addr", "add", h.HostIP + "/30", "dev", h.veth},
		{"link", "set", h.veth, "up"},
		{"-n", h.netns, "addr", "add", h.IP + "/30", "dev", peer},
		{"-n", h.netns, "link", "set", peer, "up"},
		{"-n", h.netns, "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			h.Close()
			return nil, err
		}
	}
	return h, nil
}

// Listen listens on the test host's IP at port ("0" for any), inside its
// namespace. The socket stays in the namespace whichever goroutine
// accepts on it.
func (h *testHost) Listen(port string) (net.Listener, error) {
	type result struct {
		l   net.Listener
		err error
	}
	done := make(chan result, 1)
	go func() {
		// The thread enters the namespace only for the socket call. If it
		// cannot go back, it stays locked, and the runtime ends it with
		// this goroutine instead of giving it to another.
		runtime.LockOSThread()
		l, err := h.listenLocked(port)
		done <- result{l, err}
	}()
	r := <-done
	return r.l, r.err
}

func (h *testHost) listenLocked(port string) (net.Listener, error) {
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, err
	}
	defer orig.Close()
	ns, err := os.Open(filepath.Join("/run/netns", h.netns))
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, fmt.Errorf("entering network namespace %s: %w", h.netns, err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(h.IP, port))
	if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
		runtime.UnlockOSThread()
	}
	return l, err
}

// Close removes the namespace and the veth pair. Listeners still open keep
// the namespace alive until they close; close them first.
func (h *testHost) Close() {
	_ = ip("link", "del", h.veth)
	_ = ip("netns", "del", h.netns)
}

// deleteStaleTestHosts deletes the namespaces and veths of test processes
// that are no longer running, which a crash or a kill left behind.
func deleteStaleTestHosts() {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
			if pid, ok := strings.CutPrefix(name, testHostPrefix+"-"); ok && stale(pid) {
				_ = ip("netns", "del", name)
			}
		}
	}
	out, err = exec.Command("ip", "-o", "link", "show").Output()
	if err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			// "7: tpt123h@if6: <BROADCAST,...> ..."
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			if rest, ok := strings.CutPrefix(name, testHostPrefix); ok && strings.HasSuffix(rest, "h") && stale(strings.TrimSuffix(rest, "h")) {
				_ = ip("link", "del", name)
			}
		}
	}
}

// stale says whether pid, a test host's suffix, names no running process.
func stale(pid string) bool {
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 {
		return false
	}
	return unix.Kill(n, 0) == unix.ESRCH
}

// freeSubnet picks a /30 in 198.18.0.0/15 that no interface here uses,
// starting from one derived from pid, so that test processes running at
// once get different ones. It returns the host's and the namespace's
// address.
func freeSubnet(pid int) ([2]string, error) {
	out, err := exec.Command("ip", "-o", "-4", "addr", "show", "to", "198.18.0.0/15").Output()
	if err != nil {
		return [2]string{}, fmt.Errorf("ip addr show: %w", err)
	}
	const subnets = 1 << 15 // /30s in a /15
	for i := range subnets {
		n := (pid + i) % subnets
		base := net.IPv4(198, 18+byte(n>>14), byte(n>>6), byte(n<<2))
		if !strings.Contains(string(out), " "+netAddr(base, 1)+"/") && !strings.Contains(string(out), " "+netAddr(base, 2)+"/") {
			return [2]string{netAddr(base, 1), netAddr(base, 2)}, nil
		}
	}
	return [2]string{}, errors.New("no free /30 in 198.18.0.0/15")
}

func netAddr(base net.IP, host byte) string {
	ip := base.To4()
	return net.IPv4(ip[0], ip[1], ip[2], ip[3]+host).String()
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
