// Package procs gives the Go scheduler the two processors (Ps) the
// project's processes need.
package procs

import goruntime "runtime"

// AtLeastTwo gives the Go scheduler two processors (Ps) when it has one, as
// it does on a machine, cgroup quota or CPU affinity of one CPU, and
// reports whether it did (the process then has one CPU, which polling for
// a peer's next message would take from that peer).
//
// With one P, a goroutine that enters a blocking system call keeps the P
// until sysmon takes it back, at the second of its ticks that sees it
// there: up to 20 ms once sysmon has slowed down. In a worker such
// goroutines are the signal clock's watcher (a futex wait on the
// interrupt page) and the reader of the requests, and in a supervisor the
// one that waits in poll(2) for a worker's next message; meanwhile the
// goroutine that runs the guest, or that answers the worker, stood still
// (RATIONALE.md, "One CPU"). A second P costs nothing while there is
// nothing to run on it: the goroutines that would use it mostly wait in
// the kernel.
func AtLeastTwo() bool {
	if goruntime.GOMAXPROCS(0) >= 2 {
		return false
	}
	goruntime.GOMAXPROCS(2)
	return true
}
