//go:build linux

package harden

import "golang.org/x/sys/unix"

const auditArch = unix.AUDIT_ARCH_AARCH64

const x32Bit = 0

var archAllowed []uintptr
