//go:build linux && (amd64 || arm64)

package harden

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// The seccomp allow-list. It holds what the Go runtime, wazero's compiled
// code and the worker call once the interpreter is loaded: reading and
// writing the descriptors the process holds, memory management, threads,
// futexes, signals to itself, timers, the netpoller. Everything else
// fails with EPERM, among it every call that opens a file (open, openat,
// ...), makes a socket, starts a process (fork, vfork, clone without
// CLONE_THREAD, execve, execveat), or reaches another process or the
// kernel's state (ptrace, process_vm_*, kill of another process, mount,
// bpf, unshare, setns, keyctl, perf_event_open, ioctl...).
var allowed = append([]uintptr{
	unix.SYS_READ, unix.SYS_WRITE, unix.SYS_READV, unix.SYS_WRITEV,
	unix.SYS_PREAD64, unix.SYS_PWRITE64, unix.SYS_CLOSE, unix.SYS_FSTAT, unix.SYS_FCNTL,
	unix.SYS_MMAP, unix.SYS_MUNMAP, unix.SYS_MPROTECT, unix.SYS_MADVISE, unix.SYS_MREMAP, unix.SYS_BRK,
	unix.SYS_FUTEX, unix.SYS_SCHED_YIELD, unix.SYS_SCHED_GETAFFINITY,
	unix.SYS_EXIT, unix.SYS_EXIT_GROUP, unix.SYS_GETPID, unix.SYS_GETTID,
	unix.SYS_GETUID, unix.SYS_GETEUID, unix.SYS_GETGID, unix.SYS_GETEGID, unix.SYS_UNAME,
	unix.SYS_RT_SIGACTION, unix.SYS_RT_SIGPROCMASK, unix.SYS_RT_SIGRETURN, unix.SYS_SIGALTSTACK, unix.SYS_RESTART_SYSCALL,
	unix.SYS_NANOSLEEP, unix.SYS_CLOCK_NANOSLEEP, unix.SYS_CLOCK_GETTIME, unix.SYS_CLOCK_GETRES, unix.SYS_GETTIMEOFDAY,
	unix.SYS_GETRANDOM,
	// A thread that glibc starts (in a program linked with cgo, made a
	// worker by the supervisor) registers these; glibc aborts the
	// process when rseq, registered for the first thread, fails.
	unix.SYS_RSEQ, unix.SYS_SET_ROBUST_LIST,
	unix.SYS_EPOLL_CREATE1, unix.SYS_EPOLL_CTL, unix.SYS_EPOLL_PWAIT, unix.SYS_EPOLL_PWAIT2,
	unix.SYS_EVENTFD2, unix.SYS_PIPE2, unix.SYS_PPOLL, unix.SYS_PSELECT6,
}, archAllowed...)

// cloneNamespaces are the clone flags that would make a thread leave the
// process's namespaces.
const cloneNamespaces = unix.CLONE_NEWNS | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// Offsets in struct seccomp_data.
const (
	offNr   = 0
	offArch = 4
)

func offArg(i int) uint32 { return uint32(16 + 8*i) } // its low 32 bits (little-endian)

// BPF instructions.
const (
	ldAbs = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	jeq   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	jge   = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	jset  = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	ret   = unix.BPF_RET | unix.BPF_K
)

// An insn is a BPF instruction whose jumps name labels, resolved by asm.
type insn struct {
	code   uint16
	k      uint32
	jt, jf string // "" is the next instruction
	label  string // names this instruction
}

// filter is the seccomp program of process pid.
func filter(pid int) ([]unix.SockFilter, error) {
	const (
		allow, deny, enosys, kill = "allow", "deny", "enosys", "kill"
	)
	p := []insn{
		{code: ldAbs, k: offArch},
		{code: jeq, k: auditArch, jf: kill},
		{code: ldAbs, k: offNr},
	}
	if x32Bit != 0 {
		p = append(p, insn{code: jge, k: x32Bit, jt: deny}) // the x32 ABI's numbers
	}
	for _, nr := range allowed {
		p = append(p, insn{code: jeq, k: uint32(nr), jt: allow})
	}
	p = append(p,
		insn{code: jeq, k: unix.SYS_CLONE, jt: "clone"},
		// clone3 passes its flags in memory, which a filter cannot read:
		// ENOSYS makes the Go runtime and libc fall back to clone.
		insn{code: jeq, k: unix.SYS_CLONE3, jt: enosys},
		insn{code: jeq, k: unix.SYS_KILL, jt: "self"},
		insn{code: jeq, k: unix.SYS_TGKILL, jt: "self"},
		insn{code: jeq, k: unix.SYS_PRLIMIT64, jt: "getrlimit"},
		insn{code: jeq, k: unix.SYS_PRCTL, jt: "prctl"},
		insn{code: ret, k: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},

		// A thread of this process, in its namespaces; no new process.
		insn{code: ldAbs, k: offArg(0), label: "clone"},
		insn{code: jset, k: unix.CLONE_THREAD, jf: deny},
		insn{code: jset, k: cloneNamespaces, jt: deny, jf: allow},

		// Signals to this process only (pid_t is 32 bits).
		insn{code: ldAbs, k: offArg(0), label: "self"},
		insn{code: jeq, k: uint32(pid), jt: allow, jf: deny},

		// prlimit64(pid, resource, NULL, old): reading a limit, not setting one.
		insn{code: ldAbs, k: offArg(2), label: "getrlimit"},
		insn{code: jeq, k: 0, jf: deny},
		insn{code: ldAbs, k: offArg(2) + 4},
		insn{code: jeq, k: 0, jt: allow, jf: deny},

		// prctl(PR_SET_VMA, ...): the Go runtime names its mappings.
		insn{code: ldAbs, k: offArg(0), label: "prctl"},
		insn{code: jeq, k: unix.PR_SET_VMA, jt: allow, jf: deny},

		insn{code: ret, k: unix.SECCOMP_RET_ALLOW, label: allow},
		insn{code: ret, k: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM), label: deny},
		insn{code: ret, k: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS), label: enosys},
		insn{code: ret, k: unix.SECCOMP_RET_KILL_PROCESS, label: kill},
	)
	return asm(p)
}

// asm resolves the labels of p into BPF's relative jumps.
func asm(p []insn) ([]unix.SockFilter, error) {
	at := map[string]int{}
	for i, in := range p {
		if in.label != "" {
			at[in.label] = i
		}
	}
	jump := func(from int, label string) (uint8, error) {
		if label == "" {
			return 0, nil
		}
		to, ok := at[label]
		if !ok || to <= from || to-from-1 > 255 {
			return 0, fmt.Errorf("seccomp filter: bad jump from %d to %q", from, label)
		}
		return uint8(to - from - 1), nil
	}
	out := make([]unix.SockFilter, len(p))
	for i, in := range p {
		jt, err := jump(i, in.jt)
		if err != nil {
			return nil, err
		}
		jf, err := jump(i, in.jf)
		if err != nil {
			return nil, err
		}
		out[i] = unix.SockFilter{Code: in.code, Jt: jt, Jf: jf, K: in.k}
	}
	return out, nil
}
