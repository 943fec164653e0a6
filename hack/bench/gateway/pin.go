package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// cpuPlan is where --pin puts the bench's processes: the generator (this
// process) and the workload on one CPU, the gateway replicas on another.
type cpuPlan struct{ client, gateway int }

// planCPUs picks the first two CPUs this process may run on.
func planCPUs() (cpuPlan, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return cpuPlan{}, fmt.Errorf("reading this process's CPU affinity: %w", err)
	}
	var cpus []int
	for i := 0; i < 1024 && len(cpus) < 2; i++ {
		if set.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	if len(cpus) < 2 {
		return cpuPlan{}, errors.New("--pin needs two CPUs, and this process may run on one")
	}
	return cpuPlan{client: cpus[0], gateway: cpus[1]}, nil
}

// pin binds every thread of process pid (0: this one) to cpu. A thread
// that Linux starts later inherits the mask of the thread that starts it,
// and a child process that of its parent; a thread started while the
// threads are walked may have been missed, so they are walked until a
// walk finds every one bound.
func pin(pid, cpu int) error {
	dir := "/proc/self/task"
	if pid != 0 {
		dir = "/proc/" + strconv.Itoa(pid) + "/task"
	}
	var want unix.CPUSet
	want.Set(cpu)
	for range 10 {
		tasks, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("pinning %s to CPU %d: %w", dir, cpu, err)
		}
		changed := false
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			var got unix.CPUSet
			if unix.SchedGetaffinity(tid, &got) == nil && got == want {
				continue
			}
			if err := unix.SchedSetaffinity(tid, &want); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("pinning thread %d of %s to CPU %d: %w", tid, dir, cpu, err)
			}
			changed = true
		}
		if !changed {
			return nil
		}
	}
	return fmt.Errorf("pinning %s to CPU %d: its threads kept changing", dir, cpu)
}
