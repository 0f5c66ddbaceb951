//go:build !linux

package testkit

import "os/exec"

// killWithStarter does nothing here: only Linux has a parent-death signal.
// A daemon whose test panics outlives it on other platforms.
func killWithStarter(*exec.Cmd) {}
