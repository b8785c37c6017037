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
	"sync/atomic"
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
func (p Poller) Wait() { p.WaitFor(p.max) }

// WaitFor is Wait for up to d instead of the Poller's time (nothing when
// the Poller does not wait).
func (p Poller) WaitFor(d time.Duration) {
	if p.rc == nil {
		return
	}
	_ = p.rc.Control(func(fd uintptr) {
		for start := time.Now(); time.Since(start) < d; {
			if readable(fd) {
				return
			}
			yield()
		}
	})
}

// Await is Wait, unless r already holds buffered input to read.
func (p Poller) Await(r interface{ Buffered() int }) { p.AwaitFor(r, p.max) }

// AwaitFor is WaitFor, unless r already holds buffered input to read.
func (p Poller) AwaitFor(r interface{ Buffered() int }, d time.Duration) {
	if r.Buffered() == 0 {
		p.WaitFor(d)
	}
}

// Estimate tracks how long an input took to come, recently (a moving
// average), to size the next poll for it: an input that comes within a
// few hundred microseconds is polled for long enough to catch it, one
// that comes later (a long execution, a loaded machine, where a poll
// would only hold a processor that others need) for the base time only.
// The zero Estimate has seen nothing. Its methods may be called
// concurrently.
type Estimate struct{ ns atomic.Int64 }

// Observe records that an input came after d.
func (e *Estimate) Observe(d time.Duration) {
	old := e.ns.Load()
	if old == 0 {
		e.ns.Store(int64(d))
		return
	}
	e.ns.Store(old + (int64(d)-old)/4)
}

// Poll returns how long to poll for the next input: twice the recent
// average when that is between base and most, else base.
func (e *Estimate) Poll(base, most time.Duration) time.Duration {
	if d := 2 * time.Duration(e.ns.Load()); d > base && d <= most {
		return d
	}
	return base
}
