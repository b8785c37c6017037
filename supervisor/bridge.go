package supervisor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// run is one Execute in progress.
type run struct {
	once   sync.Once
	reason chan error // receives ErrTimeout or ErrCanceled once

	// ctx is the context of the bridge callbacks the code makes; it is
	// cancelled when the execution is interrupted or ends.
	ctx    context.Context
	cancel context.CancelFunc
	clock  *pyClock
	calls  atomic.Int64
	start  time.Time // when the execution (and its clock) started
}

func newRun(timeout time.Duration) *run {
	r := &run{reason: make(chan error, 1), clock: newPyClock(timeout)}
	r.start = r.clock.since
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r
}

// stop ends the run for a reason.
func (r *run) stop(reason error) {
	r.once.Do(func() { r.reason <- reason })
}

// end releases the run's timer and callbacks.
func (r *run) end() {
	r.cancel()
	r.clock.stop()
}

// pyClock measures the time an execution spends running Python, that is,
// not waiting for bridge callbacks, and closes expired once it exceeds the
// limit (if positive).
type pyClock struct {
	mu       sync.Mutex
	limit    time.Duration
	used     time.Duration // Python time before since
	since    time.Time     // when Python last resumed (when inflight is 0)
	inflight int           // bridge callbacks running
	timer    *time.Timer
	expired  chan struct{}
	fired    bool
	stopped  bool
}

func newPyClock(limit time.Duration) *pyClock {
	c := &pyClock{limit: limit, since: time.Now(), expired: make(chan struct{})}
	if limit > 0 {
		c.timer = time.AfterFunc(limit, c.check)
	}
	return c
}

// check runs when the timer fires.
func (c *pyClock) check() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inflight > 0 || c.fired || c.stopped {
		return
	}
	used := c.used + time.Since(c.since)
	if used >= c.limit {
		c.fired = true
		close(c.expired)
		return
	}
	c.timer.Reset(c.limit - used)
}

// enter pauses the clock for a bridge callback.
func (c *pyClock) enter() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inflight == 0 {
		c.used += time.Since(c.since)
		if c.timer != nil {
			c.timer.Stop()
		}
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
	if c.timer != nil && !c.fired && !c.stopped {
		c.timer.Reset(max(c.limit-c.used, 0))
	}
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

// bridges answers the bridge calls of one sandbox's executions with the
// callbacks of its Config.
type bridges struct {
	cfg Config
	sem chan struct{} // MaxBridgeConcurrency slots

	mu      sync.Mutex
	context any // the value last passed to Initialize
}

func newBridges(cfg Config) *bridges {
	return &bridges{cfg: cfg, sem: make(chan struct{}, cfg.MaxBridgeConcurrency)}
}

func (b *bridges) setContext(v any) {
	b.mu.Lock()
	b.context = v
	b.mu.Unlock()
}

func (b *bridges) currentContext() any {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.context
}

// errNoRun answers a bridge call that arrives when no execution runs.
var errNoRun = errors.New("no execution is running")

// call runs one host callback for the execution r. Its waiting, for a slot
// and for the callback, does not count as Python time.
func (b *bridges) call(r *run, method string, args []any) (result any, err error) {
	if r == nil {
		return nil, errNoRun
	}
	r.calls.Add(1)
	r.clock.enter()
	defer r.clock.leave()
	select {
	case b.sem <- struct{}{}:
	case <-r.ctx.Done():
		return nil, r.ctx.Err()
	}
	defer func() { <-b.sem }()
	defer func() {
		if p := recover(); p != nil {
			b.cfg.Logger.Error("bridge callback panicked", "method", method, "panic", fmt.Sprint(p))
			err = fmt.Errorf("the host's %s callback failed (it panicked)", method)
		}
	}()
	switch method {
	case "llm_query":
		prompt, ok := arg[string](args, 0)
		if !ok || len(args) != 1 {
			return nil, fmt.Errorf("llm_query takes one str argument")
		}
		if b.cfg.OnLLMQuery == nil {
			return nil, errors.New("llm_query is not available: the host set no OnLLMQuery callback")
		}
		return b.cfg.OnLLMQuery(r.ctx, prompt)
	case "rlm_query":
		task, ok := arg[string](args, 0)
		if !ok || len(args) > 2 {
			return nil, fmt.Errorf("rlm_query takes a str task and an optional context")
		}
		if b.cfg.OnRLMQuery == nil {
			return nil, errors.New("rlm_query is not available: the host set no OnRLMQuery callback")
		}
		ctxValue := b.currentContext()
		if len(args) == 2 {
			ctxValue = args[1]
		}
		return b.cfg.OnRLMQuery(r.ctx, task, ctxValue)
	}
	return nil, fmt.Errorf("unknown bridge function %q", method)
}

func arg[T any](args []any, i int) (T, bool) {
	var zero T
	if i >= len(args) {
		return zero, false
	}
	v, ok := args[i].(T)
	return v, ok
}
