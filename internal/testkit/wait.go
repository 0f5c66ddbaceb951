package testkit

import "time"

// WaitFor polls cond every interval until it holds (true) or timeout has
// passed (false). Tests that watch a real process or server for a change
// share it, so every such wait checks once more at its deadline.
func WaitFor(timeout, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval)
	}
}
