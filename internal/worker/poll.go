package worker

import (
	"io"
	goruntime "runtime"
	"syscall"
	"time"
)

// DefaultIdleSpin is how long a worker that has just served a request
// polls its input for the next one before it blocks.
//
// A processor that goes idle is slow to come back: the next request then
// runs on cold caches, at about half speed (Execute of `x = x + 1` took
// 95 µs in the worker when it blocked between requests, 65 µs when it
// polled). An agent sends its next request after an LLM call, so the
// polling is then lost, but it costs at most this much processor time
// per request; a caller that sends requests back to back gets them
// served at full speed.
const DefaultIdleSpin = 200 * time.Microsecond

// poller waits, for a while, for its input to become readable, by polling
// it without blocking.
type poller struct {
	rc   syscall.RawConn // nil: do not poll
	spin time.Duration
}

// newPoller returns a poller of in when in is a file that can be polled,
// spin is not negative, and the process has more than one processor to
// run on (polling would otherwise take the processor from the peer that
// writes the request).
func newPoller(in io.Reader, spin time.Duration) poller {
	if spin == 0 {
		spin = DefaultIdleSpin
	}
	sc, ok := in.(syscall.Conn)
	if spin < 0 || !ok || !canPoll || goruntime.GOMAXPROCS(0) < 2 {
		return poller{}
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return poller{}
	}
	return poller{rc: rc, spin: spin}
}

// wait returns when the input is readable or the spin time has passed.
func (p poller) wait() {
	if p.rc == nil {
		return
	}
	_ = p.rc.Control(func(fd uintptr) {
		for start := time.Now(); time.Since(start) < p.spin; {
			if readable(fd) {
				return
			}
		}
	})
}
