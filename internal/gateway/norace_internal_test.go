//go:build !race

package gateway

// raceEnabled: the race detector is off (see race_internal_test.go).
const raceEnabled = false
