package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/rlm-sandbox/rlm-sandbox/runtime"
	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
)

// Exit statuses: the contract scripts rely on (README.md lists them).
const (
	exitOK          = 0
	exitPython      = 1   // the Python code raised an exception
	exitUsage       = 2   // bad flags or arguments
	exitSandbox     = 3   // the sandbox could not run the code
	exitTimeout     = 124 // as timeout(1)
	exitInterrupted = 130 // 128 + SIGINT; SIGTERM gives 143 (128 + 15)
)

var (
	// errPython: the code raised; its traceback has been printed already.
	errPython = errors.New("the Python code raised an exception")
	// errUsage marks errors in how the command was called.
	errUsage = errors.New("usage")
)

// usageErrorf returns an error matching errUsage.
func usageErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

// signalError reports that a signal ended the command.
type signalError struct{ sig os.Signal }

func (e *signalError) Error() string {
	switch e.sig {
	case os.Interrupt:
		return "interrupted (Ctrl-C, SIGINT)"
	case syscall.SIGTERM:
		return "terminated (SIGTERM)"
	}
	return "ended by signal " + e.sig.String()
}

// Kinds of error: the exit status of the CLI and the error data of
// `serve` both derive from them, here and nowhere else.
const (
	kindPython            = "python"
	kindExit              = "exit" // the code chose the status: sys.exit, os._exit
	kindUsage             = "usage"
	kindTimeout           = "timeout"
	kindInterrupted       = "interrupted"
	kindCanceled          = "canceled"
	kindDead              = "dead"
	kindWorkerExited      = "worker_exited"
	kindWorkerUnavailable = "worker_unavailable"
	kindDistribution      = "distribution"
	kindDestroyed         = "destroyed"
	kindNotInitialized    = "not_initialized"
	kindProtocol          = "protocol"
	kindInternal          = "internal"
	kindTooLarge          = "too_large" // serve's get_variable: a value over one frame
)

// errorKind classifies err. The order matters: a timeout that ended with
// the interpreter killed is still a timeout.
func errorKind(err error) string {
	var sig *signalError
	var exit *exitStatusError
	switch {
	case errors.As(err, &sig):
		return kindInterrupted
	case errors.As(err, &exit):
		return kindExit
	case errors.Is(err, errPython):
		return kindPython
	case errors.Is(err, errUsage), errors.Is(err, supervisor.ErrInvalidName), errors.Is(err, supervisor.ErrTooLarge):
		return kindUsage
	case errors.Is(err, supervisor.ErrTimeout):
		return kindTimeout
	case errors.Is(err, supervisor.ErrDestroyed):
		return kindDestroyed // before canceled: a destroy also cancels what runs
	case errors.Is(err, supervisor.ErrCanceled):
		return kindCanceled
	case errors.Is(err, supervisor.ErrWorkerExited):
		return kindWorkerExited
	case errors.Is(err, supervisor.ErrDead):
		return kindDead
	case errors.Is(err, supervisor.ErrWorkerUnavailable):
		return kindWorkerUnavailable
	case errors.Is(err, runtime.ErrDistribution):
		return kindDistribution
	case errors.Is(err, supervisor.ErrNotInitialized):
		return kindNotInitialized
	case errors.Is(err, supervisor.ErrProtocol):
		return kindProtocol
	}
	return kindInternal
}

// exitCode maps an error to the process's exit status.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	switch errorKind(err) {
	case kindPython:
		return exitPython
	case kindExit:
		var exit *exitStatusError
		errors.As(err, &exit)
		return exit.status
	case kindUsage:
		return exitUsage
	case kindTimeout:
		return exitTimeout
	case kindInterrupted:
		var sig *signalError
		errors.As(err, &sig)
		if s, ok := sig.sig.(syscall.Signal); ok && s != syscall.SIGINT {
			return 128 + int(s)
		}
		return exitInterrupted
	case kindCanceled:
		return exitInterrupted
	}
	return exitSandbox
}

// wallTimeout reports whether err is the expiry of --wall-timeout rather
// than --timeout. Both are supervisor.ErrTimeout; only the text, written
// by the supervisor's run, tells them apart.
func wallTimeout(err error) bool {
	return errors.Is(err, supervisor.ErrTimeout) && strings.Contains(err.Error(), "(wall timeout of ")
}

// hint says what to do about an error, or "".
func hint(err error) string {
	switch errorKind(err) {
	case kindDistribution:
		return "Pyodide " + runtime.PyodideVersion + " is downloaded on first use: give an index URL this machine reaches " +
			"(--index-url or $" + runtime.IndexURLEnv + ": a mirror, or a directory holding the files), " +
			"or set RLM_SANDBOX_PYODIDE to a prepared copy (`make` in the rlm-sandbox source tree makes one); " +
			"then `rlm-sandbox prepare` checks it. If the cache cannot be written (\"permission denied\", a full disk), " +
			"set RLM_SANDBOX_CACHE to a directory of this user's own"
	case kindWorkerUnavailable:
		if errors.Is(err, supervisor.ErrOutOfMemory) {
			return "the machine or container ran out of memory and the kernel killed the sandbox's worker as it started; " +
				"free memory, or give the sandbox a --memory-limit below what is free"
		}
		if strings.Contains(err.Error(), "ulimit -f") {
			return "raise the file size limit (ulimit -f) to at least 4 KiB: the worker's interrupt page is a file of one page"
		}
		if strings.Contains(err.Error(), "exited during start-up") {
			return "rlm-worker started and exited: run with -v to see what it printed; a process limit (ulimit -u), " +
				"a memory limit or a missing cache can stop it; --direct runs in-process instead (without the worker's lock-down)"
		}
		return "build rlm-worker (`make build`) and keep it next to rlm-sandbox or on $PATH, " +
			"set RLM_WORKER to its path, or run in-process with --direct (without the worker's lock-down)"
	case kindWorkerExited, kindDead:
		if errors.Is(err, supervisor.ErrOutOfMemory) {
			return "the sandbox's interpreter is gone and everything it held with it; give the sandbox a --memory-limit " +
				"below the memory that is free, so that the code's allocations raise MemoryError instead"
		}
		if strings.Contains(err.Error(), "native stack overflowed") {
			return "the sandbox's interpreter is gone and everything it held with it; the same code fails the same way: " +
				"let go of very deep structures a level at a time, keep sys.setrecursionlimit well below 400,000, " +
				"and a recursion that goes through C (an lru_cache'd function, a key= function) below about 10,000 levels"
		}
		if strings.Contains(err.Error(), "abort() called") {
			// The code's own doing (os.abort), or CPython's fatal error:
			// the worker is not the cause, and --direct no remedy.
			return "the sandbox's interpreter aborted (os.abort(), or a fatal error of CPython's) and is gone, " +
				"and everything it held with it; code that calls os.abort() ends the same way in every mode"
		}
		return "the sandbox's interpreter is gone and everything it held with it; run the code again " +
			"(with --direct if rlm-worker keeps failing)"
	case kindTimeout:
		if wallTimeout(err) {
			return "raise --wall-timeout (it counts all the time, bridge calls included), or make the code and its bridge commands faster"
		}
		return "raise --timeout (it counts Python time), or make the code faster"
	case kindProtocol:
		return "rlm-sandbox and rlm-worker come from different builds: rebuild both with `make build`"
	}
	return ""
}

// reportError prints err for a person, once: the Python traceback has
// already been printed, usage errors point at --help.
func reportError(w io.Writer, err error, commandPath string) {
	switch errorKind(err) {
	case kindPython, kindExit:
		return
	case kindUsage:
		msg := err.Error()
		if u := errUsage.Error() + ": "; len(msg) > len(u) && msg[:len(u)] == u {
			msg = msg[len(u):]
		}
		fmt.Fprintf(w, "rlm-sandbox: %s\nRun '%s --help' for usage.\n", msg, commandPath)
		return
	}
	msg := err.Error()
	if k := errorKind(err); k == kindDead || k == kindWorkerExited {
		msg = firstLine(msg) // not the WebAssembly stack trace of a guest's crash
	}
	fmt.Fprintln(w, "rlm-sandbox:", msg)
	if h := hint(err); h != "" {
		fmt.Fprintln(w, "hint:", h)
	}
}
