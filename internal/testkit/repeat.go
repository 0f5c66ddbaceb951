package testkit

import "sync"

// Repeat calls fn on n workers, each again as soon as it returns true
// (with the worker's index and its count of calls so far; false ends that
// worker), until the stop it returns is called; stop returns once every
// call has ended. It is the load a test keeps up while it does something
// else: writers during a reopen, requests during reloads.
func Repeat(n int, fn func(worker, call int) bool) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() {
			for call := 0; ; call++ {
				select {
				case <-done:
					return
				default:
				}
				if !fn(w, call) {
					return
				}
			}
		})
	}
	return func() { close(done); wg.Wait() }
}
