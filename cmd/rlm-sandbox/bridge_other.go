//go:build !linux

package main

import "syscall"

// bridgeProcAttr puts a bridge command in a process group of its own.
func bridgeProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
