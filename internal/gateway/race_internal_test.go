//go:build race

package gateway

// raceEnabled: the race detector is on. Its sync.Pool drops what is put at
// random, so a spec that counts the allocations of pooled work counts
// them only without it.
const raceEnabled = true
