//go:build !unix

package spin

const canPoll = false

func readable(uintptr) bool { return true }

func yield() {}
