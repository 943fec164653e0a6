package gateway

import "time"

// SetParkTimeout sets how long a parked call waits for its client's
// answer, for a test, and returns the function that restores it.
func SetParkTimeout(d time.Duration) (restore func()) {
	old := parkTimeout
	parkTimeout = d
	return func() { parkTimeout = old }
}
