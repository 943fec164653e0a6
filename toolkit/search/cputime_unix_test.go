//go:build unix

package search

import "syscall"

// cpuTime is the CPU time the process has used, user and system, in
// nanoseconds: on a machine shared with other work, cpu-ns/op says what an
// operation costs where ns/op also counts the time it waited for a core.
func cpuTime() int64 {
	var r syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &r) != nil {
		return 0
	}
	return r.Utime.Nano() + r.Stime.Nano()
}
