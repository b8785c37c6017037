package supervisor

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// setProcAttr makes the kernel kill the worker if the supervisor dies and,
// when hardened, puts it in a process group of its own (a signal to the
// supervisor's group does not reach it) and, with ns, in new user and
// network namespaces: the worker keeps its user and files (its user maps
// to itself) but has no network interface at all. It returns the layers
// it asked for.
func setProcAttr(cmd *exec.Cmd, h Hardening, ns bool) []string {
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.SysProcAttr = attr
	if h != HardeningOn {
		return nil
	}
	attr.Setpgid = true
	layers := []string{"pgid"}
	if ns {
		attr.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getuid(), HostID: os.Getuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getgid(), HostID: os.Getgid(), Size: 1}}
		attr.GidMappingsEnableSetgroups = false
		layers = append(layers, "userns", "netns")
	}
	return layers
}

// namespaces remembers why the kernel refused new namespaces, once it has:
// later workers start without trying again.
var namespaces struct {
	sync.Mutex
	refused string
}

// namespacesRefused is why new namespaces cannot be used ("" if they may).
func namespacesRefused() string {
	namespaces.Lock()
	defer namespaces.Unlock()
	return namespaces.refused
}

// refuseNamespaces records that starting a worker in new namespaces failed
// with err, if err is the kernel refusing them, and reports whether it was.
func refuseNamespaces(err error) bool {
	// EPERM: unprivileged user namespaces are disabled (sysctl, AppArmor,
	// seccomp of a container); EINVAL: not built in; ENOSPC/EUSERS: the
	// namespace limit is reached or zero.
	if !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSPC) &&
		!errors.Is(err, unix.EUSERS) && !errors.Is(err, unix.EACCES) {
		return false
	}
	namespaces.Lock()
	namespaces.refused = "userns, netns: the kernel refused new namespaces (" + err.Error() + ")"
	namespaces.Unlock()
	return true
}

// enlargePipe asks for a pipe buffer of up to 1 MiB (the default is 64 KiB,
// less than one batch of output and its frame header): a worker that
// prints then rarely waits for the supervisor to read. The kernel's limit
// (/proc/sys/fs/pipe-max-size) may refuse it; the pipe then stays as it is.
func enlargePipe(f syscall.Conn) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, 1<<20)
	})
}

// processGone reports whether no process has the id pid: for a worker,
// that its exit was reaped (only the goroutine waiting for it reaps it),
// possibly a moment before that goroutine records the exit.
func processGone(pid int) bool { return unix.Kill(pid, 0) == unix.ESRCH }

// processStopped reports whether the process pid is stopped (SIGSTOP:
// state T in /proc/<pid>/stat) rather than running.
func processStopped(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command's closing parenthesis.
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't')
}

// oomKills is the number of processes the kernel's out-of-memory killer
// has killed since boot, on the whole machine (its cgroups' kills
// included): oom_kill in /proc/vmstat (Linux 4.13 and later).
func oomKills() (int64, bool) {
	b, err := os.ReadFile("/proc/vmstat")
	if err != nil {
		return 0, false
	}
	for line := range bytes.SplitSeq(b, []byte{'\n'}) {
		if v, ok := bytes.CutPrefix(line, []byte("oom_kill ")); ok {
			n, err := strconv.ParseInt(string(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
