package tests

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// exitCase is a run of bin/rlm-sandbox whose stdout, stderr and exit
// status must be exactly these.
type exitCase struct {
	name, stdin string
	args        []string
	out, err    string
	code        int
}

func runExitCases(t *testing.T, cases []exitCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, c.stdin, c.args...)
			if code != c.code || out != c.out || errOut != c.err {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr %q", code, out, errOut, c.code, c.out, c.err)
			}
		})
	}
}

// TestCLIExecSystemExit checks that exec exits as CPython does at an
// uncaught SystemExit: None, 0 and False exit 0, an int with it (its low 8
// bits), anything else is printed and exits 1; later blocks do not run.
func TestCLIExecSystemExit(t *testing.T) {
	exec := func(code string) []string { return []string{"exec", "-c", code, "-c", "print('not reached')"} }
	runExitCases(t, []exitCase{
		{name: "sys.exit()", args: exec(`import sys; print("done"); sys.exit()`), out: "done\n"},
		{name: "exit()", args: exec(`exit()`)},
		{name: "sys.exit(None)", args: exec(`import sys; sys.exit(None)`)},
		{name: "sys.exit(0)", args: exec(`import sys; sys.exit(0)`)},
		{name: "raise SystemExit", args: exec(`raise SystemExit`)},
		{name: "SystemExit(False)", args: exec(`raise SystemExit(False)`)},
		{name: "SystemExit(True)", args: exec(`raise SystemExit(True)`), code: 1},
		{name: "sys.exit(4)", args: exec(`import sys; sys.exit(4)`), code: 4},
		{name: "sys.exit(1)", args: exec(`import sys; sys.exit(1)`), code: 1},
		{name: "sys.exit(300)", args: exec(`import sys; sys.exit(300)`), code: 44},
		{name: "sys.exit(-1)", args: exec(`import sys; sys.exit(-1)`), code: 255},
		{name: "sys.exit(2**70)", args: exec(`import sys; sys.exit(2**70)`), code: 255},
		{name: "sys.exit(message)", args: exec(`import sys; sys.exit("bye")`), err: "bye\n", code: 1},
		{name: "SystemExit(1, 2)", args: exec(`raise SystemExit(1, 2)`), err: "(1, 2)\n", code: 1},
		// The code's type decides, not its text (these were read from
		// str(): "4" exited 4, "None" 0), and so does a subclass's code.
		{name: `sys.exit("4")`, args: exec(`import sys; sys.exit("4")`), err: "4\n", code: 1},
		{name: `sys.exit("None")`, args: exec(`import sys; sys.exit("None")`), err: "None\n", code: 1},
		{name: `sys.exit("")`, args: exec(`import sys; sys.exit("")`), err: "\n", code: 1},
		{name: "a subclass", args: exec("class E(SystemExit): pass\nraise E(3)"), code: 3},
		{name: "a subclass's message", args: exec("class E(SystemExit): pass\nraise E('bye')"), err: "bye\n", code: 1},
		{name: "a subclass's own code", args: exec("class E(SystemExit):\n    code = 7\nraise E()"), code: 7},
		{name: "an int subclass", args: exec("class I(int):\n    def __and__(self, o): return 0\n    def __str__(self): return 'x'\nraise SystemExit(I(6))"), code: 6},
		{name: "from a file", stdin: "import sys\nsys.exit(3)\n", args: []string{"exec", "-"}, code: 3},
		{name: "--direct", args: append([]string{"exec", "--direct"}, exec(`import sys; sys.exit(5)`)[1:]...), code: 5},
		{name: "caught", args: []string{"exec", "-c", "try:\n    exit(3)\nexcept SystemExit as e:\n    print('caught', e.code)"}, out: "caught 3\n"},
	})
	t.Run("--json", func(t *testing.T) {
		out, errOut, code := runCLI(t, "", "exec", "--json", "-c", "import sys; sys.exit(7)", "-c", "pass")
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil || code != 7 || errOut != "" {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
		}
		if m["error_type"] != "SystemExit" || m["error"] != "SystemExit: 7" {
			t.Fatalf("%v", m)
		}
	})
}

// TestCLIExecRaisedKeyboardInterrupt checks that a KeyboardInterrupt the
// code raises itself exits 130, as CPython does, with its traceback (it
// exited 1); a subclass of it exits 1, as in CPython.
func TestCLIExecRaisedKeyboardInterrupt(t *testing.T) {
	tb := "Traceback (most recent call last):\n  File \"<cell-1>\", line 2, in <module>\n    raise %s\n%s\n"
	runExitCases(t, []exitCase{
		{name: "raise KeyboardInterrupt", args: []string{"exec", "-c", "print(1)\nraise KeyboardInterrupt", "-c", "print('not reached')"},
			out: "1\n", err: fmt.Sprintf(tb, "KeyboardInterrupt", "KeyboardInterrupt"), code: 130},
		{name: "a subclass", args: []string{"exec", "-c", "class K(KeyboardInterrupt): pass\nraise K"},
			err: fmt.Sprintf(tb, "K", "K"), code: 1},
	})
}

// TestCLIExecInputHint: input() meets the end of the sandbox's empty
// standard input, also with data piped into the command; the error is
// followed by a hint that says how data goes in.
func TestCLIExecInputHint(t *testing.T) {
	out, errOut, code := runCLI(t, "some data\n", "exec", "-c", "print(input())")
	if code != 1 || out != "" || !strings.Contains(errOut, "EOFError: EOF when reading a line\nhint: Python's standard input is empty in the sandbox; pass data in as the context (--context-file FILE, or - for this command's standard input)\n") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestCLIReplSystemExit checks that sys.exit ends a repl session with the
// status CPython's prompt exits with, and reads no further input.
func TestCLIReplSystemExit(t *testing.T) {
	runExitCases(t, []exitCase{
		{name: "sys.exit(4)", stdin: "print(1)\nimport sys; sys.exit(4)\nprint(2)\n", args: []string{"repl"}, out: "1\n", code: 4},
		{name: "exit()", stdin: "exit()\nprint(2)\n", args: []string{"repl"}},
		{name: "exit(False)", stdin: "exit(False)\nprint(2)\n", args: []string{"repl"}},
		{name: "a message", stdin: "exit('bye')\nprint(2)\n", args: []string{"repl"}, err: "bye\n", code: 1},
		{name: "in a block at the end of input", stdin: "if True:\n    exit(9)", args: []string{"repl"}, code: 9},
		{name: "--direct", stdin: "raise SystemExit(2)\n", args: []string{"repl", "--direct"}, code: 2},
		{name: "a subclass", stdin: "class E(SystemExit): pass\n\nraise E(6)\nprint(2)\n", args: []string{"repl"}, code: 6},
		{name: "a str code", stdin: "exit('7')\n", args: []string{"repl"}, err: "7\n", code: 1},
	})
}

// TestCLIAbortHint: after os.abort() the hint says what happened, in
// both modes; it suggested --direct, which aborts the same way.
func TestCLIAbortHint(t *testing.T) {
	for _, args := range [][]string{{"exec", "-c", "import os; os.abort()"}, {"exec", "--direct", "-c", "import os; os.abort()"}} {
		_, errOut, code := runCLI(t, "", args...)
		if code != 3 || !strings.Contains(errOut, "hint: the sandbox's interpreter aborted (os.abort()") || strings.Contains(errOut, "--direct") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
}

// TestCLIProcessExit checks os._exit: a one-line message, not the
// interpreter's internals, and os._exit's status; --json says that the
// block failed.
func TestCLIProcessExit(t *testing.T) {
	const msg = "the code called os._exit(5): the Python process ended"
	runExitCases(t, []exitCase{
		{name: "exec", args: []string{"exec", "-c", "import os; print('a', flush=True); os._exit(5)", "-c", "print('not reached')"},
			out: "a\n", err: "rlm-sandbox: -c #1: " + msg + "\n", code: 5},
		{name: "exec --direct", args: []string{"exec", "--direct", "-c", "import os; os._exit(5)"}, err: "rlm-sandbox: -c: " + msg + "\n", code: 5},
		{name: "exec, status 0", args: []string{"exec", "-c", "import os; os._exit(0)", "-c", "print('not reached')"}},
		{name: "exec, status 261", args: []string{"exec", "-c", "import os; os._exit(261)"},
			err: "rlm-sandbox: -c: the code called os._exit(261): the Python process ended\n", code: 5},
		// A signal's default action ends the process as os._exit(128 + n)
		// does: the message does not say which (it said os._exit).
		{name: "SIGTERM to itself", args: []string{"exec", "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"},
			err: "rlm-sandbox: -c: the Python process ended with status 143: the code called os._exit(143), or sent itself signal 15 (terminated)\n", code: 143},
	})
	t.Run("--json", func(t *testing.T) {
		out, errOut, code := runCLI(t, "", "exec", "--json", "-c", "import os; os._exit(5)")
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil || code != 5 || errOut != "" {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
		}
		if m["error_type"] != "ProcessExit" || m["error"] != "ProcessExit: "+msg {
			t.Fatalf("%v", m)
		}
	})
	t.Run("--json, a killed sandbox", func(t *testing.T) {
		stubborn := "while True:\n    try:\n        while True: pass\n    except BaseException: pass"
		out, _, code := runCLI(t, "", "exec", "--json", "--timeout", "200ms", "-c", stubborn)
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil || code != 124 {
			t.Fatalf("exit %d, stdout %q", code, out)
		}
		if m["error_type"] != "SandboxError" || !strings.Contains(fmt.Sprint(m["error"]), "dead") || m["timed_out"] != true {
			t.Fatalf("%v", m)
		}
	})
	// repl does what it does for any interpreter that is gone: says so,
	// and goes on with a fresh one.
	t.Run("repl", func(t *testing.T) {
		out, errOut, code := runCLI(t, "x = 1\nimport os; os._exit(5)\nprint('x' in globals(), context)\n", "repl", "--context", "ctx")
		if code != 0 || out != "False ctx\n" || !strings.HasPrefix(errOut, "rlm-sandbox: "+msg+"\n") ||
			strings.Contains(errOut, "wasm") || strings.Count(errOut, "\n") != 2 {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	})
}
