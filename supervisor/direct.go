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
	cfg     Config
	info    Info
	in      *runtime.Interpreter
	intr    *runtime.AtomicInterrupt
	sem     chan struct{}
	inited  atomic.Bool
	bridges *bridges
	started time.Time
	running atomic.Pointer[run]  // the Execute in progress, if any
	output  atomic.Pointer[pump] // its output callbacks' pump, until they are done
	cancels cancelCount          // Cancel's calls, for a value's conversion

	mu     sync.Mutex
	dead   error
	closed bool
}

func newDirect(ctx context.Context, cfg Config, reason string) (*direct, error) {
	intr := &runtime.AtomicInterrupt{}
	d := &direct{cfg: cfg, intr: intr, sem: make(chan struct{}, 1), bridges: newBridges(cfg)}
	rc := cfg.runtimeConfig()
	rc.Interrupt = intr
	rc.Bridge = func(_ context.Context, method string, args []any) (any, error) {
		return d.bridges.call(d.running.Load(), method, args)
	}
	rc.BridgeConcurrency = cfg.MaxBridgeConcurrency
	in, err := runtime.New(ctx, rc)
	if err != nil {
		return nil, fmt.Errorf("supervisor: start interpreter: %w", err)
	}
	d.in = in
	d.started = time.Now()
	d.info = Info{Reason: reason, PythonVersion: in.PythonVersion(), PyodideVersion: runtime.PyodideVersion,
		HardeningRefused: []string{directRefusal}}
	cfg.Logger.Info("sandbox started", "mode", "direct", "reason", reason)
	return d, nil
}

func (d *direct) Info() Info { return d.info }

// acquire takes the sandbox for one call.
func (d *direct) acquire(ctx context.Context) error {
	if err := d.usable(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil { // select would pick a free slot half the time
		return fmt.Errorf("%w: %w", ErrCanceled, err)
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

func (d *direct) Initialize(ctx context.Context, value any) error {
	v, err := d.cancels.value(value)
	if err != nil {
		return fmt.Errorf("supervisor: initialize: context: %w", err)
	}
	if err := d.acquire(ctx); err != nil {
		return err
	}
	defer d.release()
	if err := d.underRun(ctx, "initialize", func() error { return d.in.SetContext(context.Background(), v) }); err != nil {
		return err
	}
	d.bridges.setContext(value)
	d.inited.Store(true)
	return nil
}

func (d *direct) SetVariable(ctx context.Context, name string, value any) error {
	v, err := d.cancels.value(value)
	if err != nil {
		return fmt.Errorf("supervisor: set variable %s: %w", name, err)
	}
	if err := d.acquire(ctx); err != nil {
		return err
	}
	defer d.release()
	if !d.inited.Load() {
		return ErrNotInitialized
	}
	err = d.underRun(ctx, "set variable "+name, func() error {
		if name == "context" {
			return d.in.SetContext(context.Background(), v)
		}
		return d.in.Set(context.Background(), name, v)
	})
	if err != nil {
		return err
	}
	if name == "context" {
		d.bridges.setContext(value)
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
	var v any
	var found bool
	err := d.underRun(ctx, "get variable "+name, func() (err error) {
		v, found, err = d.in.Get(context.Background(), name)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return v, found, nil
}

// underRun runs f, a request other than Execute that may run the
// sandbox's own Python code (converting a value calls its __repr__ or
// __iter__, replacing one its __del__), under the limits of an Execute
// but for the time (valueRunConfig): the caller's ctx, Cancel and the
// time limit interrupt it, and an interpreter that ignores the interrupt
// is killed after GracePeriod.
func (d *direct) underRun(ctx context.Context, what string, f func() error) error {
	r := newRun(ctx, valueRunConfig(d.cfg), d.runHooks(), nil)
	d.running.Store(r)
	err := f()
	d.running.Store(nil)
	why, killed := r.end()
	if why != nil {
		d.intr.Swap(0) // a stop that came after f returned left the interrupt pending
	}
	if killed {
		d.markStubborn() // the kill may still be on its way
	}
	switch {
	case killed:
		return fmt.Errorf("supervisor: %s: %w (%s, and was killed; the sandbox is dead: %w)", what, why, r.killReason(), d.usable())
	case err == nil && d.usable() == ErrDestroyed:
		// Destroy came while f ran: what f did is gone with the
		// interpreter, as a worker's is (whose reply never comes).
		return fmt.Errorf("supervisor: %s: %w", what, ErrDestroyed)
	case err == nil:
		return nil
	case why != nil: // interrupted (the code may have turned the interrupt into another error)
		return fmt.Errorf("supervisor: %s: %w", what, why)
	}
	return d.fail(what, err)
}

func (d *direct) Execute(ctx context.Context, code string) (*CodeExecution, error) {
	return d.execute(ctx, code, false)
}

func (d *direct) ExecuteInteractive(ctx context.Context, code string) (*CodeExecution, error) {
	return d.execute(ctx, code, true)
}

func (d *direct) execute(ctx context.Context, code string, interactive bool) (*CodeExecution, error) {
	if err := d.acquire(ctx); err != nil {
		return nil, err
	}
	defer d.release()
	if !d.inited.Load() {
		return nil, ErrNotInitialized
	}
	streams, pump := newStreams(d.cfg)
	stdout, stderr := streams.stdout, streams.stderr
	r := newRun(ctx, d.cfg, d.runHooks(), pump)
	d.running.Store(r)
	d.output.Store(pump) // after the run: see Cancel
	defer d.output.Store(nil)
	// The interpreter runs under a context that is never cancelled: the
	// run raises the interrupt itself, and cancels the bridge callbacks'
	// own context.
	out := runtime.Output{Stdout: stdout, Stderr: stderr}
	var res *runtime.Result
	var err error
	if interactive {
		res, err = d.in.ExecInteractive(context.Background(), code, out)
	} else {
		res, err = d.in.Exec(context.Background(), code, out)
	}
	d.running.Store(nil)
	why, killed := r.end()
	if why != nil {
		// A stop that came after the code returned left the interrupt
		// pending: it must not hit the next call.
		d.intr.Swap(0)
	}
	ce := &CodeExecution{Code: code, PythonDuration: r.clock.stop()}
	ce.BridgeCalls = int(r.calls.Load())
	ce.Stdout, ce.Stderr = stdout.String(), stderr.String()
	outErr := awaitOutput(ctx, r)
	ce.Duration = time.Since(r.start)
	ce.Truncated = stdout.truncated() || stderr.truncated()
	if res != nil && res.Error != nil {
		var exit *Exit
		if x := res.Error.Exit; x != nil {
			exit = &Exit{Status: x.Status, Stderr: x.Stderr}
		}
		ce.setError(res.Error.Error(), res.Error.Type, res.Error.Traceback, exit, d.cfg.MaxOutputLength)
	}
	if killed {
		d.markStubborn() // the kill may still be on its way (the code returned as the grace period ended)
		return ce, fmt.Errorf("%w (%s, and was killed; the sandbox is dead: %w)", why, r.killReason(), d.usable())
	}
	if err != nil {
		if errors.Is(err, runtime.ErrInterrupted) && why != nil {
			ce.Error, ce.ErrorType = "KeyboardInterrupt", "KeyboardInterrupt"
			return ce, why
		}
		if why != nil { // the interrupt is why, whatever came of it
			if failed := d.fail("execute", err); !errors.Is(failed, why) {
				return ce, fmt.Errorf("%w: %w", why, failed)
			}
			return ce, why // Destroy's: "sandbox destroyed", once
		}
		return ce, d.fail("execute", err)
	}
	if why != nil {
		return stoppedExecution(ce, why), why
	}
	return ce, outErr
}

// interrupt raises KeyboardInterrupt in the running code.
func (d *direct) interrupt() { d.intr.Store(runtime.SIGINT) }

// runHooks are how a run acts on the interpreter: code that ignores the
// interrupt GracePeriod after taking it is killed; a call in C, which
// nothing preempts here, is waited for (the interrupt is taken once it
// returns).
func (d *direct) runHooks() runHooks {
	return runHooks{interrupt: d.interrupt, kill: d.kill, untaken: func() bool { return d.intr.Load() != 0 }, waitTaken: true}
}

// kill ends an interpreter whose code ignored the interrupt.
func (d *direct) kill() {
	d.cfg.Logger.Warn("code ignored the interrupt; killing the interpreter", "grace", d.cfg.GracePeriod)
	d.markStubborn()
	d.in.Close()
}

// markStubborn marks the sandbox dead for code that ignored the interrupt.
func (d *direct) markStubborn() {
	d.markDead(fmt.Errorf("%w: killed after ignoring the interrupt for %v", ErrDead, d.cfg.GracePeriod))
}

func (d *direct) IsComplete(ctx context.Context, source string) (bool, error) {
	if err := d.acquire(ctx); err != nil {
		return false, err
	}
	defer d.release()
	var ok bool
	err := d.underRun(ctx, "is complete", func() (err error) {
		ok, err = d.in.IsComplete(context.Background(), source)
		return err
	})
	return ok, err
}

func (d *direct) Stats(ctx context.Context) (Stats, error) {
	if err := d.usable(); err != nil {
		return Stats{}, err
	}
	if err := ctx.Err(); err != nil {
		return Stats{}, fmt.Errorf("%w: %w", ErrCanceled, err)
	}
	return Stats{
		HardeningRefused:  d.info.HardeningRefused,
		LinearMemoryBytes: d.in.MemorySize(),
		Executions:        uint64(d.in.Executions()),
		Uptime:            time.Since(d.started),
	}, nil
}

// directRefusal is why a direct sandbox is not locked down.
const directRefusal = "all: direct mode runs the interpreter in the calling process, which cannot be locked down; only the WebAssembly boundary confines the code"

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
	r := d.running.Load()
	d.cancels.cancel(r)
	cancelExecution(r, d.output.Load())
}

func (d *direct) Destroy() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.mu.Unlock()
	d.output.Load().abandon(ErrDestroyed)
	if r := d.running.Load(); r != nil {
		// As when a worker is killed: the code's bridge callbacks see
		// their context cancelled, and no other starts (a batch of 200
		// llm_query calls went on calling the host's model for as long
		// as the interpreter took to notice). The code may be in a call
		// in C, which nothing preempts here: the interpreter is closed
		// when the call returns, not waited for.
		r.destroyed()
		go d.in.Close()
		return nil
	}
	return d.in.Close()
}

func (d *direct) healthy() bool { return d.usable() == nil }
