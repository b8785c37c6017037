//go:build linux

package pipe

import (
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Reader is the read end of a pipe. Read may be called by one goroutine
// at a time; SetReadDeadline and Close by any, at any time.
type Reader struct {
	f            *os.File // the read end, outside the poller
	fd           int
	wakeR, wakeW int          // a byte written to wakeW ends a Read's poll
	deadline     atomic.Int64 // UnixNano; 0: none
	closed       atomic.Bool
	fds          [2]unix.PollFd // what Read polls: the pipe and wakeR

	mu      sync.Mutex
	readers int
	idle    *sync.Cond // a Read has returned
}

// New returns a pipe: the read end as a Reader, the write end as a file
// (for a child process's output, say). Both are close-on-exec.
func New() (*Reader, *os.File, error) {
	var p, w [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, os.NewSyscallError("pipe2", err)
	}
	if err := unix.Pipe2(w[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		unix.Close(p[0])
		unix.Close(p[1])
		return nil, nil, os.NewSyscallError("pipe2", err)
	}
	// os.NewFile registers a file with the poller when its descriptor is
	// in non-blocking mode: the read end becomes non-blocking only after,
	// so that a Read never blocks but in poll.
	r := &Reader{f: os.NewFile(uintptr(p[0]), "|0"), fd: p[0], wakeR: w[0], wakeW: w[1]}
	r.fds = [2]unix.PollFd{{Fd: int32(p[0]), Events: unix.POLLIN}, {Fd: int32(w[0]), Events: unix.POLLIN}}
	if err := unix.SetNonblock(p[0], true); err != nil {
		r.f.Close()
		unix.Close(p[1])
		unix.Close(w[0])
		unix.Close(w[1])
		return nil, nil, os.NewSyscallError("fcntl", err)
	}
	r.idle = sync.NewCond(&r.mu)
	return r, os.NewFile(uintptr(p[1]), "|1"), nil
}

// Read reads from the pipe, waiting until data comes, the write end is
// closed (io.EOF), the deadline passes (an error matching
// os.ErrDeadlineExceeded; nothing was read), or the Reader is closed
// (os.ErrClosed).
func (r *Reader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.mu.Lock()
	if r.closed.Load() {
		r.mu.Unlock()
		return 0, os.ErrClosed
	}
	r.readers++
	r.mu.Unlock()
	defer r.leave()
	fds := r.fds[:] // one Read at a time
	for {
		if r.closed.Load() {
			return 0, os.ErrClosed
		}
		timeout := -1
		if d := r.deadline.Load(); d != 0 {
			left := time.Until(time.Unix(0, d))
			if left <= 0 {
				return 0, os.ErrDeadlineExceeded
			}
			timeout = int((left + time.Millisecond - 1) / time.Millisecond)
		}
		n, err := unix.Read(r.fd, p)
		switch {
		case err == nil && n == 0:
			return 0, io.EOF
		case err == nil:
			return n, nil
		case err != unix.EAGAIN && err != unix.EINTR:
			return 0, &os.PathError{Op: "read", Path: r.f.Name(), Err: err}
		}
		fds[0].Revents, fds[1].Revents = 0, 0
		if _, err := unix.Poll(fds, timeout); err != nil && err != unix.EINTR {
			return 0, os.NewSyscallError("poll", err)
		}
		if fds[1].Revents != 0 {
			var b [64]byte
			for {
				if n, _ := unix.Read(r.wakeR, b[:]); n <= 0 {
					break
				}
			}
		}
	}
}

func (r *Reader) leave() {
	r.mu.Lock()
	r.readers--
	r.idle.Broadcast()
	r.mu.Unlock()
}

// wake ends the poll of a Read in progress, which then looks at the
// deadline and at whether the Reader was closed. r.mu is held: Close
// closes the descriptors under it.
func (r *Reader) wake() {
	_, _ = unix.Write(r.wakeW, []byte{0}) // EAGAIN: a wake-up is pending
}

// SetReadDeadline sets the time at which Read gives up; the zero time
// means none. It applies to a Read in progress too.
func (r *Reader) SetReadDeadline(t time.Time) error {
	if t.IsZero() {
		r.deadline.Store(0) // only extends a wait: no need to wake it
		return nil
	}
	d := t.UnixNano()
	if d == 0 {
		d = 1
	}
	r.deadline.Store(d)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed.Load() {
		return os.ErrClosed
	}
	r.wake()
	return nil
}

// SyscallConn gives access to the pipe's descriptor (for fcntl, poll).
func (r *Reader) SyscallConn() (syscall.RawConn, error) { return r.f.SyscallConn() }

// Close closes the read end, once a Read in progress has returned
// (os.ErrClosed).
func (r *Reader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed.Swap(true) {
		return os.ErrClosed
	}
	r.wake()
	for r.readers > 0 {
		r.idle.Wait()
	}
	unix.Close(r.wakeR)
	unix.Close(r.wakeW)
	return r.f.Close()
}
