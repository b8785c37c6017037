//go:build !linux

package harden

// Supported reports whether this platform has the lock-down.
const Supported = false

// Apply does nothing outside Linux, and says so.
func Apply() Report {
	return Report{Refused: []string{"all: the lock-down is implemented on Linux only"}}
}
