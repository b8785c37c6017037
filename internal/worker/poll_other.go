//go:build !unix

package worker

const canPoll = false

func readable(uintptr) bool { return true }
