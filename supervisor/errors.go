package supervisor

import (
	"errors"
	"fmt"
	"strings"
)

// Errors callers can test with errors.Is. Python exceptions are not errors
// of Execute: they are reported in CodeExecution.
var (
	// ErrNotInitialized: Execute, GetVariable or SetVariable before Initialize.
	ErrNotInitialized = errors.New("supervisor: sandbox not initialized")
	// ErrDestroyed: a call on a sandbox after Destroy.
	ErrDestroyed = errors.New("supervisor: sandbox destroyed")
	// ErrTimeout: the code ran longer than Config.Timeout.
	ErrTimeout = errors.New("supervisor: execution timed out")
	// ErrCanceled: the execution was cancelled by Cancel or by its context.
	ErrCanceled = errors.New("supervisor: execution canceled")
	// ErrDead: the sandbox's interpreter is gone (killed after ignoring an
	// interrupt, crashed, or exited); create a new sandbox or call Restart.
	ErrDead = errors.New("supervisor: sandbox is dead")
	// ErrWorkerExited: the worker process ended; it also matches ErrDead.
	ErrWorkerExited = errors.New("supervisor: worker process exited")
	// ErrWorkerUnavailable: UseWorker is WorkerAlways but no worker could be
	// started.
	ErrWorkerUnavailable = errors.New("supervisor: worker unavailable")
	// ErrProtocol: the worker sent something the supervisor does not
	// understand.
	ErrProtocol = errors.New("supervisor: protocol error")
	// ErrPoolClosed: Pool.Get after Pool.Close.
	ErrPoolClosed = errors.New("supervisor: pool closed")
	// ErrInvalidName: SetVariable of a name that Python code could not use
	// as a variable: not an identifier ("my var", "1x", ""), or a keyword.
	ErrInvalidName = errors.New("supervisor: not a Python variable name")
	// ErrTooLarge reports code too large to send to a worker, which takes
	// it in one message of at most 64 MiB (direct mode has no such limit;
	// large data goes in with Initialize or SetVariable, which have none),
	// and a value too large to come back from one (GetVariable of more
	// than 64 MiB, encoded).
	ErrTooLarge = errors.New("supervisor: too large for a worker")
	// ErrOutOfMemory: the worker was killed (SIGKILL, not the supervisor's)
	// while the kernel's out-of-memory killer killed in its memory cgroup
	// (a container's, when in one), on Linux; it comes with
	// ErrWorkerExited and ErrDead, or, during start-up, with
	// ErrWorkerUnavailable. The machine or container ran out of memory; a
	// MemoryLimit makes the sandbox fail allocations with MemoryError
	// before that.
	ErrOutOfMemory = errors.New("supervisor: worker killed for want of memory")
)

// workerDead is the error of a sandbox whose worker process is gone: it
// matches ErrWorkerExited and ErrDead (and what why matches), and names
// the prefix once.
func workerDead(why error) error {
	errs := []error{ErrWorkerExited, ErrDead}
	if why != nil {
		errs = append(errs, why)
	}
	return &joinedError{msg: fmt.Sprintf("supervisor: worker process exited, the sandbox is dead (%v)", why), errs: errs}
}

// joinedError is an error with its own message that matches several.
type joinedError struct {
	msg  string
	errs []error
}

func (e *joinedError) Error() string   { return e.msg }
func (e *joinedError) Unwrap() []error { return e.errs }

// opError is err with the operation that failed named once: the error of
// a step that says "supervisor: " itself is not prefixed twice
// ("supervisor: initialize: supervisor: execution canceled: ...").
func opError(op string, err error) error {
	return &joinedError{msg: "supervisor: " + op + ": " + strings.TrimPrefix(err.Error(), "supervisor: "), errs: []error{err}}
}
