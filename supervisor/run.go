package supervisor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// run is one Execute in progress. What can stop it (the Python-time
// limit, the wall timeout, the caller's context, Cancel) calls stop from
// its own goroutine: a timer's, the context's, the caller's. Nothing waits
// for those events, so an execution that is not stopped costs no goroutine
// and no hand-off between goroutines.
type run struct {
	runHooks
	out     *pump // the execution's output callbacks, or nil
	grace   time.Duration
	clock   *pyClock
	calls   atomic.Int64
	start   time.Time // when the execution (and its clock) started
	wall    *time.Timer
	stopCtx func() bool
	// wallTimeout is Config.WallTimeout (0: none), which bounds the wait
	// for the output callbacks too (awaitOutput).
	wallTimeout time.Duration
	// id is the request's id once sent (0 before), for runHooks.returned.
	id atomic.Uint64

	mu  sync.Mutex
	why error // why the execution was stopped, or nil
	// afterReturn says the stop came after the code returned (see
	// runHooks.returned): the code was not interrupted.
	afterReturn bool
	ended       bool
	killed      bool
	inC         bool        // killed before the code took the interrupt
	procStopped bool        // killed while its process was stopped
	expiry      *time.Timer // the grace period, once stopped
	again       *time.Timer // the next interrupt of the grace period (interruptAgain)
	// ctx is the context of the bridge callbacks the code makes, made on
	// the first call; it is cancelled when the execution is stopped or ends.
	ctx    context.Context
	cancel context.CancelFunc
	slots  chan struct{} // the bridge callbacks' slots, made on the first call
}

// bridgeSlots returns the execution's n slots for bridge callbacks.
func (r *run) bridgeSlots(n int) chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.slots == nil {
		r.slots = make(chan struct{}, n)
	}
	return r.slots
}

// valueRunConfig is cfg's limits for a request that moves a value in or
// out (GetVariable, SetVariable, Initialize) and may run the sandbox's own
// code on the way (a __repr__, __iter__, __del__): Timeout, but never
// less than DefaultTimeout, since a large value takes its time to cross
// (1.9 GB: 23 s), and no WallTimeout, which bounds executions.
func valueRunConfig(cfg Config) Config {
	if cfg.Timeout > 0 && cfg.Timeout < DefaultTimeout {
		cfg.Timeout = DefaultTimeout
	}
	cfg.WallTimeout = 0
	return cfg
}

// runHooks are how a run acts on its interpreter.
type runHooks struct {
	interrupt func() // raises KeyboardInterrupt in the running code
	kill      func() // ends an interpreter whose code did not return in time
	// untaken reports whether the interrupt still waits for the code to
	// take it: the code is in a long call in C, which takes interrupts
	// only once it returns to Python.
	untaken func() bool
	// waitTaken says the kill acts only once the code takes the interrupt
	// (direct mode, where nothing preempts a call in C): while it has not,
	// the grace period starts again instead.
	waitTaken bool
	// frozen, when set, reports whether the interpreter's process is
	// stopped (SIGSTOP), which is why it takes no interrupt.
	frozen func() bool
	// returned, when set, is the id of the request whose code returned
	// last, which the host learns before its reply (worker mode, where a
	// slow consumer of the output holds up the reply: ipc.Page.Returned).
	returned func() uint64
}

// codeReturned reports whether the run's code is known to have returned
// before its reply was read.
func (r *run) codeReturned() bool {
	if r.returned == nil {
		return false
	}
	id := r.id.Load()
	return id != 0 && r.returned() == id
}

// stoppedAfterReturn reports whether the run was stopped only after its
// code had returned: what it reports is the code's own result, and
// whether the output callbacks had every line.
func (r *run) stoppedAfterReturn() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.afterReturn
}

// newRun starts the clocks of an execution, whose interpreter h acts on
// and whose output callbacks run on out (nil: none, or not an execution).
func newRun(ctx context.Context, cfg Config, h runHooks, out *pump) *run {
	r := &run{runHooks: h, out: out, grace: cfg.GracePeriod}
	r.clock = newPyClock(cfg.Timeout, func() {
		r.stop(fmt.Errorf("%w (ran Python for %v)", ErrTimeout, cfg.Timeout))
	})
	r.start = r.clock.since
	if cfg.WallTimeout > 0 {
		r.wallTimeout = cfg.WallTimeout
		r.wall = time.AfterFunc(cfg.WallTimeout, func() { r.stop(r.wallErr()) })
	}
	r.stopCtx = context.AfterFunc(ctx, func() {
		r.stop(fmt.Errorf("%w: %w", ErrCanceled, context.Cause(ctx)))
	})
	return r
}

// wallErr is why a run that reached its WallTimeout was stopped.
func (r *run) wallErr() error {
	return fmt.Errorf("%w (wall timeout of %v)", ErrTimeout, r.wallTimeout)
}

// stop ends the run for a reason (the first one counts): it raises the
// interrupt, tells the output callbacks' pump (a write waiting for them
// would keep the code from taking it), then cancels the bridge callbacks,
// so that a callback that returns its ctx.Err() at once is still reported
// as an interrupt, and kills the interpreter if the code has not returned
// GracePeriod later.
func (r *run) stop(why error) { r.stopRunning(why) }

// stopRunning is stop, and reports false when the run had ended (its code
// returned) before it could be stopped.
func (r *run) stopRunning(why error) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		return false
	}
	if r.why != nil {
		return true
	}
	r.why = why
	if r.codeReturned() {
		// Nothing to interrupt: the code has returned, and its reply
		// waits behind output that the callbacks have not had yet (worker
		// mode). The callbacks get GracePeriod, as after any stop, and
		// the execution is not reported as interrupted. The reply is then
		// read within moments; the expiry below still kills a worker whose
		// word that its code returned was not to be taken.
		r.afterReturn = true
	} else {
		r.interrupt()
		if r.grace > reinterruptAfter {
			r.again = time.AfterFunc(reinterruptAfter, r.interruptAgain)
		}
	}
	r.out.stop(why, r.grace)
	if r.cancel != nil {
		r.cancel()
	}
	r.expiry = time.AfterFunc(r.grace, r.expire)
	return true
}

// Code that takes the interrupt and runs on is interrupted again, from
// reinterruptAfter after the stop, every reinterruptEvery, until the grace
// period ends. LLM-written code catches KeyboardInterrupt without meaning
// to: a bare `except:` in a loop swallowed the one interrupt whenever it
// landed inside the try (a call's start) rather than on the loop's jump
// back, about half the time, and the sandbox was killed, its state lost.
// Clean-up that takes longer than reinterruptAfter may be interrupted
// in turn, as a second Ctrl-C interrupts it.
const (
	reinterruptAfter = 200 * time.Millisecond
	reinterruptEvery = 100 * time.Millisecond
)

// interruptAgain raises the interrupt again in code that took it and has
// not returned (not in code still in a call in C, for which it is still
// pending), and sets the next.
func (r *run) interruptAgain() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended || r.killed || r.afterReturn || r.codeReturned() {
		return
	}
	if r.untaken == nil || !r.untaken() {
		r.interrupt()
	}
	r.again = time.AfterFunc(reinterruptEvery, r.interruptAgain)
}

// destroyed stops the run of an interpreter that Destroy is ending: its
// code gets the interrupt, and its bridge callbacks their context
// cancelled, before Destroy returns; no grace period, since the
// interpreter (or its worker) is ended anyway.
func (r *run) destroyed() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		return
	}
	if r.why == nil {
		r.why = ErrDestroyed
		r.interrupt()
	}
	if r.cancel != nil {
		r.cancel()
	}
}

// cancelCount counts the calls of a sandbox's Cancel made while no run
// was under way. An Initialize or SetVariable looks at it while it
// converts a value (and, in a worker, stages it), before the run that
// Cancel reaches exists: it reads the count as it starts, and again once
// it has its turn. A Cancel while another call runs is that call's: it
// leaves a conversion waiting for its turn alone.
type cancelCount struct{ atomic.Uint64 }

// cancel counts a Cancel, unless it reaches the run r.
func (c *cancelCount) cancel(r *run) {
	if r == nil {
		c.Add(1)
	}
}

// errCancelCalled is the cause of a value's conversion or staging that
// Cancel ended.
var errCancelCalled = errors.New("Cancel was called")

// value converts a Go value as pythonValue does, and reports a Cancel
// made meanwhile as ErrCanceled.
func (c *cancelCount) value(value any) (any, error) {
	g := c.Load()
	v, err := pythonValue(value)
	if err == nil {
		err = c.since(g)
	}
	return v, err
}

// since reports, as ErrCanceled, a Cancel since the count was g.
func (c *cancelCount) since(g uint64) error {
	if c.Load() != g {
		return fmt.Errorf("%w: %w", ErrCanceled, errCancelCalled)
	}
	return nil
}

// cancelExecution is Cancel for a sandbox whose Execute in progress, if
// any, is the run r, whose output callbacks run on out: it stops r while
// its code runs (the callbacks then get GracePeriod to catch up), else
// abandons out, which is published only once its run is: the code has
// returned, and its callbacks may still be at work.
func cancelExecution(r *run, out *pump) {
	if r != nil && r.stopRunning(ErrCanceled) {
		return
	}
	out.abandon(ErrCanceled)
}

// stopped reports whether the run has been stopped.
func (r *run) stopped() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.why != nil
}

// expire runs at the end of the grace period.
func (r *run) expire() {
	r.mu.Lock()
	if r.ended {
		r.mu.Unlock()
		return
	}
	inC := r.untaken != nil && r.untaken()
	if inC && r.waitTaken {
		r.expiry = time.AfterFunc(r.grace, r.expire)
		r.mu.Unlock()
		return
	}
	r.killed, r.inC = true, inC
	r.procStopped = r.frozen != nil && r.frozen()
	if r.again != nil {
		r.again.Stop()
	}
	r.mu.Unlock()
	r.kill()
}

// killReason says why a run that was killed was: call it after end.
func (r *run) killReason() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.afterReturn {
		return fmt.Sprintf("its worker said the code had returned, yet sent no reply %v after the stop", r.grace)
	}
	if r.procStopped {
		return fmt.Sprintf("its process was stopped (SIGSTOP) %v after the interrupt", r.grace)
	}
	if r.inC {
		return fmt.Sprintf("the code was still in a call in C %v after the interrupt, which it takes only once back in Python", r.grace)
	}
	return "the code ignored KeyboardInterrupt"
}

// bridgeCtx returns the context of the run's bridge callbacks.
func (r *run) bridgeCtx() context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx == nil {
		r.ctx, r.cancel = context.WithCancel(context.Background())
		if r.why != nil || r.ended {
			r.cancel()
		}
	}
	return r.ctx
}

// end releases the run's timers and callbacks once the interpreter has
// returned. It reports why the run was stopped (nil if it was not) and
// whether the interpreter was killed; later calls of stop do nothing.
func (r *run) end() (why error, killed bool) {
	r.mu.Lock()
	r.ended = true
	why, killed = r.why, r.killed
	if r.expiry != nil {
		r.expiry.Stop()
	}
	if r.again != nil {
		r.again.Stop()
	}
	if r.cancel != nil {
		r.cancel()
	}
	r.mu.Unlock()
	r.stopCtx()
	if r.wall != nil {
		r.wall.Stop()
	}
	r.clock.stop()
	return why, killed
}

// pyClock measures the time an execution spends running Python, that is,
// not waiting for bridge callbacks, and calls expire once it exceeds the
// limit (if positive).
type pyClock struct {
	mu       sync.Mutex
	limit    time.Duration
	used     time.Duration // Python time before since
	since    time.Time     // when Python last resumed (when inflight is 0)
	inflight int           // bridge callbacks running
	timer    *time.Timer
	pending  bool // the timer is armed
	fired    bool
	stopped  bool
	expire   func()
}

func newPyClock(limit time.Duration, expire func()) *pyClock {
	c := &pyClock{limit: limit, since: time.Now(), expire: expire}
	if limit > 0 {
		c.pending = true
		c.timer = time.AfterFunc(limit, c.check)
	}
	return c
}

// check runs when the timer fires. The timer is left running while
// bridge callbacks pause the clock: when it fires early it is set again
// for the Python time left, or by leave if callbacks are running.
func (c *pyClock) check() {
	c.mu.Lock()
	c.pending = false
	if c.inflight > 0 || c.fired || c.stopped {
		c.mu.Unlock()
		return
	}
	used := c.used + time.Since(c.since)
	if used < c.limit {
		c.pending = true
		c.timer.Reset(c.limit - used)
		c.mu.Unlock()
		return
	}
	c.fired = true
	c.mu.Unlock()
	c.expire()
}

// enter pauses the clock for a bridge callback.
func (c *pyClock) enter() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inflight == 0 {
		c.used += time.Since(c.since)
	}
	c.inflight++
}

// leave resumes the clock when the last bridge callback returns.
func (c *pyClock) leave() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inflight--
	if c.inflight > 0 {
		return
	}
	c.since = time.Now()
	if c.timer != nil && !c.pending && !c.fired && !c.stopped {
		c.pending = true
		c.timer.Reset(max(c.limit-c.used, 0))
	}
}

// budget returns the limit (0: none) and the Python time used, once the
// clock is stopped.
func (c *pyClock) budget() (limit, used time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.limit, c.used
}

// stop stops the timer and returns the Python time so far.
func (c *pyClock) stop() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.stopped {
		c.stopped = true
		if c.timer != nil {
			c.timer.Stop()
		}
		if c.inflight == 0 {
			c.used += time.Since(c.since)
			c.since = time.Now()
		}
	}
	return c.used
}

// stoppedExecution is ce, the execution of a run stopped for why (nil: not
// stopped), whose code returned: one that ended without an exception had
// the interrupt come as it ended (in direct mode, after a call in C that
// was its last statement), and reports KeyboardInterrupt as its error, so
// that a stopped execution without one is always one that was killed.
func stoppedExecution(ce *CodeExecution, why error) *CodeExecution {
	if why != nil && ce.ErrorType == "" {
		ce.Error, ce.ErrorType = "KeyboardInterrupt", "KeyboardInterrupt"
	}
	return ce
}
