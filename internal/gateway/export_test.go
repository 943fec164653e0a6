package gateway

import (
	"bytes"
	"time"
)

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

// ScribbleOnAPooledAnswer takes an answer buffer from the pool, as the
// next fast call would, writes over every byte it holds, and gives it
// back.
func ScribbleOnAPooledAnswer() {
	ab := getAnswerBuffer()
	ab.b = append(ab.b[:0], bytes.Repeat([]byte{'#'}, cap(ab.b))...)
	ab.put()
}

// FastCalls returns how many calls g's fast path answered.
func FastCalls(g *Gateway) int64 { return g.fastCalls.Load() }
