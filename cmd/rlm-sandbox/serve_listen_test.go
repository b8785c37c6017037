package main

import (
	"errors"
	"log/slog"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
)

// scriptedListener's Accept fails with each of errs in turn, then with
// net.ErrClosed.
type scriptedListener struct {
	mu    sync.Mutex
	errs  []error
	calls int
}

func (l *scriptedListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	if len(l.errs) == 0 {
		return nil, net.ErrClosed
	}
	err := l.errs[0]
	l.errs = l.errs[1:]
	return nil, err
}

func (l *scriptedListener) Close() error   { return nil }
func (l *scriptedListener) Addr() net.Addr { return &net.UnixAddr{Name: "test", Net: "unix"} }

// TestAcceptLoopErrors: a failure that passes (out of file descriptors,
// say) is retried and the loop goes on; any other ends it with that error.
func TestAcceptLoopErrors(t *testing.T) {
	emfile := &net.OpError{Op: "accept", Net: "unix", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	enfile := &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.ENFILE)}
	aborted := &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.ECONNABORTED)}
	permanent := &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EINVAL)}
	for _, tc := range []struct {
		name  string
		errs  []error
		want  error // nil: the loop ended at net.ErrClosed
		calls int
	}{
		{"temporary failures are retried", []error{emfile, enfile, aborted, emfile}, nil, 5},
		{"a permanent failure ends the loop", []error{emfile, permanent, emfile}, permanent, 2},
		{"closed", nil, nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHub(hubOptions{}, slog.New(slog.DiscardHandler), nil)
			defer h.close()
			ln := &scriptedListener{errs: tc.errs}
			var conns sync.WaitGroup
			err := acceptLoop(t.Context(), ln, h, slog.New(slog.DiscardHandler), &serveOptions{}, nil, &conns)
			if !errors.Is(err, tc.want) { // errors.Is(err, nil): err == nil
				t.Fatalf("acceptLoop: %v, want %v", err, tc.want)
			}
			if ln.calls != tc.calls {
				t.Fatalf("Accept called %d times, want %d", ln.calls, tc.calls)
			}
		})
	}
}
