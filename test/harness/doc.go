// Package harness runs toolplane the way production does, for the scale
// benchmark and the fault, restart and attack suites: a real kube-apiserver and etcd
// (envtest), the real manager binary in a process of its own (so that its
// CPU and memory can be read from /proc and a crash shows as an exit), Pods
// that point at loopback workloads, and readers for the tool table and the
// API server's write counters.
package harness
