package main

import (
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/toolplane/toolplane/test/harness"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// churnShare is the share of the workloads that change one tool in each
// interval of the churn phase: one in churnShare.
const churnShare = 10

// churnResult holds the figures of the churn phase.
type churnResult struct {
	changes, unseen int
	p50, p99, max   time.Duration
	// tableBytes is the stored payload of every write of the table's
	// ConfigMaps during the phase.
	tableBytes int64
	// gcPct is the Go GC's share of a core in the manager over the phase,
	// as the runtime estimates it.
	gcPct float64
}

// change is one tool's description changed in a workload.
type change struct {
	set, tool, seq int
	made, seen     time.Time
}

// churnTracker records the changes made and when the table first showed
// each of them.
type churnTracker struct {
	mu      sync.Mutex
	changes []change
	// pending are the changes not seen yet, by published tool name.
	pending map[string][]int
	unseen  int
}

func (ct *churnTracker) add(set, tool, seq int) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.pending == nil {
		ct.pending = map[string][]int{}
	}
	name := toolName(set, tool)
	ct.pending[name] = append(ct.pending[name], len(ct.changes))
	ct.changes = append(ct.changes, change{set: set, tool: tool, seq: seq, made: time.Now()})
	ct.unseen++
}

// observe marks as seen at at every pending change that t shows: a tool
// whose description carries a change's sequence number, or a later one of
// the same tool, shows it.
func (ct *churnTracker) observe(t *spec.Table, at time.Time) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if len(ct.pending) == 0 {
		return
	}
	for _, tt := range t.Tools {
		idxs, ok := ct.pending[tt.Name]
		if !ok {
			continue
		}
		shown := churnSeq(tt.Description)
		keep := idxs[:0]
		for _, i := range idxs {
			if ct.changes[i].seq <= shown {
				ct.changes[i].seen = later(at, ct.changes[i].made)
				ct.unseen--
			} else {
				keep = append(keep, i)
			}
		}
		if len(keep) == 0 {
			delete(ct.pending, tt.Name)
		} else {
			ct.pending[tt.Name] = keep
		}
	}
}

func (ct *churnTracker) remaining() int {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	return ct.unseen
}

// latencies returns how long each change took to show, sorted, counting a
// change never seen as the time until now, and the last time one was seen.
func (ct *churnTracker) latencies() (lat []time.Duration, lastSeen time.Time) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	now := time.Now()
	for _, c := range ct.changes {
		if c.seen.IsZero() {
			lat = append(lat, now.Sub(c.made))
			continue
		}
		lat = append(lat, c.seen.Sub(c.made))
		lastSeen = later(lastSeen, c.seen)
	}
	slices.Sort(lat)
	return lat, lastSeen
}

// slowest returns the n changes that took longest to show.
func (ct *churnTracker) slowest(n int) []change {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	out := slices.Clone(ct.changes)
	now := time.Now()
	took := func(c change) time.Duration {
		if c.seen.IsZero() {
			return now.Sub(c.made)
		}
		return c.seen.Sub(c.made)
	}
	slices.SortFunc(out, func(a, b change) int { return int(took(b) - took(a)) })
	return out[:min(n, len(out))]
}

// churnDescription is the description of a tool after change seq.
func churnDescription(base string, seq int) string { return fmt.Sprintf("%s Churn %d.", base, seq) }

// churnSeq returns the sequence number of the last change a description
// carries, or 0.
func churnSeq(d string) int {
	i := strings.LastIndex(d, " Churn ")
	if i < 0 || !strings.HasSuffix(d, ".") {
		return 0
	}
	n, err := strconv.Atoi(d[i+len(" Churn ") : len(d)-1])
	if err != nil {
		return 0
	}
	return n
}

// percentile returns the p-th percentile (nearest rank) of sorted.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	k := max(int(math.Ceil(p/100*float64(len(sorted))))-1, 0)
	return sorted[min(k, len(sorted)-1)]
}

// churn runs the churn phase: for c.churnIntervals intervals, one in
// churnShare of the workloads changes one tool's description, the changes
// spread evenly over the interval, and a rotating selection: in interval r
// the sets i with i%churnShare == r%churnShare change their tool
// r%c.tools. It measures how long each change takes to show in the table
// as the watcher sees it, and the bytes written to the table's ConfigMaps
// from the first change until the writes they caused are over: the
// removal of old chunks one grace period later included.
func churn(ctx context.Context, c config, cp *harness.ControlPlane, mgr *harness.Manager, wl *workloads, w *watcher) (churnResult, error) {
	var res churnResult
	step("Churn: waiting for the table to be at rest")
	if err := w.waitAtRest(ctx, 5*time.Second, c.partGrace+2*time.Minute, 0, mgr); err != nil {
		return res, err
	}

	tr := &churnTracker{}
	octx, stopObserving := context.WithCancel(ctx)
	defer stopObserving()
	observed := make(chan decodeStats, 1)
	go func() { observed <- w.observe(octx, tr.observe) }()

	tw0 := w.tableWrites()
	a0, err := cp.Writes(ctx)
	if err != nil {
		return res, err
	}
	b0, err := cp.WriteBytes(ctx)
	if err != nil {
		return res, err
	}
	p0, err := harness.ReadProcStats(mgr.Pid())
	if err != nil {
		return res, err
	}
	self0, gc0 := selfCPU(), gcCPU(ctx, mgr)
	start := time.Now()

	step("Churn: %d intervals of %s, 1 in %d workloads changing a tool in each", c.churnIntervals, c.interval, churnShare)
	seq := 0
	for r := range c.churnIntervals {
		var sets []int
		for i := range c.toolSets {
			if i%churnShare == r%churnShare {
				sets = append(sets, i)
			}
		}
		from := start.Add(time.Duration(r) * c.interval)
		for m, i := range sets {
			if err := sleep(ctx, time.Until(from.Add(c.interval*time.Duration(m)/time.Duration(len(sets))))); err != nil {
				return res, err
			}
			seq++
			j := r % c.tools
			tr.add(i, j, seq)
			wl.changeTool(i, j, seq)
		}
		if exited, err := mgr.Exited(); exited {
			return res, fmt.Errorf("the manager exited during churn: %w (log: %s)", err, mgr.LogPath)
		}
	}
	madeUntil := start.Add(time.Duration(c.churnIntervals) * c.interval)
	if err := sleep(ctx, time.Until(madeUntil)); err != nil {
		return res, err
	}

	step("Churn: %d changes made; waiting up to %s for the table to show the %d not shown yet", seq, c.churnTimeout, tr.remaining())
	deadline := time.Now().Add(c.churnTimeout)
	for tr.remaining() > 0 && time.Now().Before(deadline) {
		if exited, err := mgr.Exited(); exited {
			return res, fmt.Errorf("the manager exited during churn: %w (log: %s)", err, mgr.LogPath)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return res, err
		}
	}
	lat, lastSeen := tr.latencies()
	twSeen := w.tableWrites()
	res.changes, res.unseen = len(lat), tr.remaining()
	res.p50, res.p99, res.max = percentile(lat, 50), percentile(lat, 99), percentile(lat, 100)

	// The old chunks a change leaves are removed one grace period after the
	// index stopped naming them: writes the changes caused, so they count.
	gcFrom := later(lastSeen, madeUntil)
	step("Churn: waiting until one grace period (%s) after the last change showed, and for the table to be at rest", c.partGrace)
	if err := sleep(ctx, time.Until(gcFrom.Add(c.partGrace))); err != nil {
		return res, err
	}
	if err := w.waitAtRest(ctx, 5*time.Second, 2*time.Minute, 0, mgr); err != nil {
		return res, err
	}
	stopObserving()
	dec := <-observed

	tw1 := w.tableWrites()
	a1, err := cp.Writes(ctx)
	if err != nil {
		return res, err
	}
	b1, err := cp.WriteBytes(ctx)
	if err != nil {
		return res, err
	}
	p1, err := harness.ReadProcStats(mgr.Pid())
	if err != nil {
		return res, err
	}
	elapsed := time.Since(start)
	res.tableBytes = tw1.bytes - tw0.bytes

	fmt.Fprintf(os.Stderr, "churn: changes=%d unseen=%d p50_s=%.2f p99_s=%.2f max_s=%.2f (target for p99: interval + 3 s = %.0f s)\n",
		res.changes, res.unseen, res.p50.Seconds(), res.p99.Seconds(), res.max.Seconds(), (c.interval + 3*time.Second).Seconds())
	for _, s := range tr.slowest(5) {
		seen := "never"
		if !s.seen.IsZero() {
			seen = s.seen.UTC().Format("15:04:05.000") + fmt.Sprintf(" (%.2f s)", s.seen.Sub(s.made).Seconds())
		}
		fmt.Fprintf(os.Stderr, "churn: slow: %s/set-%04d tool %s change %d made %s, shown %s\n",
			benchNamespace(s.set%c.namespaces), s.set, toolName(s.set, s.tool), s.seq, s.made.UTC().Format("15:04:05.000"), seen)
	}
	fmt.Fprintf(os.Stderr, "churn: over %s: writes_by_resource=%v\n", elapsed.Round(time.Second), delta(a0, a1))
	fmt.Fprintf(os.Stderr, "churn: table ConfigMaps as the watch saw them: %d writes of %d bytes (%d per change), %d deletes; the API server's request bodies for configmaps: %.0f bytes\n",
		tw1.writes-tw0.writes, res.tableBytes, res.tableBytes/int64(max(res.changes, 1)), tw1.deletes-tw0.deletes, b1["configmaps"]-b0["configmaps"])
	fmt.Fprintf(os.Stderr, "churn: of those, after every change showed (mostly the removal of old chunks past their grace): %d writes of %d bytes, %d deletes\n",
		tw1.writes-twSeen.writes, tw1.bytes-twSeen.bytes, tw1.deletes-twSeen.deletes)
	for _, name := range slices.Sorted(maps.Keys(tw1.byName)) {
		if d := tw1.byName[name].writes - tw0.byName[name].writes; d > 0 {
			fmt.Fprintf(os.Stderr, "churn: table ConfigMap %s: %d writes of %d bytes\n", name, d, tw1.byName[name].bytes-tw0.byName[name].bytes)
		}
	}
	res.gcPct = 100 * (gcCPU(ctx, mgr) - gc0) / elapsed.Seconds()
	fmt.Fprintf(os.Stderr, "churn: manager cpu_pct=%.2f, of which the Go GC about %.2f; this process (workloads and watcher) cpu_pct=%.2f, of which decoding the table %d times (%d torn) took %s\n",
		100*(p1.CPU-p0.CPU).Seconds()/elapsed.Seconds(), res.gcPct,
		100*(selfCPU()-self0).Seconds()/elapsed.Seconds(), dec.decodes, dec.failed, dec.took.Round(time.Millisecond))
	return res, nil
}

// selfCPU returns the CPU time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
