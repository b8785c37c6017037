package runtime

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// SIGINT is the signal number that raises KeyboardInterrupt in running code.
const SIGINT = 2

// InterruptSource holds the interpreter's pending signal. CPython's
// Emscripten build polls it about every 50 bytecodes: a non-zero value is
// taken (swapped with 0 in one atomic operation) and delivered as that
// signal. Store SIGINT to raise KeyboardInterrupt in running code. (In a
// long run, with an InterruptWaiter, the interpreter polls it rarely and
// waits on it instead, making the guest look at once when a signal comes.)
//
// An in-process caller uses AtomicInterrupt; a worker process backs it with
// a page of memory shared with its supervisor.
type InterruptSource interface {
	Swap(v int32) int32
	Load() int32
}

// InterruptWaiter is an InterruptSource that can wake a goroutine waiting
// for a signal. While the guest waits (time.sleep, select.poll, a bridge
// call in flight), the interpreter waits on it: an idle sandbox then costs
// no wake-ups, and an interrupt ends the wait at once. An InterruptSource
// that is not an InterruptWaiter is looked at every millisecond instead.
// AtomicInterrupt and the worker's shared page (ipc.Page) are both.
type InterruptWaiter interface {
	InterruptSource
	// WaitInterrupt returns when a signal is pending, ctx is done, or d
	// has passed (d < 0: no limit), and reports whether a signal is
	// pending. It may return early; callers check again and wait again.
	WaitInterrupt(ctx context.Context, d time.Duration) bool
}

// waiterOf returns src as an InterruptWaiter: src itself, or src looked at
// every millisecond.
func waiterOf(src InterruptSource) InterruptWaiter {
	if w, ok := src.(InterruptWaiter); ok {
		return w
	}
	return polled{src}
}

// polled is an InterruptSource that cannot wake a waiter: its waits look
// at it every millisecond.
type polled struct{ InterruptSource }

func (p polled) WaitInterrupt(ctx context.Context, d time.Duration) bool {
	const tick = time.Millisecond
	if d < 0 || d > tick {
		d = tick
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return p.Load() != 0
}

// AtomicInterrupt is an in-process InterruptSource and InterruptWaiter.
// The zero value holds no signal.
type AtomicInterrupt struct {
	v    atomic.Int32
	mu   sync.Mutex
	wake chan struct{} // closed when a signal is stored; nil: no one waits
}

// Swap implements InterruptSource.
func (a *AtomicInterrupt) Swap(v int32) int32 {
	old := a.v.Swap(v)
	if v != 0 {
		a.notify()
	}
	return old
}

// Load implements InterruptSource.
func (a *AtomicInterrupt) Load() int32 { return a.v.Load() }

// Store sets the pending signal.
func (a *AtomicInterrupt) Store(v int32) {
	a.v.Store(v)
	if v != 0 {
		a.notify()
	}
}

// notify wakes the goroutines in WaitInterrupt. It runs after the value is
// stored: a waiter either sees the value, or registered before notify
// took the lock and is woken.
func (a *AtomicInterrupt) notify() {
	a.mu.Lock()
	if a.wake != nil {
		close(a.wake)
		a.wake = nil
	}
	a.mu.Unlock()
}

// waitChan returns a channel closed when a signal is stored, or nil when
// one is pending.
func (a *AtomicInterrupt) waitChan() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.v.Load() != 0 {
		return nil
	}
	if a.wake == nil {
		a.wake = make(chan struct{})
	}
	return a.wake
}

// WaitInterrupt implements InterruptWaiter.
func (a *AtomicInterrupt) WaitInterrupt(ctx context.Context, d time.Duration) bool {
	wake := a.waitChan()
	if wake == nil {
		return true
	}
	var timeout <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-wake:
	case <-timeout:
	case <-ctx.Done():
	}
	return a.v.Load() != 0
}
