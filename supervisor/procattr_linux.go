package supervisor

import (
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// setProcAttr makes the kernel kill the worker if the supervisor dies.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// enlargePipe asks for a pipe buffer of up to 1 MiB (the default is 64 KiB,
// less than one batch of output and its frame header): a worker that
// prints then rarely waits for the supervisor to read. The kernel's limit
// (/proc/sys/fs/pipe-max-size) may refuse it; the pipe then stays as it is.
func enlargePipe(f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, 1<<20)
	})
}
