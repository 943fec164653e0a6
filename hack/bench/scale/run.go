package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/controllers"
	"github.com/toolplane/toolplane/test/harness"
	"github.com/toolplane/toolplane/toolkit/spec"
)

const (
	tableNamespace = "toolplane-system"
	tableName      = "toolplane-tools"
	// createConcurrency is how many objects the bench creates at once; it
	// is not measured.
	createConcurrency = 32
)

type result struct {
	convergenceOnly       bool
	toolSets, tools       int
	convergence, baseline time.Duration
	writesSteady          float64
	writesByResource      map[string]float64
	cpuSteadyPct          float64
	// cpuSteady is the manager's CPU time over the steady window, and
	// steadyWindow that window as measured.
	cpuSteady, steadyWindow time.Duration
	gcSteadyPct             float64
	scrapesSteady           int
	rssMB                   float64
	// anonMB is the peak of the manager's anonymous memory, sampled
	// (harness.ProcStats.AnonRSS): rssMB less the binary's pages.
	anonMB float64
	table  harness.TableStats
	// ledger describes the chunks of the table's ledger, which readers do
	// not read: not in table.
	ledger harness.TableStats
	churn  *churnResult
}

// figureLine describes the run in one line: its size first, then the
// figures. The churn figures are left out when the run had no churn phase,
// and churn_unseen is there only when some change never showed.
func (r result) figureLine() string {
	if r.convergenceOnly {
		return fmt.Sprintf("toolsets=%d tools=%d convergence_ratio=%.2f convergence_s=%.1f baseline_s=%.1f",
			r.toolSets, r.tools, r.convergence.Seconds()/r.baseline.Seconds(), r.convergence.Seconds(), r.baseline.Seconds())
	}
	line := fmt.Sprintf("toolsets=%d tools=%d convergence_ratio=%.2f convergence_s=%.1f baseline_s=%.1f writes_steady=%d cpu_steady_pct=%.2f cpu_steady_pct_per_1k=%.2f rss_mb=%.0f rss_anon_mb=%.0f table_parts=%d table_max_part_kib=%.0f table_bytes=%d",
		r.toolSets, r.tools, r.convergence.Seconds()/r.baseline.Seconds(), r.convergence.Seconds(), r.baseline.Seconds(),
		int64(r.writesSteady), r.cpuSteadyPct, r.cpuSteadyPct*1000/float64(r.toolSets), r.rssMB, r.anonMB, r.table.Parts, float64(r.table.MaxPart)/1024, r.table.Bytes)
	line += fmt.Sprintf(" ledger_chunks=%d ledger_bytes=%d", r.ledger.Parts, r.ledger.Bytes)
	if ch := r.churn; ch != nil {
		line += fmt.Sprintf(" churn_changes=%d churn_p99_s=%.1f table_bytes_written_per_change=%d churn_gc_pct=%.1f",
			ch.changes, ch.p99.Seconds(), ch.tableBytes/int64(max(ch.changes, 1)), ch.gcPct)
		if ch.unseen > 0 {
			line += fmt.Sprintf(" churn_unseen=%d", ch.unseen)
		}
	}
	return line
}

func run(ctx context.Context, c config) (res result, retErr error) {
	res.toolSets, res.tools = c.toolSets, c.toolSets*c.tools
	cleanup, err := prepareWorkDir(&c)
	if err != nil {
		return res, err
	}
	defer func() {
		if retErr == nil {
			cleanup()
		} else {
			step("Kept %s (manager.log, kubeconfig)", c.workDir)
		}
	}()
	if c.manager, err = filepath.Abs(c.manager); err != nil {
		return res, err
	}

	step("Starting the control plane")
	cp, err := harness.StartControlPlane(filepath.Join("config", "crd", "bases"), c.workDir)
	if err != nil {
		return res, err
	}
	defer func() { retErr = errors.Join(retErr, cp.Stop()) }()
	if err := cp.CreateNamespace(ctx, tableNamespace); err != nil {
		return res, err
	}
	for k := range c.namespaces {
		if err := errors.Join(cp.CreateNamespace(ctx, benchNamespace(k)), cp.CreateNamespace(ctx, baselineNamespace(k))); err != nil {
			return res, err
		}
	}

	step("Spreading %d ToolSets over %d namespaces", c.toolSets, c.namespaces)
	step("Starting %d loopback workloads serving %d tool sets of %d tools", c.servers, c.toolSets, c.tools)
	wl := startWorkloads(c.toolSets, c.tools, c.servers, c.distinctSchemas)
	defer wl.close()

	step("Creating %d ready Pods", c.toolSets)
	if err := parallel(ctx, createConcurrency, c.toolSets, func(ctx context.Context, i int) error {
		port, _ := wl.target(i)
		_, err := harness.CreateReadyPod(ctx, cp.Client, benchNamespace(i%c.namespaces), fmt.Sprintf("set-%04d-0", i), app(i), port)
		return err
	}); err != nil {
		return res, err
	}

	// Production settings: the flags' defaults, with a leader elected as a
	// Deployment of the chart runs it.
	args := []string{"--leader-elect"}
	if c.partGrace != controllers.DefaultTablePartGracePeriod {
		args = append(args, "--table-part-grace-period", c.partGrace.String())
	}
	var pprofAddr string
	if c.pprof {
		if pprofAddr, err = harness.FreeAddr(); err != nil {
			return res, err
		}
		args = append(args, "--pprof-bind-address", pprofAddr)
	}
	memLimit, err := resolveGoMemLimit(c.goMemLimit)
	if err != nil {
		return res, err
	}
	var env []string
	if memLimit != "" {
		env = append(env, "GOMEMLIMIT="+memLimit)
	}
	if c.goGC != "" {
		env = append(env, "GOGC="+c.goGC)
	}
	step("The manager runs with %v %v", env, args)
	mgr := &harness.Manager{
		Bin: c.manager, Kubeconfig: cp.Kubeconfig, TableNamespace: tableNamespace,
		Args: args, Env: env, LogPath: filepath.Join(c.workDir, "manager.log"),
	}
	if c.concurrency == 0 {
		if c.concurrency, err = reconcileWorkers(ctx, mgr); err != nil {
			return res, err
		}
	}
	// The watcher's watches end before the manager and the control plane
	// stop, or the API server waits for them. It starts before the
	// baseline, so that the baseline's writes reach the same watches of
	// ToolSets as the manager's do: the watcher's, and one that stands for
	// the manager's informer (the API server sends every write to each).
	wctx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	w, err := newWatcher(wctx, cp)
	if err != nil {
		return res, err
	}
	step("Baseline: %d status writes to %d ToolSets at concurrency %d, before the manager runs, watched as the manager's are", c.toolSets, c.toolSets, c.concurrency)
	if res.baseline, err = baseline(ctx, cp, c); err != nil {
		return res, fmt.Errorf("baseline: %w", err)
	}
	step("Baseline took %s", res.baseline.Round(time.Millisecond))

	step("Starting the manager (%s, log %s)", c.manager, mgr.LogPath)
	if err := mgr.Start(ctx); err != nil {
		return res, err
	}
	defer func() { retErr = errors.Join(retErr, mgr.Stop(30*time.Second)) }()
	peakAnon := sampleAnonRSS(ctx, mgr.Pid())

	wBefore, err := cp.Writes(ctx)
	if err != nil {
		return res, err
	}
	step("Creating %d ToolSets", c.toolSets)
	var stopProfiling func() int
	if pprofAddr != "" {
		stopProfiling = profileWindows(ctx, pprofAddr, filepath.Join(c.workDir, "cpu-convergence"))
	}
	firstCreate := time.Now()
	if err := parallel(ctx, createConcurrency, c.toolSets, func(ctx context.Context, i int) error {
		_, path := wl.target(i)
		return cp.Client.Create(ctx, harness.NewToolSet(benchNamespace(i%c.namespaces), fmt.Sprintf("set-%04d", i), app(i), path, c.interval))
	}); err != nil {
		return res, err
	}
	lastCreated := time.Now()
	r0 := reconcileStatsOf(ctx, mgr)
	step("Created %d ToolSets in %s, %d at a time; convergence counts from the last create", c.toolSets, lastCreated.Sub(firstCreate).Round(time.Millisecond), createConcurrency)

	step("Waiting for %d tools in the table and %d ToolSets Ready", c.toolSets*c.tools, c.toolSets)
	converged, err := w.waitConverged(ctx, c, lastCreated, mgr)
	if err != nil {
		reportUnconverged(ctx, mgr, pprofAddr, c.workDir)
		return res, err
	}
	res.convergence = converged.Sub(lastCreated)
	step("Converged %s after the last ToolSet was created", res.convergence.Round(time.Millisecond))
	if err := checkBaseline(ctx, cp, c); err != nil {
		return res, err
	}
	if stopProfiling != nil {
		n := stopProfiling()
		step("Saved %d CPU profiles of a second each, from the first create until convergence: go tool pprof %s %s",
			n, c.manager, filepath.Join(c.workDir, "cpu-convergence-*.pprof"))
	}
	if pprofAddr != "" {
		// What convergence left live, to set against heap.pprof, taken
		// after churn.
		if err := saveProfile(ctx, "http://"+pprofAddr+"/debug/pprof/heap", filepath.Join(c.workDir, "heap-converged.pprof")); err != nil {
			return res, err
		}
	}
	wAfter, err := cp.Writes(ctx)
	if err != nil {
		return res, err
	}
	// The bench's own creates are writes to toolsets too.
	wAfter["toolsets"] -= float64(c.toolSets)
	fmt.Fprintf(os.Stderr, "convergence: writes_by_resource=%v (status writes per ToolSet: %.2f; the baseline makes 1)\n",
		delta(wBefore, wAfter), (wAfter["toolsets"]-wBefore["toolsets"])/float64(c.toolSets))
	if r1 := reconcileStatsOf(ctx, mgr); r1.count > 0 {
		n, busy := r1.count-r0.count, r1.seconds-r0.seconds
		fmt.Fprintf(os.Stderr, "convergence: from the last create, %.0f ToolSet reconciles of %.0f ms on average; the %d workers were busy %.0f%% of the time\n",
			n, 1000*busy/max(n, 1), c.concurrency, 100*busy/(float64(c.concurrency)*res.convergence.Seconds()))
	}

	if c.convergenceOnly {
		res.convergenceOnly = true
		return res, nil
	}

	// Let the last events and status writes of convergence land before the
	// window opens, and the old chunks of the table that convergence left go
	// after their grace period: those writes are convergence's, not steady
	// state's.
	settle := 5 * time.Second
	step("Steady state: settling (%s without a table write, the old chunks of the table removed, every ToolSet's %d tools Published in its status), then 3 intervals of %s", settle, c.tools, c.interval)
	if err := sleep(ctx, settle); err != nil {
		return res, err
	}
	if err := w.waitAtRest(ctx, settle, c.partGrace+2*time.Minute, c.tools, mgr); err != nil {
		return res, err
	}
	if err := steady(ctx, c, cp, mgr, wl, pprofAddr, &res); err != nil {
		return res, err
	}
	fmt.Fprintf(os.Stderr, "steady: scrapes=%d (want about %d) writes_by_resource=%v cpu_s=%.2f over %s cpu_pct=%.2f, of which the Go GC about %.2f\n",
		res.scrapesSteady, 3*c.toolSets, res.writesByResource, res.cpuSteady.Seconds(), res.steadyWindow.Round(time.Millisecond), res.cpuSteadyPct, res.gcSteadyPct)

	if c.churnIntervals > 0 {
		ch, err := churn(ctx, c, cp, mgr, wl, w)
		if err != nil {
			return res, fmt.Errorf("churn: %w", err)
		}
		res.churn = &ch
	}

	ps, err := harness.ReadProcStats(mgr.Pid())
	if err != nil {
		return res, err
	}
	res.rssMB = float64(ps.PeakRSS) / (1 << 20)
	res.anonMB = float64(max(peakAnon(), ps.AnonRSS)) / (1 << 20)
	if pprofAddr != "" {
		if err := saveProfile(ctx, "http://"+pprofAddr+"/debug/pprof/heap", filepath.Join(c.workDir, "heap.pprof")); err != nil {
			return res, err
		}
	}
	t, st, err := harness.ReadTable(ctx, cp.Client, tableNamespace, tableName)
	if err != nil {
		return res, fmt.Errorf("reading the table: %w", err)
	}
	res.table = st
	cms, err := w.tableConfigMaps(ctx)
	if err != nil {
		return res, err
	}
	for _, cm := range cms {
		if isLedgerChunk(&cm) {
			n := spec.TablePart{Data: cm.Data, BinaryData: cm.BinaryData}.StoredSize()
			res.ledger.Parts++
			res.ledger.Bytes += n
			res.ledger.MaxPart = max(res.ledger.MaxPart, n)
		}
	}
	fmt.Fprintf(os.Stderr, "table: tools=%d bytes=%d parts=%d max_part_bytes=%d; ledger: chunks=%d bytes=%d max_chunk_bytes=%d\n",
		len(t.Tools), st.Bytes, st.Parts, st.MaxPart, res.ledger.Parts, res.ledger.Bytes, res.ledger.MaxPart)
	return res, nil
}

func steady(ctx context.Context, c config, cp *harness.ControlPlane, mgr *harness.Manager, wl *workloads, pprofAddr string, res *result) error {
	w0, err := cp.Writes(ctx)
	if err != nil {
		return err
	}
	p0, err := harness.ReadProcStats(mgr.Pid())
	if err != nil {
		return err
	}
	gc0 := gcCPU(ctx, mgr)
	s0, t0 := wl.scrapes(), time.Now()
	window := 3 * c.interval
	if pprofAddr != "" {
		url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", pprofAddr, int(window.Seconds()))
		if err := saveProfile(ctx, url, filepath.Join(c.workDir, "cpu-steady.pprof")); err != nil {
			return err
		}
	} else if err := sleep(ctx, window); err != nil {
		return err
	}
	w1, err := cp.Writes(ctx)
	if err != nil {
		return err
	}
	p1, err := harness.ReadProcStats(mgr.Pid())
	if err != nil {
		return err
	}
	elapsed := time.Since(t0)
	res.scrapesSteady = wl.scrapes() - s0
	var gaps []time.Duration
	for _, set := range wl.sets {
		gaps = append(gaps, set.Gaps(t0, t0.Add(elapsed))...)
	}
	if len(gaps) > 0 {
		slices.Sort(gaps)
		fmt.Fprintf(os.Stderr, "steady: time between a workload's scrapes: min=%s p50=%s max=%s (interval %s, jittered up to a tenth early)\n",
			gaps[0].Round(time.Millisecond), gaps[len(gaps)/2].Round(time.Millisecond), gaps[len(gaps)-1].Round(time.Millisecond), c.interval)
	}
	res.cpuSteady, res.steadyWindow = p1.CPU-p0.CPU, elapsed
	res.cpuSteadyPct = 100 * res.cpuSteady.Seconds() / elapsed.Seconds()
	res.gcSteadyPct = 100 * (gcCPU(ctx, mgr) - gc0) / elapsed.Seconds()
	res.writesByResource = delta(w0, w1)
	for _, d := range res.writesByResource {
		res.writesSteady += d
	}
	if exited, err := mgr.Exited(); exited {
		return fmt.Errorf("the manager exited during steady state: %w", err)
	}
	return nil
}

// gcCPU returns the CPU seconds the manager's Go runtime has spent on
// garbage collection so far, as its metrics estimate them
// (/cpu/classes/gc/total:cpu-seconds, updated at each collection); 0 if it
// cannot be read. A manager short of memory for its GOMEMLIMIT spends its
// CPU here.
func gcCPU(ctx context.Context, mgr *harness.Manager) float64 {
	fams, err := mgr.Metrics(ctx)
	if err != nil {
		return 0
	}
	return harness.Sum(fams, "go_cpu_classes_gc_total_cpu_seconds_total", nil)
}

// reconcileStats are the ToolSet reconciles the manager has made so far,
// and the seconds they took together, from controller-runtime's
// histogram; zero if its metrics cannot be read.
type reconcileStats struct{ count, seconds float64 }

func reconcileStatsOf(ctx context.Context, mgr *harness.Manager) reconcileStats {
	fams, err := mgr.Metrics(ctx)
	if err != nil {
		return reconcileStats{}
	}
	var st reconcileStats
	if fam := fams["controller_runtime_reconcile_time_seconds"]; fam != nil {
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "toolset" {
					st.count += float64(m.GetHistogram().GetSampleCount())
					st.seconds += m.GetHistogram().GetSampleSum()
				}
			}
		}
	}
	return st
}

// reconcileWorkers starts the manager on the empty cluster just long enough
// to read how many ToolSets it reconciles at once, from controller-runtime's
// own gauge, and stops it: the baseline runs at that concurrency, with no
// manager competing.
func reconcileWorkers(ctx context.Context, mgr *harness.Manager) (n int, retErr error) {
	step("Reading the manager's reconcile workers from its metrics")
	if err := mgr.Start(ctx); err != nil {
		return 0, err
	}
	defer func() { retErr = errors.Join(retErr, mgr.Stop(30*time.Second)) }()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		fams, err := mgr.Metrics(ctx)
		if err != nil {
			return 0, err
		}
		if w := harness.Sum(fams, "controller_runtime_max_concurrent_reconciles", map[string]string{"controller": "toolset"}); w > 0 {
			return int(w), nil
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return 0, fmt.Errorf("the manager shows no controller_runtime_max_concurrent_reconciles for controller toolset: %w", err)
		}
	}
}

// baseline creates as many ToolSets as the run has, in namespaces of their
// own, and times a plain client-go loop that writes each one's status once,
// with the status a Ready ToolSet of this run carries. The ToolSets are
// deleted before the manager starts.
//
// Each write goes to the same watches of ToolSets as during convergence:
// the bench's watcher, which runs already, and an informer of every
// ToolSet that stands for the manager's, run while the loop runs.
func baseline(ctx context.Context, cp *harness.ControlPlane, c config) (time.Duration, error) {
	if err := parallel(ctx, createConcurrency, c.toolSets, func(ctx context.Context, i int) error {
		return cp.Client.Create(ctx, harness.NewToolSet(baselineNamespace(i%c.namespaces), fmt.Sprintf("set-%04d", i), app(i), setPath(i), c.interval))
	}); err != nil {
		return 0, err
	}
	mctx, stopManagerWatch := context.WithCancel(ctx)
	defer stopManagerWatch()
	if err := watchToolSets(mctx, cp); err != nil {
		return 0, fmt.Errorf("the watch that stands for the manager's: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		return 0, err
	}
	gvr := schema.GroupVersionResource{Group: v1alpha1.GroupVersion.Group, Version: v1alpha1.GroupVersion.Version, Resource: "toolsets"}
	patches := make([][]byte, c.toolSets)
	for i := range patches {
		if patches[i], err = readyStatusPatch(i, c.tools); err != nil {
			return 0, err
		}
	}
	start := time.Now()
	if err := parallel(ctx, c.concurrency, c.toolSets, func(ctx context.Context, i int) error {
		_, err := dyn.Resource(gvr).Namespace(baselineNamespace(i%c.namespaces)).
			Patch(ctx, fmt.Sprintf("set-%04d", i), types.MergePatchType, patches[i], metav1.PatchOptions{}, "status")
		return err
	}); err != nil {
		return 0, err
	}
	took := time.Since(start)
	for k := range c.namespaces {
		if err := cp.Client.DeleteAllOf(ctx, &v1alpha1.ToolSet{}, client.InNamespace(baselineNamespace(k))); err != nil {
			return 0, err
		}
	}
	return took, nil
}

// readyStatus is the status the manager writes for the run's ToolSet i,
// Ready with its tools published, but for its revision's digest and the
// conditions' transition times: what the baseline writes, so that each of
// its writes costs the API server what one of the manager's does (its
// size, the conditions' CEL rules, the managed fields). checkBaseline
// holds it to the manager's.
func readyStatus(i, tools int) v1alpha1.ToolSetStatus {
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	st := v1alpha1.ToolSetStatus{
		ObservedGeneration: 1,
		Pods:               v1alpha1.PodCounts{Selected: 1, Scraped: 1},
		Revision:           "sha256:" + fmt.Sprintf("%064x", i),
		PublishedTools:     int32(tools),
	}
	for _, cond := range []metav1.Condition{
		{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonPublished, Message: fmt.Sprintf("%d tools published from 1 Pod", tools)},
		{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonHealthy, Message: "every selected Pod was scraped and every tool is valid"},
		{Type: v1alpha1.ConditionStale, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonHealthy, Message: "no tool is held through an outage"},
		{Type: v1alpha1.ConditionClamped, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonWithinCeilings, Message: "the spec asks for nothing beyond the admin ceilings"},
		{Type: v1alpha1.ConditionConflicted, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonNoConflict, Message: "this ToolSet owns every name it exposes"},
		{Type: v1alpha1.ConditionStalled, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonHealthy, Message: "nothing waits for a change by the user"},
		{Type: v1alpha1.ConditionReconciling, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonHealthy, Message: "the ToolSet is where its spec and its Pods put it"},
	} {
		cond.ObservedGeneration, cond.LastTransitionTime = 1, now
		st.Conditions = append(st.Conditions, cond)
	}
	for j := range tools {
		st.Tools = append(st.Tools, v1alpha1.ToolStatus{Name: toolName(i, j), SourceName: toolName(i, j), State: v1alpha1.ToolPublished})
	}
	return st
}

func readyStatusPatch(i, tools int) ([]byte, error) {
	return json.Marshal(map[string]any{"status": readyStatus(i, tools)})
}

// checkBaseline compares the status the manager wrote for one of the run's
// ToolSets with the one the baseline wrote for it (readyStatus), its
// revision's digest and the transition times left out: a manager that
// writes more, or less, than the baseline is not measured against the
// same writes, and the run says so rather than give a ratio.
func checkBaseline(ctx context.Context, cp *harness.ControlPlane, c config) error {
	var ts v1alpha1.ToolSet
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: benchNamespace(0), Name: "set-0000"}, &ts); err != nil {
		return err
	}
	return compareBaseline(ts.Status, readyStatus(0, c.tools))
}

// compareBaseline is checkBaseline's verdict on the status the manager
// wrote, got, against the baseline's, want.
func compareBaseline(got, want v1alpha1.ToolSetStatus) error {
	got, want = *got.DeepCopy(), *want.DeepCopy()
	if !strings.HasPrefix(got.Revision, "sha256:") || len(got.Revision) != len(want.Revision) {
		return fmt.Errorf("the baseline writes a revision of %d bytes, the manager wrote %q", len(want.Revision), got.Revision)
	}
	got.Revision = want.Revision
	for i := range got.Conditions {
		got.Conditions[i].LastTransitionTime = metav1.Time{}
	}
	for i := range want.Conditions {
		want.Conditions[i].LastTransitionTime = metav1.Time{}
	}
	if !equality.Semantic.DeepEqual(got, want) {
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		return fmt.Errorf("the baseline writes a status the manager does not (update readyStatus):\nmanager:  %s\nbaseline: %s", g, w)
	}
	return nil
}

// hasAllTools reports whether t holds exactly the run's tools, each
// published for its own ToolSet.
func hasAllTools(t *spec.Table, c config) bool {
	if len(t.Tools) != c.toolSets*c.tools {
		return false
	}
	byName := make(map[string]spec.TableTool, len(t.Tools))
	for _, tt := range t.Tools {
		byName[tt.Name] = tt
	}
	for i := range c.toolSets {
		for j := range c.tools {
			tt, ok := byName[toolName(i, j)]
			if !ok || tt.ToolSet.Name != fmt.Sprintf("set-%04d", i) || tt.ToolSet.Namespace != benchNamespace(i%c.namespaces) {
				return false
			}
		}
	}
	return true
}

// delta returns the counts that grew from before to after.
func delta(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for r, n := range after {
		if d := n - before[r]; d > 0 {
			out[r] = d
		}
	}
	return out
}

// benchNamespacePrefix begins the name of every namespace of the bench's
// ToolSets; the baseline's begin otherwise.
const benchNamespacePrefix = "bench-"

func benchNamespace(k int) string    { return fmt.Sprintf(benchNamespacePrefix+"%02d", k) }
func baselineNamespace(k int) string { return fmt.Sprintf("baseline-%02d", k) }
func app(i int) string               { return fmt.Sprintf("set-%04d", i) }

// parallel runs fn(0..n-1) with at most limit in flight, and stops at the
// first error.
func parallel(ctx context.Context, limit, n int, fn func(ctx context.Context, i int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(limit)
	for i := range n {
		g.Go(func() error { return fn(ctx, i) })
	}
	return g.Wait()
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// watchToolSets starts an informer of every ToolSet, as the manager's
// cache has, and waits until it has synced; it runs until ctx ends.
func watchToolSets(ctx context.Context, cp *harness.ControlPlane) error {
	ca, err := cache.New(cp.Config, cache.Options{Scheme: cp.Scheme})
	if err != nil {
		return err
	}
	if _, err := ca.GetInformer(ctx, &v1alpha1.ToolSet{}); err != nil {
		return err
	}
	go func() { _ = ca.Start(ctx) }()
	if !ca.WaitForCacheSync(ctx) {
		return errors.New("the cache did not sync")
	}
	return nil
}

// profileWindows takes CPU profiles of the manager at addr, one second
// each, one after another, into prefix-NNN.pprof, until the returned stop
// is called; stop waits for the window in flight and returns how many
// were saved. go tool pprof merges them.
func profileWindows(ctx context.Context, addr, prefix string) (stop func() int) {
	done := make(chan struct{})
	saved := make(chan int, 1)
	go func() {
		n := 0
		for {
			select {
			case <-done:
				saved <- n
				return
			default:
			}
			path := fmt.Sprintf("%s-%03d.pprof", prefix, n)
			if err := saveProfileQuietly(ctx, "http://"+addr+"/debug/pprof/profile?seconds=1", path); err != nil {
				step("WARNING: profiling convergence: %v", err)
				<-done
				saved <- n
				return
			}
			n++
		}
	}()
	return func() int {
		close(done)
		return <-saved
	}
}

func saveProfile(ctx context.Context, url, path string) error {
	if err := saveProfileQuietly(ctx, url, path); err != nil {
		return err
	}
	step("Saved %s", path)
	return nil
}

func saveProfileQuietly(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("profiling the manager: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profiling the manager: %s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// sampleAnonRSS reads the process's anonymous RSS every 100 ms until ctx
// ends, and returns a function that reports the largest read so far. The
// kernel keeps a high-water mark of the whole RSS only (VmHWM), which holds
// the binary's pages too: some 45 MiB of the manager's, which under a
// memory limit are dropped and read again rather than the container
// killed.
func sampleAnonRSS(ctx context.Context, pid int) func() int64 {
	var peak atomic.Int64
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if ps, err := harness.ReadProcStats(pid); err == nil && ps.AnonRSS > peak.Load() {
				peak.Store(ps.AnonRSS)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return peak.Load
}
