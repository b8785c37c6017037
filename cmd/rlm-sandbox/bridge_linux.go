package main

import "syscall"

// bridgeProcAttr puts a bridge command in a process group of its own, and
// has the kernel kill it if rlm-sandbox dies first (SIGKILL included),
// so that a command waiting on a model does not outlive the execution
// that asked.
func bridgeProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
