//go:build !unix

package search

func cpuTime() int64 { return 0 }
