package main

import (
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"

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

// systemExit reads the SystemExit that ended an execution the way CPython
// does at the top level: no argument, None, 0 and False exit 0, an int
// exits with it (its low 8 bits, as the operating system keeps them; 255
// when it does not fit a C long), anything else is printed on stderr and
// exits 1. ok is false when the execution did not end in SystemExit.
//
// The library reports the exception as text only (CodeExecution.Error is
// "SystemExit: " and str(code)), so the code's type is guessed from its
// str(): a str that reads as an int, "None", "True" or "False" counts as
// that value, and SystemExit("") as SystemExit(None). A subclass of
// SystemExit (reported under its own name) counts as any other exception.
func systemExit(ce *supervisor.CodeExecution) (status int, message string, ok bool) {
	if ce == nil || ce.ErrorType != "SystemExit" {
		return 0, "", false
	}
	code, _ := strings.CutPrefix(ce.Error, "SystemExit")
	code, _ = strings.CutPrefix(code, ": ")
	switch code {
	case "", "None", "False":
		return 0, "", true
	case "True":
		return 1, "", true
	}
	if n, ok := new(big.Int).SetString(code, 10); ok && !strings.HasPrefix(code, "+") {
		if !n.IsInt64() {
			return 255, "", true // PyLong_AsLong fails: -1
		}
		return int(n.Int64() & 0xff), "", true
	}
	return 1, code, true
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
