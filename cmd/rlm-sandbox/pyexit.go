package main

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
)

// exitStatusError ends the command with the status the Python code chose
// (sys.exit, os._exit); whatever there was to say has been printed.
type exitStatusError struct{ status int }

func (e *exitStatusError) Error() string {
	return fmt.Sprintf("the Python code exited with status %d", e.status)
}

// exitStatus is the error that makes the command exit with status: nil for 0.
func exitStatus(status int) error {
	if status == 0 {
		return nil
	}
	return &exitStatusError{status}
}

// processExitType is the error_type of exec --json's record of a block
// that called os._exit, which raises no exception.
const processExitType = "ProcessExit"

// sandboxErrorType is the --json error_type of a block whose sandbox
// failed without a Python exception.
const sandboxErrorType = "SandboxError"

// systemExit reads the SystemExit that ended an execution (sys.exit,
// exit(), or a subclass of SystemExit): the status CPython exits with at
// the top level of a script, and what it writes on stderr first (str() of
// a code that is neither None nor an int, and a newline; else ""). ok is
// false when the execution did not end in SystemExit.
func systemExit(ce *supervisor.CodeExecution) (status int, stderr string, ok bool) {
	if ce == nil || ce.Exit == nil {
		return 0, "", false
	}
	return ce.Exit.Status, ce.Exit.Stderr, true
}

// processExitRE finds the status in the error of an interpreter that ended
// its process (os._exit); runtime/internal/emscripten.ExitError writes it,
// and a worker passes on only its text.
var processExitRE = regexp.MustCompile(`the Python process exited with status (-?[0-9]+)`)

// processExit reports whether err says the code ended the Python process
// (os._exit(status)), and with which status.
func processExit(err error) (status int, ok bool) {
	if !errors.Is(err, supervisor.ErrDead) {
		return 0, false
	}
	m := processExitRE.FindStringSubmatch(err.Error())
	if m == nil {
		return 0, false
	}
	n, perr := strconv.ParseInt(m[1], 10, 32)
	if perr != nil {
		return 0, false
	}
	return int(n), true
}

// processExitMessage says what happened when the code called os._exit.
func processExitMessage(status int) string {
	if sig := syscall.Signal(status - 128); status > 128 && status < 128+65 && sig != syscall.SIGINT {
		// How libc ends a process a signal's default action ends, as
		// os.kill(os.getpid(), signal.SIGTERM) does: not os._exit.
		return fmt.Sprintf("the Python process ended with status %d: the code called os._exit(%d), or sent itself signal %d (%v)", status, status, sig, sig)
	}
	return fmt.Sprintf("the code called os._exit(%d): the Python process ended", status)
}

// deadMessage is err, the error of a sandbox whose interpreter is gone,
// for a person: os._exit said plainly, and without the WebAssembly stack
// trace that a guest's exit or crash carries.
func deadMessage(err error) string {
	if status, ok := processExit(err); ok {
		return processExitMessage(status)
	}
	return firstLine(err.Error())
}

// firstLine is s up to its first line break, without the "(recovered by
// wazero)" that introduces wazero's stack trace.
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	s, _, _ = strings.Cut(s, " (recovered by wazero)")
	return s
}
