package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// BuildManager builds cmd/manager of the module rooted at moduleDir into
// dir and returns the binary's path.
func BuildManager(ctx context.Context, moduleDir, dir string) (string, error) {
	return Build(ctx, moduleDir, dir, "manager")
}

// Build builds cmd/<name> of the module rooted at moduleDir into dir and
// returns the binary's path.
func Build(ctx context.Context, moduleDir, dir, name string) (string, error) {
	bin := filepath.Join(dir, name)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/"+name)
	cmd.Dir = moduleDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %w\n%s", name, err, out)
	}
	return bin, nil
}

// Manager is the manager binary run in a process of its own, as in
// production: its CPU time and memory are its own, and a crash is an exit.
type Manager struct {
	// Bin is the manager binary.
	Bin string
	// Kubeconfig is passed as --kubeconfig.
	Kubeconfig string
	// TableNamespace is passed as --table-namespace.
	TableNamespace string
	// Args are further flags.
	Args []string
	// Env are further variables of its environment, NAME=value, such as
	// the GOMEMLIMIT that the chart sets.
	Env []string
	// LogPath receives the manager's output, appended across restarts.
	LogPath string

	// MetricsAddr and ProbeAddr are the loopback addresses of the metrics
	// and probe endpoints of the process that runs now.
	MetricsAddr, ProbeAddr string

	proc Process
}

// Start starts the manager and waits until it answers its readiness probe.
func (m *Manager) Start(ctx context.Context) error {
	if m.proc.Pid() != 0 {
		return errors.New("the manager is running already")
	}
	var err error
	if m.MetricsAddr, err = FreeAddr(); err != nil {
		return err
	}
	if m.ProbeAddr, err = FreeAddr(); err != nil {
		return err
	}
	m.proc.Name, m.proc.Bin, m.proc.LogPath, m.proc.Env = "the manager", m.Bin, m.LogPath, m.Env
	m.proc.Args = append([]string{
		"--kubeconfig", m.Kubeconfig,
		"--metrics-bind-address", m.MetricsAddr,
		// Metrics reads its endpoint over plain HTTP without a token; a
		// --metrics-secure=true in Args wins over this.
		"--metrics-secure=false",
		"--health-probe-bind-address", m.ProbeAddr,
		"--table-namespace", m.TableNamespace,
	}, m.Args...)
	return m.proc.Start(ctx, "http://"+m.ProbeAddr+"/readyz")
}

// Pid is the process id of the running manager, or 0.
func (m *Manager) Pid() int { return m.proc.Pid() }

// Done is closed when the running manager exits; see [Process.Done].
func (m *Manager) Done() <-chan struct{} { return m.proc.Done() }

// Exited reports whether the process that Start started has exited, and
// how.
func (m *Manager) Exited() (bool, error) { return m.proc.Exited() }

// Stop sends SIGTERM and waits up to timeout for the process to exit, then
// kills it. It fails if the manager had to be killed or exited with an
// error.
func (m *Manager) Stop(timeout time.Duration) error { return m.proc.Stop(timeout) }

// Kill ends the manager with SIGKILL: it gets no chance to release its
// lease or finish a write.
func (m *Manager) Kill() { m.proc.Kill() }

// Leading reports whether the manager holds the leader lease, by its own
// leader_election_master_status gauge.
func (m *Manager) Leading(ctx context.Context) (bool, error) {
	fams, err := m.Metrics(ctx)
	if err != nil {
		return false, err
	}
	return Sum(fams, "leader_election_master_status", nil) == 1, nil
}

// Metrics scrapes the manager's own metrics endpoint.
func (m *Manager) Metrics(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.MetricsAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading the manager's metrics: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("reading the manager's metrics: %s", resp.Status)
	}
	return ParseMetrics(string(b))
}

// ProcStats is what /proc says of a process.
type ProcStats struct {
	// CPU is user plus system time.
	CPU time.Duration
	// RSS is the resident set size now (VmRSS).
	RSS int64
	// PeakRSS is the high-water mark of the resident set size (VmHWM).
	PeakRSS int64
	// AnonRSS is the anonymous part of RSS now (RssAnon): the heap, the
	// stacks and the runtime, without the pages of the binary (RssFile),
	// which the kernel can drop and read again under a memory limit.
	AnonRSS int64
}

// clockTick is USER_HZ, the unit of utime and stime in /proc/<pid>/stat. It
// is 100 on every Linux architecture Go supports.
const clockTick = 100

// ReadProcStats reads /proc/<pid>/stat and /proc/<pid>/status.
func ReadProcStats(pid int) (ProcStats, error) {
	var s ProcStats
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	// The command name, field 2, is in parentheses and may hold spaces:
	// count fields from the last ')'.
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return s, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return s, fmt.Errorf("parsing /proc/%d/stat: %w", pid, err)
	}
	s.CPU = time.Duration(utime+stime) * time.Second / clockTick

	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var dst *int64
		switch key {
		case "VmRSS":
			dst = &s.RSS
		case "VmHWM":
			dst = &s.PeakRSS
		case "RssAnon":
			dst = &s.AnonRSS
		default:
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if err != nil {
			return s, fmt.Errorf("parsing %s of /proc/%d/status: %w", key, pid, err)
		}
		*dst = kb << 10
	}
	return s, nil
}

// FreeAddr returns a loopback address with a port that was free a moment
// ago, for a process the caller starts next to listen on.
//
// The port is chosen below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), where the kernel never hands out a port
// of its own: a port from 127.0.0.1:0 is free only until the next client
// connection or listener anywhere on the machine takes it, and under a
// parallel `go test ./...` one sometimes did, between FreeAddr and the
// process's listen, so the process exited early with "address already in
// use". Below the range, only another FreeAddr (or a fixed port) can take
// it, and a random pick among thousands makes that rare. Where the range
// cannot be read or leaves no room below it, the kernel picks.
func FreeAddr() (string, error) {
	if lo, ok := ephemeralLow(); ok && lo-freeAddrFloor >= 1024 {
		for range 32 {
			port := freeAddrFloor + rand.IntN(lo-freeAddrFloor)
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err != nil {
				continue // taken: try another
			}
			addr := l.Addr().String()
			return addr, l.Close()
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// freeAddrFloor is the lowest port FreeAddr picks: above the registered
// ports that services on a developer's machine commonly hold.
const freeAddrFloor = 20000

// ephemeralLow is the first port of the kernel's ephemeral range, where
// the kernel says.
func ephemeralLow() (int, bool) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, false
	}
	lo, err := strconv.Atoi(f[0])
	return lo, err == nil && lo > 0 && lo <= 65535
}
