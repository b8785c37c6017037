package supervisor

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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

// killGroup kills the process group of a worker that has one of its own
// (hardened: setProcAttr's Setpgid), so that what it started goes with
// it: a wrapper script's children, which would keep its pipes open.
func killGroup(cmd *exec.Cmd) {
	if a := cmd.SysProcAttr; a != nil && a.Setpgid && cmd.Process != nil && cmd.Process.Pid > 0 {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
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

// selfOOMCounter is oomCounter of this process, found once (a worker
// starts in its supervisor's cgroup).
var selfOOMCounter = sync.OnceValue(func() func() (int64, bool) { return oomCounter(os.Getpid()) })

// oomCounter returns how to read the number of processes the kernel's
// out-of-memory killer killed in process pid's memory cgroup (cgroup v2's
// memory.events, v1's memory.oom_control: oom_kill, Linux 4.13 and later),
// a container's when pid runs in one; where that cannot be read, on the
// whole machine (oom_kill in /proc/vmstat). Nil when neither can be.
func oomCounter(pid int) func() (int64, bool) {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid)); err == nil {
		for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
			parts := strings.SplitN(line, ":", 3)
			if len(parts) != 3 {
				continue
			}
			var file string
			switch {
			case parts[0] == "0" && parts[1] == "":
				file = filepath.Join("/sys/fs/cgroup", parts[2], "memory.events")
			case slices.Contains(strings.Split(parts[1], ","), "memory"):
				file = filepath.Join("/sys/fs/cgroup/memory", parts[2], "memory.oom_control")
			default:
				continue
			}
			read := func() (int64, bool) { return counterIn(file, "oom_kill ") }
			if _, ok := read(); ok {
				return read
			}
		}
	}
	read := func() (int64, bool) { return counterIn("/proc/vmstat", "oom_kill ") }
	if _, ok := read(); ok {
		return read
	}
	return nil
}

// counterIn reads the number after prefix at the start of a line of file.
func counterIn(file, prefix string) (int64, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	for line := range bytes.SplitSeq(b, []byte{'\n'}) {
		if v, ok := bytes.CutPrefix(line, []byte(prefix)); ok {
			n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
