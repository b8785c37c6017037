package harden

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Supported reports whether this platform has the lock-down.
const Supported = true

// maxFiles is the descriptor limit of a locked-down process: it keeps the
// descriptors it has, and seccomp lets it create only the eventfds and
// pipes the Go runtime may need.
const maxFiles = 64

// Apply locks down the whole process (every thread, and threads created
// later) in the order each layer needs: rlimits, no_new_privs (which
// Landlock and seccomp require of an unprivileged process), Landlock,
// seccomp last (it forbids the calls that install the others). A layer the
// kernel or the build refuses is reported and skipped; the others still
// apply.
func Apply() Report {
	var r Report
	if err := setRlimits(); err != nil {
		r.refused(Rlimits, err)
	} else {
		r.applied(Rlimits)
	}
	allThreads := true
	if _, _, e := syscall.AllThreadsSyscall(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0); e != 0 {
		// ENOTSUP: a binary linked with cgo cannot run a call on all its
		// threads. The calling thread gets it; seccomp's TSYNC then gives
		// it to the other threads.
		allThreads = false
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			r.refused(NoNewPrivs, err)
		} else {
			r.applied(NoNewPrivs)
		}
	} else {
		r.applied(NoNewPrivs)
	}
	if err := landlock(allThreads); err != nil {
		r.refused(Landlock, err)
	} else {
		r.applied(Landlock)
	}
	if skipSeccomp {
		return r
	}
	if err := seccomp(); err != nil {
		r.refused(Seccomp, err)
	} else {
		r.applied(Seccomp)
	}
	return r
}

// skipSeccomp leaves seccomp out, so that a test can check the other
// layers on their own. Only test builds (tag rlmescape) can set it.
var skipSeccomp bool

func setRlimits() error {
	for _, l := range []struct {
		res int
		max uint64
	}{
		{unix.RLIMIT_FSIZE, 0}, // no byte written to a file (pipes are not files)
		{unix.RLIMIT_CORE, 0},  // no core dump of the guest's memory
		{unix.RLIMIT_NOFILE, maxFiles},
	} {
		lim := unix.Rlimit{Cur: l.max, Max: l.max}
		var now unix.Rlimit
		if unix.Getrlimit(l.res, &now) == nil && now.Max < l.max {
			// Lower already (a hard `ulimit -n 32`): kept, as raising a
			// hard limit is refused and the lower one is the stricter.
			lim = unix.Rlimit{Cur: min(now.Cur, now.Max), Max: now.Max}
		}
		if err := unix.Setrlimit(l.res, &lim); err != nil {
			return fmt.Errorf("setrlimit %d: %w", l.res, err)
		}
	}
	return nil
}

// landlock restricts the process to no file system access and no TCP
// bind or connect, with every access right the kernel's Landlock ABI
// knows handled and none granted.
func landlock(allThreads bool) error {
	abi, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if e != 0 {
		return fmt.Errorf("not offered by the kernel: %w", e)
	}
	if !allThreads {
		return errors.New("the binary is linked with cgo, so it cannot restrict all its threads (build with CGO_ENABLED=0)")
	}
	attr := unix.LandlockRulesetAttr{Access_fs: (1 << 13) - 1} // ABI 1: EXECUTE .. MAKE_SYM
	size := unsafe.Sizeof(attr.Access_fs)
	if abi >= 2 {
		attr.Access_fs |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		attr.Access_fs |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 4 {
		attr.Access_net = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
		size = unsafe.Offsetof(attr.Scoped)
	}
	if abi >= 5 {
		attr.Access_fs |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	if abi >= 6 {
		// Not LANDLOCK_SCOPE_SIGNAL: each thread gets a domain of its own
		// (see below), and seccomp already confines kill to the process.
		attr.Scoped = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
		size = unsafe.Sizeof(attr)
	}
	fd, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if e != 0 {
		return fmt.Errorf("create ruleset (ABI %d): %w", abi, e)
	}
	defer unix.Close(int(fd))
	// Landlock restricts the calling thread only: every thread of the
	// process calls it, and the threads created later inherit it.
	if _, _, e := syscall.AllThreadsSyscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); e != 0 {
		return fmt.Errorf("restrict (ABI %d): %w", abi, e)
	}
	return nil
}

// seccomp installs the allow-list filter on every thread (TSYNC).
func seccomp() error {
	prog, err := filter(os.Getpid())
	if err != nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	r, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	if e != 0 {
		return fmt.Errorf("install filter: %w", e)
	}
	if r != 0 {
		return fmt.Errorf("install filter: thread %d could not be synchronised", r)
	}
	return nil
}
