package test

import (
	"os/exec"
	"syscall"
)

// setPdeathsig has the kernel SIGKILL a server process the harness started if the test binary
// dies without running its cleanups (a -timeout panic, a kill).
func setPdeathsig(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
