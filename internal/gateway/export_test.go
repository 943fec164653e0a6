package gateway

import "time"

// SetParkTimeout sets how long a parked call waits for its client's
// answer, for a test, and returns the function that restores it.
func SetParkTimeout(d time.Duration) (restore func()) {
	old := parkTimeout
	parkTimeout = d
	return func() { parkTimeout = old }
}

// SetFastCall turns g's fast path of tools/call on or off, for the tests
// that compare it with the SDK; call it before g serves.
func SetFastCall(g *Gateway, on bool) { g.noFastCall.Store(!on) }

// FastCalls returns how many calls g's fast path answered.
func FastCalls(g *Gateway) int64 { return g.fastCalls.Load() }
