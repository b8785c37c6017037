// Package spin waits for a pipe to become readable by polling it for a
// while before the caller blocks in a read.
//
// A processor that goes idle is slow to come back: on a virtual machine
// waking one takes tens of microseconds, and the code that then runs finds
// cold caches. The two ends of the worker's pipes answer each other within
// microseconds when an agent's code talks to its host (a request's reply,
// an llm_query answered at once), so each end polls for the other's frame,
// for a bounded time, rather than let its processor sleep.
package spin

import (
	"io"
	goruntime "runtime"
	"syscall"
	"time"
)

// Poller waits, for a while, for its input to become readable, by polling
// it without blocking. The zero Poller does not wait.
type Poller struct {
	rc  syscall.RawConn // nil: do not poll
	max time.Duration
}

// New returns a Poller of in that polls for up to d, when in is a file
// that can be polled, d is positive, and the process has more than one
// processor to run on (polling would otherwise take the processor from the
// peer that writes).
func New(in io.Reader, d time.Duration) Poller {
	sc, ok := in.(syscall.Conn)
	if d <= 0 || !ok || !canPoll || goruntime.GOMAXPROCS(0) < 2 {
		return Poller{}
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return Poller{}
	}
	return Poller{rc: rc, max: d}
}

// Wait returns when the input is readable or the Poller's time has passed.
func (p Poller) Wait() {
	if p.rc == nil {
		return
	}
	_ = p.rc.Control(func(fd uintptr) {
		for start := time.Now(); time.Since(start) < p.max; {
			if readable(fd) {
				return
			}
			yield()
		}
	})
}

// Await is Wait, unless r already holds buffered input to read.
func (p Poller) Await(r interface{ Buffered() int }) {
	if r.Buffered() == 0 {
		p.Wait()
	}
}
