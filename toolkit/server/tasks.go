package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Defaults of the task store's bounds (see [Options]).
const (
	// DefaultMaxTasksPerCaller bounds the tasks one caller has running.
	DefaultMaxTasksPerCaller = 16
	// DefaultMaxTasks bounds the tasks running for every caller together.
	DefaultMaxTasks = 256
	// DefaultMaxTaskTTL bounds a task's lifetime: from its creation to
	// when it and its result are dropped, running or not.
	DefaultMaxTaskTTL = time.Hour
	// DefaultTaskPollInterval is the pollInterval a task suggests.
	DefaultTaskPollInterval = 500 * time.Millisecond
)

// Statuses of a task (MCP 2025-11-25).
const (
	taskWorking   = "working"
	taskCompleted = "completed"
	taskFailed    = "failed"
	taskCancelled = "cancelled"
)

// minTaskTTL is the shortest lifetime a caller may ask for: less could not
// be polled once.
const minTaskTTL = time.Second

// maxStatusMessage bounds a task's statusMessage, which a tool's progress
// messages set.
const maxStatusMessage = 512

var (
	// errTooManyTasks refuses a task over a caller's bound or the store's.
	errTooManyTasks = errors.New("too many tasks")
	// errTaskNotFound answers a task id that is not the caller's: one that
	// never was, has expired, or is another caller's.
	errTaskNotFound = errors.New("task not found")
	// errTaskTerminal refuses to cancel a task that has finished.
	errTaskTerminal = errors.New("task has finished")
)

// taskState is a task as MCP's Task object gives it, plus what the store
// keeps to run and drop it.
type taskState struct {
	id, owner     string
	status        string
	statusMessage string
	created       time.Time
	updated       time.Time
	ttl           time.Duration

	cancel context.CancelFunc
	done   chan struct{} // closed when status becomes terminal
	result []byte        // the JSON-RPC result, if the call returned one
	rpcErr error         // the JSON-RPC error, if it returned one
	timer  *time.Timer   // drops the task when its lifetime ends
}

// taskView is the MCP Task object of a task.
type taskView struct {
	TaskID        string  `json:"taskId"`
	Status        string  `json:"status"`
	StatusMessage string  `json:"statusMessage,omitempty"`
	CreatedAt     string  `json:"createdAt"`
	LastUpdatedAt string  `json:"lastUpdatedAt"`
	TTL           int64   `json:"ttl"`
	PollInterval  float64 `json:"pollInterval,omitempty"`
}

// taskStore holds the tasks of one Handler. Every bound holds under its
// lock:
//   - a caller has at most perCaller tasks running (a cancelled or
//     dropped one runs until its tool returns), and keeps at most
//     perCaller finished ones (the oldest is dropped for a new task);
//   - at most total tasks run, and at most 2*total are kept;
//   - a task lives at most maxTTL from its creation, running or not, and
//     is then cancelled and dropped with its result.
//
// Task ids are 128 random bits; a caller sees only its own tasks.
type taskStore struct {
	perCaller, total int
	maxTTL           time.Duration
	minTTL           time.Duration
	poll             time.Duration
	now              func() time.Time

	base   context.Context // cancelled by close
	cancel context.CancelFunc

	mu      sync.Mutex
	tasks   map[string]*taskState
	owners  map[string][]*taskState // in creation order
	running int
	// calls and callsBy count the tasks' calls that have not returned,
	// all callers' and each's: a task cancelled or dropped still counts
	// against the bounds until its tool returns, which a tool that does
	// not heed its context may not do for long.
	calls   int
	callsBy map[string]int
}

func newTaskStore(perCaller, total int, maxTTL, poll time.Duration) *taskStore {
	base, cancel := context.WithCancel(context.Background())
	return &taskStore{
		perCaller: perCaller, total: total, maxTTL: maxTTL, minTTL: minTaskTTL, poll: poll, now: time.Now,
		base: base, cancel: cancel,
		tasks: map[string]*taskState{}, owners: map[string][]*taskState{}, callsBy: map[string]int{},
	}
}

// close cancels every running task; later tasks are refused.
func (s *taskStore) close() { s.cancel() }

// live is the number of tasks the store keeps.
func (s *taskStore) live() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tasks)
}

// clampTTL is the lifetime a task gets for the ttl (ms) a caller asked,
// nil for none.
func (s *taskStore) clampTTL(ms *float64) time.Duration {
	if ms == nil || *ms <= 0 || *ms >= float64(s.maxTTL/time.Millisecond) {
		return s.maxTTL
	}
	return max(time.Duration(*ms)*time.Millisecond, s.minTTL)
}

// start creates a task for owner and runs run in the background, in a
// context with parent's values that the task's cancellation, its lifetime
// and the store's close end. run returns the JSON-RPC result or error of the call and
// whether the call failed (a tool result with isError); set updates the
// status message as it runs.
func (s *taskStore) start(parent context.Context, owner string, ttl time.Duration, run func(ctx context.Context, set func(string)) (result []byte, failed bool, err error)) (taskView, error) {
	if s.base.Err() != nil {
		return taskView{}, fmt.Errorf("%w: the server is shutting down", errTooManyTasks)
	}
	id, err := newTaskID()
	if err != nil {
		return taskView{}, err
	}
	now := s.now()
	s.mu.Lock()
	mine := s.owners[owner]
	n := 0
	for _, t := range mine {
		if t.status == taskWorking {
			n++
		}
	}
	switch {
	case n >= s.perCaller || s.callsBy[owner] >= s.perCaller:
		s.mu.Unlock()
		return taskView{}, fmt.Errorf("%w: this caller has %d tasks running (or cancelled, with their tool still returning), the most it may; wait for one to finish or cancel one", errTooManyTasks, max(n, s.callsBy[owner]))
	case s.running >= s.total || s.calls >= s.total:
		s.mu.Unlock()
		return taskView{}, fmt.Errorf("%w: the server runs %d tasks, the most it may; try again later", errTooManyTasks, max(s.running, s.calls))
	}
	// Room for the result: the caller's oldest finished task goes past
	// perCaller of them, the store's oldest past 2*total tasks.
	if len(mine)-n >= s.perCaller {
		s.dropLocked(oldestFinished(mine))
	}
	if len(s.tasks) >= 2*s.total {
		var oldest *taskState
		for _, t := range s.tasks {
			if t.status != taskWorking && (oldest == nil || t.created.Before(oldest.created)) {
				oldest = t
			}
		}
		// running < total, so more than total tasks have finished.
		s.dropLocked(oldest)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	stop := context.AfterFunc(s.base, cancel)
	t := &taskState{id: id, owner: owner, status: taskWorking, created: now, updated: now, ttl: ttl, cancel: cancel, done: make(chan struct{})}
	t.timer = time.AfterFunc(ttl, func() { s.expire(t) })
	s.tasks[id] = t
	s.owners[owner] = append(s.owners[owner], t)
	s.running++
	s.calls++
	s.callsBy[owner]++
	v := s.viewLocked(t)
	s.mu.Unlock()

	go func() {
		defer stop()
		defer cancel()
		defer s.callReturned(owner)
		set := func(msg string) { s.setMessage(t, msg) }
		res, failed, err := run(ctx, set)
		s.finish(t, res, failed, err)
	}()
	return v, nil
}

// callReturned notes that a task's call has returned.
func (s *taskStore) callReturned(owner string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls--
	if s.callsBy[owner]--; s.callsBy[owner] <= 0 {
		delete(s.callsBy, owner)
	}
}

func oldestFinished(tasks []*taskState) *taskState {
	for _, t := range tasks {
		if t.status != taskWorking {
			return t
		}
	}
	return nil
}

// finish records the outcome of a task's call, unless it was cancelled.
func (s *taskStore) finish(t *taskState, result []byte, failed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.status != taskWorking {
		return
	}
	switch {
	case err != nil:
		t.status, t.rpcErr = taskFailed, err
		t.statusMessage = truncateMessage(err.Error())
	case failed:
		t.status, t.result = taskFailed, result
	default:
		t.status, t.result = taskCompleted, result
	}
	s.terminateLocked(t)
}

// terminateLocked ends a task that was running.
func (s *taskStore) terminateLocked(t *taskState) {
	t.updated = s.now()
	s.running--
	close(t.done)
}

func (s *taskStore) setMessage(t *taskState, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.status == taskWorking {
		t.statusMessage = truncateMessage(msg)
		t.updated = s.now()
	}
}

// expire drops a task whose lifetime has ended, cancelling it if it runs.
func (s *taskStore) expire(t *taskState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tasks[t.id] == t {
		s.dropLocked(t)
	}
}

// dropLocked forgets t, cancelling it if it runs.
func (s *taskStore) dropLocked(t *taskState) {
	if t == nil {
		return
	}
	if t.status == taskWorking {
		t.status, t.statusMessage = taskCancelled, "the task's lifetime ended"
		s.terminateLocked(t)
	}
	t.cancel()
	t.timer.Stop()
	delete(s.tasks, t.id)
	mine := slices.DeleteFunc(s.owners[t.owner], func(x *taskState) bool { return x == t })
	if len(mine) == 0 {
		delete(s.owners, t.owner)
	} else {
		s.owners[t.owner] = mine
	}
}

// anonymousOwner prefixes the owner key of a caller known only by its
// address (see mcpTasks.caller).
const anonymousOwner = "addr:"

// lookupLocked returns owner's task id. A task of an anonymous caller is
// any anonymous caller's: its address counts its tasks against the
// per-caller bound, but it is not who the caller is (behind a gateway it
// is the replica's, and the next request may come through another), so
// the task's id, 128 random bits, is what reaches it. A task of a verified
// caller or of a session stays theirs alone.
func (s *taskStore) lookupLocked(owner, id string) (*taskState, error) {
	t, ok := s.tasks[id]
	if ok && t.owner != owner && strings.HasPrefix(t.owner, anonymousOwner) && strings.HasPrefix(owner, anonymousOwner) {
		return t, nil
	}
	if !ok || t.owner != owner {
		return nil, errTaskNotFound
	}
	return t, nil
}

// get returns owner's task id.
func (s *taskStore) get(owner, id string) (taskView, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.lookupLocked(owner, id)
	if err != nil {
		return taskView{}, err
	}
	return s.viewLocked(t), nil
}

// list returns owner's tasks, oldest first: at most 2*perCaller.
func (s *taskStore) list(owner string) []taskView {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]taskView, 0, len(s.owners[owner]))
	for _, t := range s.owners[owner] {
		out = append(out, s.viewLocked(t))
	}
	return out
}

// cancelTask cancels owner's running task id.
func (s *taskStore) cancelTask(owner, id string) (taskView, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.lookupLocked(owner, id)
	if err != nil {
		return taskView{}, err
	}
	if t.status != taskWorking {
		return taskView{}, fmt.Errorf("%w: it is %s", errTaskTerminal, t.status)
	}
	t.status, t.statusMessage = taskCancelled, "the client cancelled the task"
	s.terminateLocked(t)
	t.cancel()
	return s.viewLocked(t), nil
}

// result waits until owner's task id has finished, ctx ends or the task is
// dropped, and returns its outcome.
func (s *taskStore) result(ctx context.Context, owner, id string) (taskView, []byte, error, error) {
	s.mu.Lock()
	t, err := s.lookupLocked(owner, id)
	s.mu.Unlock()
	if err != nil {
		return taskView{}, nil, nil, err
	}
	select {
	case <-t.done:
	case <-ctx.Done():
		return taskView{}, nil, nil, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.viewLocked(t), t.result, t.rpcErr, nil
}

func (s *taskStore) viewLocked(t *taskState) taskView {
	return taskView{
		TaskID:        t.id,
		Status:        t.status,
		StatusMessage: t.statusMessage,
		CreatedAt:     t.created.UTC().Format(time.RFC3339Nano),
		LastUpdatedAt: t.updated.UTC().Format(time.RFC3339Nano),
		TTL:           t.ttl.Milliseconds(),
		PollInterval:  float64(s.poll.Milliseconds()),
	}
}

// newTaskID is 128 bits from crypto/rand: a task id cannot be guessed.
func newTaskID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

func truncateMessage(s string) string {
	if len(s) <= maxStatusMessage {
		return s
	}
	s = s[:maxStatusMessage]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
