//go:build linux

package harden

import "golang.org/x/sys/unix"

const auditArch = unix.AUDIT_ARCH_X86_64

// x32Bit marks the system call numbers of the x32 ABI, which the filter
// denies (they would otherwise bypass the numbers it checks).
const x32Bit = 0x40000000

var archAllowed = []uintptr{unix.SYS_POLL, unix.SYS_EPOLL_WAIT, unix.SYS_TIME}
