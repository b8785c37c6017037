//go:build !linux

package supervisor

import (
	"os"
	"os/exec"
	"syscall"
)

func setProcAttr(*exec.Cmd, Hardening, bool) []string { return nil }

func killGroup(*exec.Cmd) {}

func namespacesRefused() string { return "userns, netns: Linux only" }

func refuseNamespaces(error) bool { return false }

func enlargePipe(syscall.Conn) {}

// processGone is true only where it can be told (Linux); elsewhere a
// worker's exit is known once its waiting goroutine records it.
func processGone(int) bool { return false }

func processStopped(int) bool { return false }

// selfOOMCounter: out-of-memory kills are counted only on Linux.
func selfOOMCounter() func() (int64, bool) { return nil }
