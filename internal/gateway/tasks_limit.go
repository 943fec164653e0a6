package gateway

import (
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// refusedTasks is the refused metric's reason for a task over its
// caller's bound.
const refusedTasks = "tasks_per_caller"

// maxLiveTasks bounds the tasks one replica counts, all callers together:
// past it, new tasks are refused until some end or expire.
// Each entry holds its task's id (under 1.5 KiB: tasks_seal.go's bounds),
// for reclaim.
const maxLiveTasks = 1 << 14

// taskLedger counts the tasks each caller has running through this
// replica: an entry from the moment a task is asked for (a reservation)
// until the replica sees it end, or its id expires.
type taskLedger struct {
	mu       sync.Mutex
	byCaller map[string]int
	live     map[[16]byte]liveTask
	sweepAt  time.Time
}

type liveTask struct {
	caller string
	id     string // "" for a reservation
	exp    time.Time
}

func newTaskLedger() *taskLedger {
	return &taskLedger{byCaller: map[string]int{}, live: map[[16]byte]liveTask{}}
}

func taskDigest(id string) [16]byte {
	sum := sha256.Sum256([]byte(id))
	var d [16]byte
	copy(d[:], sum[:16])
	return d
}

// reserve takes one of caller's n places, or says why it cannot. A
// reservation lasts a call timeout at most, were it neither committed
// nor cancelled.
func (l *taskLedger) reserve(caller string, n int, now time.Time) (slot [16]byte, full bool, why string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweepLocked(now, caller)
	if l.byCaller[caller] >= n {
		return slot, true, fmt.Sprintf("you have %d tasks running through this gateway replica, its limit per caller; wait for one to end, or cancel one, then retry", n)
	}
	if len(l.live) >= maxLiveTasks {
		return slot, false, "the gateway replica holds as many tasks as it may; retry later"
	}
	_, _ = rand.Read(slot[:])
	l.live[slot] = liveTask{caller: caller, exp: now.Add(time.Hour)}
	l.byCaller[caller]++
	return slot, false, ""
}

// commit turns a reservation into the task id, counted until exp.
func (l *taskLedger) commit(caller string, slot [16]byte, id string, exp time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.live[slot]; !ok {
		return
	}
	delete(l.live, slot)
	l.live[taskDigest(id)] = liveTask{caller: caller, id: id, exp: exp}
}

// ids are the ids of caller's counted tasks.
func (l *taskLedger) ids(caller string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, t := range l.live {
		if t.caller == caller && t.id != "" {
			out = append(out, t.id)
		}
	}
	return out
}

// cancel gives a reservation back.
func (l *taskLedger) cancel(caller string, slot [16]byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dropLocked(slot)
}

// done notes that the task id has ended: its caller's place is free.
func (l *taskLedger) done(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dropLocked(taskDigest(id))
}

func (l *taskLedger) dropLocked(d [16]byte) {
	t, ok := l.live[d]
	if !ok {
		return
	}
	delete(l.live, d)
	if l.byCaller[t.caller]--; l.byCaller[t.caller] <= 0 {
		delete(l.byCaller, t.caller)
	}
}

// sweepLocked drops the expired entries: all of them at most once a
// minute (or when the ledger is full), else none. A caller at its bound
// gets a sweep of its own entries.
func (l *taskLedger) sweepLocked(now time.Time, caller string) {
	full := len(l.live) >= maxLiveTasks
	mine := l.byCaller[caller] > 0
	if !full && !mine && now.Before(l.sweepAt) {
		return
	}
	all := full || !now.Before(l.sweepAt)
	for d, t := range l.live {
		if (all || t.caller == caller) && !now.Before(t.exp) {
			l.dropLocked(d)
		}
	}
	if all {
		l.sweepAt = now.Add(time.Minute)
	}
}

// Each caller's tasks/* requests through one replica are bounded: each
// costs a request to a backend, and a client that polls in a loop would
// otherwise make the gateway one's amplifier. The bound lets every task
// the caller may have be polled twice a second; a well-behaved client
// polls at the task's pollInterval, which the gateway raises to
// minPollInterval.
const (
	taskRequestsPerTaskPerMinute = 120
	minTaskRequestsPerMinute     = 1200
	minPollInterval              = 500 // ms
	maxTaskRequestBuckets        = 1 << 14
)

// taskRequestsPerMinute is the bound of a caller's tasks/* requests.
func (g *Gateway) taskRequestsPerMinute() int {
	return max(minTaskRequestsPerMinute, g.opts.MaxTasksPerCaller*taskRequestsPerTaskPerMinute)
}

// initTasks sets up the tasks of New.
func (g *Gateway) initTasks(o *Options) error {
	g.tasks = newTaskLedger()
	g.taskLimits = newCallLimits(maxTaskRequestBuckets)
	var err error
	g.taskSealer, err = newTaskSealer(o.TaskKey)
	g.taskOps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolplane_gateway_task_requests_total",
		Help: "tasks/get, tasks/result, tasks/cancel and tasks/list requests by method and outcome (ok, tool_error for a backend's own error, not_found, not_served, and the call outcomes: unreachable, timeout, busy, bad_reply, circuit_open, credentials, auth_error).",
	}, []string{"method", "outcome"})
	if o.Registerer != nil {
		o.Registerer.MustRegister(g.taskOps)
	}
	return err
}
