package runtime

import "sync/atomic"

// SIGINT is the signal number that raises KeyboardInterrupt in running code.
const SIGINT = 2

// InterruptSource holds the interpreter's pending signal. CPython's
// Emscripten build polls it about every 50 bytecodes: a non-zero value is
// taken (swapped with 0 in one atomic operation) and delivered as that
// signal. Store SIGINT to raise KeyboardInterrupt in running code.
//
// An in-process caller uses AtomicInterrupt; a worker process backs it with
// a page of memory shared with its supervisor.
type InterruptSource interface {
	Swap(v int32) int32
	Load() int32
}

// AtomicInterrupt is an in-process InterruptSource.
type AtomicInterrupt struct{ v atomic.Int32 }

// Swap implements InterruptSource.
func (a *AtomicInterrupt) Swap(v int32) int32 { return a.v.Swap(v) }

// Load implements InterruptSource.
func (a *AtomicInterrupt) Load() int32 { return a.v.Load() }

// Store sets the pending signal.
func (a *AtomicInterrupt) Store(v int32) { a.v.Store(v) }
