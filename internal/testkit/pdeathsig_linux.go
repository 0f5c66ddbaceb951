//go:build linux

package testkit

import (
	"os/exec"
	"syscall"
)

// killWithStarter has the kernel SIGKILL cmd's process when the thread
// that starts it exits (PR_SET_PDEATHSIG; kept across exec).
func killWithStarter(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
