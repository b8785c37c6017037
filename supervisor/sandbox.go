package supervisor

import (
	"context"
	"time"
)

// Sandbox runs Python code for one agent. Both implementations (a worker
// process, or the interpreter in this process) behave the same, but for
// what a process boundary brings: a worker passes a bridge answer or a
// GetVariable value in one frame of at most 64 MiB, and is killed when
// its code does not stop, where direct mode cannot stop a long C call
// (see the README).
//
// Calls on one sandbox are serialised: a call made while another runs waits
// for it (or for its own context). Cancel, Destroy and Restart do not wait.
type Sandbox interface {
	// Initialize makes value the Python global `context`: a string
	// becomes a str, and any JSON-like Go value (maps with string keys,
	// slices, numbers, bools, nil, and values encoding/json can marshal)
	// becomes the matching Python object; a map with number, bool or
	// interface keys (map[any]any, as YAML decoders make) becomes a dict
	// with those keys (map[int]string{1: "a"} is {1: 'a'}), where other
	// map keys arrive as their JSON text. A Go map's keys
	// arrive sorted (a map has no order); a json.RawMessage, a struct or a value with
	// its own MarshalJSON arrives with its members in their JSON order,
	// as json.loads would give them, and so does a runtime.Dict. It may
	// be called again to
	// replace it. Large strings (hundreds of MB) are fine: they reach
	// Python without being turned into Python source, and the sandbox
	// keeps a reference to value, not a copy (rlm_query passes it to
	// OnRLMQuery).
	Initialize(ctx context.Context, value any) error
	// Execute runs code in the persistent __main__ namespace. A Python
	// exception is reported in the CodeExecution, not as an error. On
	// timeout or cancellation it returns the CodeExecution so far (with
	// what was printed) and an error matching ErrTimeout or ErrCanceled.
	// A worker takes code of at most 64 MiB (less 1 KiB): more fails with
	// ErrTooLarge, and the sandbox goes on.
	Execute(ctx context.Context, code string) (*CodeExecution, error)
	// ExecuteInteractive is Execute the way Python's interactive prompt
	// runs code: when the code's last statement is an expression, its
	// value is shown through sys.displayhook (its repr on stdout, nothing
	// for None) and bound to _.
	ExecuteInteractive(ctx context.Context, code string) (*CodeExecution, error)
	// IsComplete reports whether source is complete Python input, as
	// Python's prompt decides between ">>>" and "...": false means more
	// lines are needed (an open block, bracket or string). Input with a
	// syntax error counts as complete: executing it reports the error.
	IsComplete(ctx context.Context, source string) (bool, error)
	// Stats reports the sandbox's resource use. A worker answers at once,
	// even while code runs; only ctx bounds the wait for a worker process
	// that is stopped (SIGSTOP) rather than running.
	Stats(ctx context.Context) (Stats, error)
	// GetVariable returns a global of __main__ converted to Go (see
	// runtime.Interpreter.Get for the types); found is false when there is
	// no such global. Converting a value can run the sandbox's own code
	// (its __repr__, a list subclass's __iter__), so GetVariable runs under
	// limits: ctx and Cancel interrupt it (ErrCanceled), and so does
	// Timeout (ErrTimeout), but never before DefaultTimeout (a large value
	// takes its time to cross); code that ignores the interrupt is killed
	// after GracePeriod (the sandbox is then dead, ErrDead). From a
	// worker, the value comes back in one frame of at most 64 MiB: a larger
	// one is an error, and the sandbox goes on; direct mode has no such
	// limit.
	GetVariable(ctx context.Context, name string) (value any, found bool, err error)
	// SetVariable binds a global of __main__ to a Go value, under the same
	// limits as GetVariable (the value it replaces may run its __del__), as
	// Initialize does. name must be one Python code can use: an identifier
	// (str.isidentifier) that is not a keyword, else ErrInvalidName. As
	// in code, it names the variable of its NFKC form (Python's parser
	// reads identifiers so: "ｘ" is x); so does GetVariable's.
	SetVariable(ctx context.Context, name string, value any) error
	// Cancel interrupts the running Execute, GetVariable or SetVariable
	// (KeyboardInterrupt; killed after the grace period if it does not
	// stop); when no such call runs, an Initialize or SetVariable still
	// converting its value ends with ErrCanceled, setting nothing. It does
	// nothing when nothing runs.
	Cancel()
	// Restart replaces the sandbox's interpreter (or worker process) with a
	// fresh one, for example after it was killed (ErrDead). Everything the
	// old one held is gone, `context` included: call Initialize again. It
	// does not wait for a running call: that call ends as Destroy would end
	// it (ErrDestroyed).
	Restart(ctx context.Context) error
	// Destroy releases the sandbox. It is idempotent, safe to call at any
	// time, and ends a running Execute: by the time it returns, the
	// context of that Execute's bridge callbacks is cancelled, and no
	// other callback of it starts.
	Destroy() error
	// Info says how the sandbox runs.
	Info() Info
}

// Info describes a sandbox.
type Info struct {
	// Worker is true when the interpreter runs in a worker process:
	// rlm-worker, or the running program re-executed as one (see the
	// package documentation).
	Worker bool
	// Reason says why this mode was chosen.
	Reason string
	// PID is the worker's process id (0 in direct mode).
	PID int
	// PythonVersion and PyodideVersion of the interpreter.
	PythonVersion, PyodideVersion string
	// Hardening lists the lock-down layers applied to the worker process:
	// "pgid" (a process group of its own), "userns" and "netns" (new user
	// and network namespaces: no network interface), and those the worker
	// applied to itself, "rlimits", "no_new_privs", "landlock", "seccomp".
	// Empty in direct mode and with HardeningOff.
	Hardening []string
	// HardeningRefused lists, as "layer: why", what could not be applied
	// (the kernel refused it, or direct mode cannot).
	HardeningRefused []string
}

// Stats is a sandbox's resource use.
type Stats struct {
	// Worker and PID as in Info.
	Worker bool
	PID    int
	// RSSBytes is the worker process's resident memory (0 in direct mode).
	RSSBytes uint64
	// LinearMemoryBytes is the size of the interpreter's WebAssembly memory.
	LinearMemoryBytes uint64
	// Executions counts the executions run so far.
	Executions uint64
	// Uptime is the time since the interpreter started.
	Uptime time.Duration
	// Hardening and HardeningRefused as in Info.
	Hardening, HardeningRefused []string
}

// CodeExecution is the result of Execute.
type CodeExecution struct {
	Code   string
	Stdout string
	Stderr string
	// Error is "Type: message" of the exception the code raised, or "".
	// Like Stdout, it is cut to MaxOutputLength characters.
	Error string
	// ErrorType is the exception's class name, e.g. "ZeroDivisionError".
	ErrorType string
	// Traceback is the formatted traceback, without colour codes, cut to
	// MaxOutputLength characters. Its frames are as CPython formats them;
	// a stack of more than 1,200 frames and runs (a recursion through
	// more than one function, which CPython does not collapse) shows only
	// its first and last 600, around a line "[... N frames omitted ...]".
	Traceback string
	// Duration is the wall time of the execution.
	Duration time.Duration
	// PythonDuration is the part of Duration spent running Python, that
	// is, not waiting for bridge callbacks; it is what Config.Timeout
	// bounds.
	PythonDuration time.Duration
	// BridgeCalls counts the host callbacks Python made (each item of a
	// batched call counts).
	BridgeCalls int
	// Exit is set when the exception is a SystemExit (sys.exit, exit(), or
	// a subclass of SystemExit): what a Python script's top level does
	// with it, for a caller that ends a process the way CPython would.
	Exit *Exit
	// Truncated is true when Stdout, Stderr, Error or Traceback was cut to
	// MaxOutputLength (not when the guest cut an exception's text to its
	// own bound of 1,048,576 characters, with MaxOutputLength negative).
	Truncated bool
}

// Exit is what CPython does with a SystemExit that reaches the top level
// of a script: it writes Stderr (str(code) and a newline, for a code that
// is neither None nor an int, such as sys.exit("bye"); else "") on its
// standard error, and exits with Status: 0 for None (sys.exit()), an
// int's low 8 bits (sys.exit(300) exits 44), 255 for an int that does not
// fit a C long, else 1. Stderr is cut to MaxOutputLength characters as
// Error is.
type Exit struct {
	Status int
	Stderr string
}

// setError sets the exception the code raised, its message and traceback
// cut to max characters as output is, and for a SystemExit its exit
// (nil for other exceptions).
func (ce *CodeExecution) setError(msg, typ, tb string, exit *Exit, max int) {
	var cutMsg, cutTB, cutExit bool
	ce.Error, cutMsg = capText(msg, max)
	ce.ErrorType = typ
	ce.Traceback, cutTB = capText(tb, max)
	if exit != nil {
		ce.Exit = &Exit{Status: exit.Status}
		ce.Exit.Stderr, cutExit = capText(exit.Stderr, max)
	}
	ce.Truncated = ce.Truncated || cutMsg || cutTB || cutExit
}
