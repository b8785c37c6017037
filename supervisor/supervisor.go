package supervisor

import (
	"context"
	"errors"
	"fmt"

	"github.com/rlm-sandbox/rlm-sandbox/runtime"
)

// New returns a sandbox backed by an rlm-worker process when one can be
// started and cfg.UseWorker is not WorkerNever; otherwise a direct sandbox
// (which WorkerAlways forbids). Info().Reason says which was chosen and why,
// and the choice is logged.
func New(ctx context.Context, cfg Config) (Sandbox, error) {
	cfg = cfg.withDefaults()
	b, err := start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &managed{cfg: cfg, b: b}, nil
}

// NewDirect returns a sandbox that runs the interpreter in this process,
// whatever cfg.UseWorker says.
func NewDirect(ctx context.Context, cfg Config) (Sandbox, error) {
	cfg = cfg.withDefaults()
	cfg.UseWorker = WorkerNever
	b, err := newDirect(ctx, cfg, "direct mode requested")
	if err != nil {
		return nil, err
	}
	return &managed{cfg: cfg, b: b}, nil
}

// backend is a sandbox implementation; managed adds Restart on top.
type backend interface {
	Initialize(ctx context.Context, value any) error
	Execute(ctx context.Context, code string) (*CodeExecution, error)
	ExecuteInteractive(ctx context.Context, code string) (*CodeExecution, error)
	IsComplete(ctx context.Context, source string) (bool, error)
	Stats(ctx context.Context) (Stats, error)
	GetVariable(ctx context.Context, name string) (any, bool, error)
	SetVariable(ctx context.Context, name string, value any) error
	Cancel()
	Destroy() error
	Info() Info
	// healthy reports whether the interpreter can still run code.
	healthy() bool
}

func start(ctx context.Context, cfg Config) (backend, error) {
	if err := runtime.CheckMemoryLimit(cfg.MemoryLimit); err != nil {
		return nil, fmt.Errorf("supervisor: Config.MemoryLimit: %w", err)
	}
	if err := startCanceled(ctx); err != nil {
		return nil, err // as in worker mode, whose start waits on ctx; direct mode's did not look
	}
	if cfg.UseWorker == WorkerNever {
		return newDirect(ctx, cfg, "UseWorker is never")
	}
	w, err := newWorker(ctx, cfg)
	if err == nil {
		return w, nil
	}
	var broken brokenWorker
	if cfg.UseWorker == WorkerAlways || !errors.Is(err, ErrWorkerUnavailable) || errors.As(err, &broken) {
		return nil, err
	}
	cfg.Logger.Warn("worker unavailable; running in-process", "err", err)
	return newDirect(ctx, cfg, fmt.Sprintf("worker unavailable (%v)", err))
}

// startCanceled is the error of starting a sandbox (or handing one out)
// under a context that is already done, or nil.
func startCanceled(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	return canceledStart{context.Cause(ctx)}
}

// canceledStart is startCanceled's error: it matches ErrCanceled and the
// context's error, and says what was cancelled (ErrCanceled's text says
// "execution").
type canceledStart struct{ cause error }

func (e canceledStart) Error() string {
	return "supervisor: start a sandbox: canceled: " + e.cause.Error()
}
func (e canceledStart) Unwrap() []error { return []error{ErrCanceled, e.cause} }
