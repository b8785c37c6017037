package runtime

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// The signal clock spaces out CPython's periodic signal checks in long
// runs, and makes the guest check at once when a signal comes.
//
// CPython's Emscripten build counts down _Py_emscripten_signal_clock at
// every eval-breaker check (a backward jump, a call, a generator's resume)
// and, every 50, calls the host (_Py_CheckEmscriptenSignals_Helper) for a
// pending signal: the only way code that never blocks learns of an
// interrupt. Each call leaves the guest's machine code for Go and back,
// about a tenth of a microsecond, tens of thousands of times a second in
// interpreter-bound code: 4% of an RLM iteration's time (RATIONALE.md,
// "The signal clock").
//
// The clock is a word of guest memory that the host may write. Once a
// request's run has made signalClockEngage checks (a long run), a watcher
// goroutine waits on the interrupt source, and each check sets the clock
// to signalClockLong: the host is called 20 times less often.
// When a signal comes (or Close kills the interpreter), the watcher sets
// the clock to 1, so that the guest checks at its next eval-breaker check,
// as soon as it would have with CPython's own interval. The guest's own
// decrement is a load and a store that can overwrite the watcher's store,
// so the watcher stores again, at growing intervals, until the signal is
// taken. When the run ends, the watcher is stopped and the clock gets
// CPython's interval back, for the short runs that never engage it.
type signalClock struct {
	word *uint32 // _Py_emscripten_signal_clock in guest memory
	intr InterruptWaiter
	kill context.Context // the interpreter's killCtx

	// Touched only by the goroutine running the guest.
	inRun  bool
	checks int
	w      *clockWatch

	watchers sync.WaitGroup // the watchers not yet returned
}

// clockWatch is a running watcher.
type clockWatch struct {
	cancel context.CancelFunc // ends its wait
	ended  chan struct{}      // closed when the run ends
}

const (
	// signalClockEngage is the number of signal checks (of 50 eval-breaker
	// checks each) after which a run is long enough for a watcher: about
	// 0.1-1 ms of Python, against the few microseconds the watcher costs.
	signalClockEngage = 256
	// signalClockLong is the countdown once a watcher runs: the host is
	// called 20 times less often than with CPython's interval, and code
	// that makes eval-breaker checks at a good pace (a tight loop: every
	// 5-20 ns) still sees a signal within microseconds without the
	// watcher. That one needs a processor to run on, and the supervisor
	// and the guest may hold both of a small machine's for milliseconds:
	// with a countdown of 2^20, cancelling a tight loop took 1.5-1.9 ms
	// instead of 0.2-0.6.
	signalClockLong = 1000
	// signalClockCPython is CPython's own interval
	// (PY_EMSCRIPTEN_SIGNAL_INTERVAL).
	signalClockCPython = 50
)

// newSignalClock returns the clock for the guest word at word, or nil
// (CPython's own interval throughout) when there is no such word or intr
// cannot wake a watcher.
func newSignalClock(word *uint32, intr InterruptWaiter, kill context.Context) *signalClock {
	if word == nil {
		return nil
	}
	if _, ok := intr.(polled); ok {
		return nil // a watcher would poll every millisecond
	}
	return &signalClock{word: word, intr: intr, kill: kill}
}

// begin marks the start of a request's run.
func (c *signalClock) begin() {
	if c != nil {
		c.inRun, c.checks = true, 0
	}
}

// checked is called by each signal check that found no signal.
func (c *signalClock) checked() {
	if !c.inRun {
		return
	}
	if c.w == nil {
		if c.checks++; c.checks < signalClockEngage {
			return
		}
		c.engage()
	}
	atomic.StoreUint32(c.word, signalClockLong)
}

func (c *signalClock) engage() {
	ctx, cancel := context.WithCancel(c.kill)
	w := &clockWatch{cancel: cancel, ended: make(chan struct{})}
	c.w = w
	c.watchers.Add(1)
	go c.watch(ctx, w)
}

// watch makes the guest check at once when a signal comes or the
// interpreter is killed, until the run ends.
func (c *signalClock) watch(ctx context.Context, w *clockWatch) {
	defer c.watchers.Done()
	for {
		pending := c.intr.WaitInterrupt(ctx, -1)
		select {
		case <-w.ended:
			return
		default:
		}
		if c.kill.Err() != nil {
			c.urge(w, func() bool { return true }) // until the run unwinds
			return
		}
		if pending {
			c.urge(w, func() bool { return c.intr.Load() != 0 })
		}
	}
}

// urge sets the clock to 1 while more is true and the run goes on, again
// after 50 µs, 100 µs … up to every 10 ms.
func (c *signalClock) urge(w *clockWatch, more func() bool) {
	d := 50 * time.Microsecond
	t := time.NewTimer(d)
	defer t.Stop()
	for more() {
		atomic.StoreUint32(c.word, 1)
		select {
		case <-w.ended:
			return
		case <-t.C:
		}
		d = min(2*d, 10*time.Millisecond)
		t.Reset(d)
	}
}

// end marks the end of a request's run: it stops the watcher and gives
// the clock CPython's interval back. It does not wait for the watcher to
// return (a store of 1 it makes meanwhile costs the next run one check):
// the goroutine running the guest would block, and the scheduler then
// tends to resume it on the watcher's thread, on the other core, away
// from the guest's data in its caches (the steps after a long one ran
// 20-50 µs slower).
func (c *signalClock) end() {
	if c == nil {
		return
	}
	if w := c.w; w != nil {
		close(w.ended)
		w.cancel()
		c.w = nil
	}
	c.inRun = false
	atomic.StoreUint32(c.word, signalClockCPython)
}

// wait waits for the watchers to return, before the guest's memory goes.
func (c *signalClock) wait() {
	if c != nil {
		c.watchers.Wait()
	}
}
