package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is a binary run in a process of its own, with its output appended
// to a log file. It can be started again after it stopped.
type Process struct {
	// Name names the process in errors, as in "the manager".
	Name string
	// Bin is the binary.
	Bin string
	// Args are its arguments.
	Args []string
	// Env are further variables of its environment, NAME=value, besides
	// this process's own.
	Env []string
	// LogPath receives its output, appended across restarts.
	LogPath string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
	starts int
}

// Start starts the process and, if readyURL is not empty, waits (within two
// minutes) until a GET of readyURL answers 200. The process gets a process
// group of its own, so that a terminal's Ctrl-C reaches only its parent,
// which stops it with [Process.Stop]: a process that saw both would take
// the second signal as an order to exit at once.
func (p *Process) Start(ctx context.Context, readyURL string) error {
	p.mu.Lock()
	if p.cmd != nil {
		p.mu.Unlock()
		return fmt.Errorf("%s is running already", p.Name)
	}
	cmd := exec.Command(p.Bin, p.Args...)
	if len(p.Env) > 0 {
		cmd.Env = append(os.Environ(), p.Env...)
	}
	ownProcessGroup(cmd)
	logFile, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.mu.Unlock()
		return err
	}
	p.starts++
	fmt.Fprintf(logFile, "==> start %d: %s\n", p.starts, strings.Join(append(append(slices.Clone(p.Env), p.Bin), p.Args...), " "))
	startedAt, _ := logFile.Seek(0, io.SeekCurrent)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		p.mu.Unlock()
		return fmt.Errorf("starting %s: %w", p.Name, err)
	}
	exited := make(chan struct{})
	p.cmd, p.exited, p.err = cmd, exited, nil
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		logFile.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(exited)
	}()
	if readyURL == "" {
		return nil
	}
	if err := waitReady(ctx, readyURL, exited); err != nil {
		err = errors.Join(fmt.Errorf("waiting for %s to be ready (log: %s): %w", p.Name, p.LogPath, err), p.Stop(10*time.Second))
		// CI keeps no files: the reason a process would not start goes
		// into the error.
		return fmt.Errorf("%w\nthe end of its log:\n%s", err, logTail(p.LogPath, startedAt, logTailBytes))
	}
	return nil
}

// Pid is the process id of the running process, or 0.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Done is closed when the process that Start started exits; it is nil
// before Start and after Stop.
func (p *Process) Done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exited
}

// Exited reports whether the process that Start started has exited, and
// how; after Stop it reports false.
func (p *Process) Exited() (bool, error) {
	ch := p.Done()
	if ch == nil {
		return false, nil
	}
	select {
	case <-ch:
		p.mu.Lock()
		defer p.mu.Unlock()
		return true, p.err
	default:
		return false, nil
	}
}

// Stop sends SIGTERM and waits up to timeout for the process to exit, then
// kills it. It fails if the process had to be killed or exited with an
// error.
func (p *Process) Stop(timeout time.Duration) error {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	var err error
	select {
	case <-exited:
		p.mu.Lock()
		err = p.err
		p.mu.Unlock()
		if err != nil {
			err = fmt.Errorf("%s exited: %w (log: %s)", p.Name, err, p.LogPath)
		}
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-exited
		err = fmt.Errorf("%s did not stop within %s of SIGTERM (log: %s)", p.Name, timeout, p.LogPath)
	}
	p.mu.Lock()
	p.cmd, p.exited = nil, nil
	p.mu.Unlock()
	return err
}

// Kill sends SIGKILL, as a crash or a lost node would end the process, and
// waits for it to exit.
func (p *Process) Kill() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
	p.mu.Lock()
	p.cmd, p.exited = nil, nil
	p.mu.Unlock()
}

func waitReady(ctx context.Context, url string, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-exited:
			return errors.New("it exited early")
		case <-tick.C:
		}
	}
}

// logTailBytes is how much of a process's log a failed start quotes.
const logTailBytes = 4 << 10

// logTail is the last max bytes that the log at path holds from offset
// from on: what one start of a process wrote.
func logTail(path string, from int64, max int64) string {
	f, err := os.Open(path)
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	if fi.Size()-from > max {
		from = fi.Size() - max
	}
	b, err := io.ReadAll(io.NewSectionReader(f, from, fi.Size()-from))
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	return string(b)
}
