package supervisor

import (
	"os/exec"
	"syscall"
)

// setProcAttr makes the kernel kill the worker if the supervisor dies.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
