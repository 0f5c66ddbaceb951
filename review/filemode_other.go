//go:build !unix

package review

// privateMode is a no-op where files have no unix owner and mode.
func privateMode(string, int) {}

func euid() int { return -1 }
