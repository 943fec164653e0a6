package harness

import (
	"syscall"
	"testing"
	"time"
)

// CPUPerOp reports, when the returned func is called after the benchmark's
// loop, the process's CPU time per op as cpu-ns/op: on a shared machine the
// wall time an op takes follows the other loads, the CPU time it costs
// much less. The process's, so that the garbage collection an op causes
// counts too.
func CPUPerOp(b *testing.B) func() {
	b.Helper()
	start := CPUTime()
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64((CPUTime()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
		}
	}
}

// CPUTime returns the CPU time the process has used, user and system.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
