//go:build rlmescape && linux

package worker

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// The escape probe exists only in test builds (go build -tags rlmescape):
// tests/escape_test.go runs such a worker with $RLM_ESCAPE_PROBE set to
// the address of a loopback listener. Once locked down, the worker tries
// to get out, as code that broke through the WebAssembly boundary would,
// and logs each attempt with its error.
func init() {
	escapeProbe = func(log *slog.Logger) {
		addr := os.Getenv("RLM_ESCAPE_PROBE")
		if addr == "" {
			return
		}
		report := func(attempt string, err error) {
			log.Info("escape", "attempt", attempt, "err", fmt.Sprint(err), "denied", errors.Is(err, os.ErrPermission))
		}
		f, err := os.Open("/etc/passwd")
		if err == nil {
			f.Close()
		}
		report("open /etc/passwd", err)
		name := fmt.Sprintf("/tmp/rlm-escape-%d", os.Getpid())
		f, err = os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
		if err == nil {
			f.Close()
			os.Remove(name)
		}
		report("create "+name, err)
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
		if err == nil {
			var sa unix.SockaddrInet4
			if ap, perr := net.ResolveTCPAddr("tcp4", addr); perr == nil {
				copy(sa.Addr[:], ap.IP.To4())
				sa.Port = ap.Port
			}
			err = unix.Connect(fd, &sa)
			unix.Close(fd)
			report("connect "+addr, err)
		} else {
			report("socket", err)
		}
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		report("dial "+addr, err)
		err = syscall.Exec("/bin/sh", []string{"sh", "-c", "true"}, nil)
		report("execve /bin/sh", err)
		err = exec.Command("/bin/sh", "-c", "true").Run()
		report("os/exec /bin/sh", err)
		if os.Getenv("RLM_ESCAPE_NO_SECCOMP") == "1" {
			// What follows is seccomp's alone (a vfork that succeeded
			// would run on in this process's memory).
			log.Info("escape done")
			return
		}
		pid, _, e := syscall.RawSyscall(unix.SYS_CLONE, uintptr(unix.SIGCHLD), 0, 0)
		if e == 0 && pid == 0 {
			unix.Exit(0) // the child, had it been created
		}
		report("fork", errnoErr(e))
		_, _, e = syscall.RawSyscall(unix.SYS_VFORK, 0, 0, 0)
		report("vfork", errnoErr(e))
		report("ptrace attach 1", unix.PtraceAttach(1))
		report("kill 1", unix.Kill(1, 0))
		report("mount", unix.Mount("none", "/tmp", "tmpfs", 0, ""))
		report("unshare user", unix.Unshare(unix.CLONE_NEWUSER))
		_, _, e = syscall.RawSyscall(unix.SYS_BPF, 0, 0, 0)
		report("bpf", errnoErr(e))
		report("setrlimit nofile", unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: 1 << 20, Max: 1 << 20}))
		log.Info("escape done")
	}
}

func errnoErr(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}
