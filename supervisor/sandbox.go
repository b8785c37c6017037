package supervisor

import (
	"context"
	"time"
)

// Sandbox runs Python code for one agent. Both implementations (a worker
// process, or the interpreter in this process) behave the same.
//
// Calls on one sandbox are serialised: a call made while another runs waits
// for it (or for its own context). Cancel and Destroy never wait.
type Sandbox interface {
	// Initialize makes text the Python global `context`. It may be called
	// again to replace it.
	Initialize(ctx context.Context, text string) error
	// Execute runs code in the persistent __main__ namespace. A Python
	// exception is reported in the CodeExecution, not as an error. On
	// timeout or cancellation it returns the CodeExecution so far (with
	// what was printed) and an error matching ErrTimeout or ErrCanceled.
	Execute(ctx context.Context, code string) (*CodeExecution, error)
	// GetVariable returns a global of __main__ converted to Go (see
	// runtime.Interpreter.Get for the types); found is false when there is
	// no such global.
	GetVariable(ctx context.Context, name string) (value any, found bool, err error)
	// SetVariable binds a global of __main__ to a Go value.
	SetVariable(ctx context.Context, name string, value any) error
	// Cancel interrupts the running Execute (KeyboardInterrupt; killed
	// after the grace period if it does not stop). It does nothing when
	// nothing runs.
	Cancel()
	// Restart replaces the sandbox's interpreter (or worker process) with a
	// fresh one, for example after it was killed (ErrDead). Everything the
	// old one held is gone, `context` included: call Initialize again.
	Restart(ctx context.Context) error
	// Destroy releases the sandbox. It is idempotent, safe to call at any
	// time, and ends a running Execute.
	Destroy() error
	// Info says how the sandbox runs.
	Info() Info
}

// Info describes a sandbox.
type Info struct {
	// Worker is true when the interpreter runs in an rlm-worker process.
	Worker bool
	// Reason says why this mode was chosen.
	Reason string
	// PID is the worker's process id (0 in direct mode).
	PID int
	// PythonVersion and PyodideVersion of the interpreter.
	PythonVersion, PyodideVersion string
}

// CodeExecution is the result of Execute.
type CodeExecution struct {
	Code   string
	Stdout string
	Stderr string
	// Error is "Type: message" of the exception the code raised, or "".
	Error string
	// ErrorType is the exception's class name, e.g. "ZeroDivisionError".
	ErrorType string
	// Traceback is the formatted traceback, without colour codes.
	Traceback string
	Duration  time.Duration
}
