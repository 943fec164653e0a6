package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/toolplane/toolplane/test/harness"
)

// reportUnconverged prints what a run that did not converge can still
// tell: the manager's peak RSS, its Go heap and the CPU its GC took since
// it started, against its CPU time; with --pprof it saves a heap profile
// (heap-unconverged.pprof) into the work directory, which the run keeps.
// A manager short of memory for its GOMEMLIMIT converges slowly or never,
// and this is where it shows.
func reportUnconverged(ctx context.Context, mgr *harness.Manager, pprofAddr, workDir string) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if ps, err := harness.ReadProcStats(mgr.Pid()); err == nil {
		fams, _ := mgr.Metrics(ctx)
		fmt.Fprintf(os.Stderr, "unconverged: manager rss_mb=%.0f peak_rss_mb=%.0f heap_inuse_mb=%.0f cpu_s=%.1f gc_cpu_s=%.1f (the Go runtime's estimate)\n",
			float64(ps.RSS)/(1<<20), float64(ps.PeakRSS)/(1<<20), harness.Sum(fams, "go_memstats_heap_inuse_bytes", nil)/(1<<20),
			ps.CPU.Seconds(), harness.Sum(fams, "go_cpu_classes_gc_total_cpu_seconds_total", nil))
	}
	if pprofAddr != "" {
		if err := saveProfile(ctx, "http://"+pprofAddr+"/debug/pprof/heap", filepath.Join(workDir, "heap-unconverged.pprof")); err != nil {
			step("No heap profile: %v", err)
		}
	}
}
