package supervisor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/runtime"
)

// direct is a sandbox whose interpreter runs in this process. Interrupts
// are real (KeyboardInterrupt through the interpreter's signal check), and
// code that ignores them is killed at its next bytecode; but C code that
// never returns to the interpreter cannot be stopped, and the memory of a
// destroyed interpreter goes back to the Go heap, not necessarily to the OS.
// A worker sandbox has neither limit.
type direct struct {
	cfg    Config
	info   Info
	in     *runtime.Interpreter
	intr   *runtime.AtomicInterrupt
	sem    chan struct{}
	inited atomic.Bool

	mu      sync.Mutex
	running *run // the Execute in progress, if any
	dead    error
	closed  bool
}

// run is one Execute in progress; stop ends it for a reason.
type run struct {
	once   sync.Once
	reason chan error // receives ErrTimeout or ErrCanceled once
}

func (r *run) stop(reason error) {
	r.once.Do(func() { r.reason <- reason })
}

func newDirect(ctx context.Context, cfg Config, reason string) (*direct, error) {
	intr := &runtime.AtomicInterrupt{}
	rc := cfg.runtimeConfig()
	rc.Interrupt = intr
	in, err := runtime.New(ctx, rc)
	if err != nil {
		return nil, fmt.Errorf("supervisor: start interpreter: %w", err)
	}
	d := &direct{cfg: cfg, in: in, intr: intr, sem: make(chan struct{}, 1)}
	d.info = Info{Reason: reason, PythonVersion: in.PythonVersion(), PyodideVersion: runtime.PyodideVersion}
	cfg.Logger.Info("sandbox started", "mode", "direct", "reason", reason)
	return d, nil
}

func (d *direct) Info() Info { return d.info }

// acquire takes the sandbox for one call.
func (d *direct) acquire(ctx context.Context) error {
	if err := d.usable(); err != nil {
		return err
	}
	select {
	case d.sem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrCanceled, ctx.Err())
	}
	if err := d.usable(); err != nil {
		<-d.sem
		return err
	}
	return nil
}

func (d *direct) release() { <-d.sem }

func (d *direct) usable() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrDestroyed
	}
	return d.dead
}

func (d *direct) Initialize(ctx context.Context, text string) error {
	if err := d.acquire(ctx); err != nil {
		return err
	}
	defer d.release()
	if err := d.in.Set(ctx, "context", text); err != nil {
		return d.fail("initialize", err)
	}
	d.inited.Store(true)
	return nil
}

func (d *direct) SetVariable(ctx context.Context, name string, v any) error {
	if err := d.acquire(ctx); err != nil {
		return err
	}
	defer d.release()
	if !d.inited.Load() {
		return ErrNotInitialized
	}
	if err := d.in.Set(ctx, name, v); err != nil {
		return d.fail("set variable", err)
	}
	return nil
}

func (d *direct) GetVariable(ctx context.Context, name string) (any, bool, error) {
	if err := d.acquire(ctx); err != nil {
		return nil, false, err
	}
	defer d.release()
	if !d.inited.Load() {
		return nil, false, ErrNotInitialized
	}
	v, found, err := d.in.Get(ctx, name)
	if err != nil {
		return nil, false, d.fail("get variable", err)
	}
	return v, found, nil
}

func (d *direct) Execute(ctx context.Context, code string) (*CodeExecution, error) {
	if err := d.acquire(ctx); err != nil {
		return nil, err
	}
	defer d.release()
	if !d.inited.Load() {
		return nil, ErrNotInitialized
	}
	r := &run{reason: make(chan error, 1)}
	d.mu.Lock()
	d.running = r
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.running = nil
		d.mu.Unlock()
	}()

	stdout := newCollector(d.cfg.MaxOutputLength, d.cfg.OnStdout)
	stderr := newCollector(d.cfg.MaxOutputLength, d.cfg.OnStderr)
	execCtx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	done := make(chan struct{})
	exited := make(chan struct{})
	var why error // written by the watchdog, read after it exits
	go func() {   // watchdog: interrupt on timeout or cancel, kill after grace
		defer close(exited)
		var timeout <-chan time.Time
		if d.cfg.Timeout > 0 {
			t := time.NewTimer(d.cfg.Timeout)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-done:
			return
		case <-timeout:
			why = ErrTimeout
		case <-ctx.Done():
			why = fmt.Errorf("%w: %w", ErrCanceled, context.Cause(ctx))
		case why = <-r.reason:
		}
		interrupt()
		grace := time.NewTimer(d.cfg.GracePeriod)
		defer grace.Stop()
		select {
		case <-done:
		case <-grace.C:
			d.cfg.Logger.Warn("code ignored the interrupt; killing the interpreter", "grace", d.cfg.GracePeriod)
			d.in.Close()
		}
	}()
	start := time.Now()
	res, err := d.in.Exec(execCtx, code, runtime.Output{Stdout: stdout, Stderr: stderr})
	close(done)
	<-exited
	ce := &CodeExecution{Code: code, Duration: time.Since(start)}
	ce.Stdout, ce.Stderr = stdout.String(), stderr.String()
	if res != nil {
		ce.Duration = res.Duration
		if res.Error != nil {
			ce.Error, ce.ErrorType, ce.Traceback = res.Error.Error(), res.Error.Type, res.Error.Traceback
		}
	}
	if err != nil {
		if errors.Is(err, runtime.ErrClosed) && why != nil {
			d.markDead(fmt.Errorf("%w: killed after ignoring the interrupt for %v", ErrDead, d.cfg.GracePeriod))
			return ce, fmt.Errorf("%w (the code ignored KeyboardInterrupt and was killed; the sandbox is dead)", why)
		}
		if errors.Is(err, runtime.ErrInterrupted) && why != nil {
			ce.Error, ce.ErrorType = "KeyboardInterrupt", "KeyboardInterrupt"
			return ce, why
		}
		return ce, d.fail("execute", err)
	}
	if why != nil {
		return ce, why
	}
	return ce, nil
}

// fail turns a runtime error into the supervisor's.
func (d *direct) fail(what string, err error) error {
	switch {
	case errors.Is(err, runtime.ErrClosed):
		if e := d.usable(); e != nil {
			return e
		}
		return ErrDestroyed
	case errors.Is(err, runtime.ErrDead):
		e := fmt.Errorf("%w: %w", ErrDead, err)
		d.markDead(e)
		return e
	}
	return fmt.Errorf("supervisor: %s: %w", what, err)
}

func (d *direct) markDead(err error) {
	d.mu.Lock()
	if d.dead == nil {
		d.dead = err
	}
	d.mu.Unlock()
}

func (d *direct) Cancel() {
	d.mu.Lock()
	r := d.running
	d.mu.Unlock()
	if r != nil {
		r.stop(ErrCanceled)
	}
}

func (d *direct) Destroy() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.mu.Unlock()
	return d.in.Close()
}
