package tests

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
)

func TestExecuteBasics(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, "the quick brown fox")

		t.Run("stdout", func(t *testing.T) {
			ce := exec(t, sb, "print('hello', 6*7)")
			if ce.Stdout != "hello 42\n" || ce.Stderr != "" || ce.Error != "" {
				t.Fatalf("got %+v", ce)
			}
			if ce.Code != "print('hello', 6*7)" {
				t.Fatalf("Code = %q", ce.Code)
			}
		})
		t.Run("stderr", func(t *testing.T) {
			ce := exec(t, sb, "import sys\nsys.stderr.write('oops\\n')\nprint('out')")
			if ce.Stderr != "oops\n" || ce.Stdout != "out\n" {
				t.Fatalf("got %+v", ce)
			}
		})
		t.Run("exception keeps partial stdout", func(t *testing.T) {
			ce := exec(t, sb, "print('before')\ndef f():\n    return 1/0\nf()\nprint('after')")
			if ce.Stdout != "before\n" {
				t.Fatalf("stdout %q", ce.Stdout)
			}
			if ce.ErrorType != "ZeroDivisionError" || ce.Error != "ZeroDivisionError: division by zero" {
				t.Fatalf("error %q type %q", ce.Error, ce.ErrorType)
			}
			for _, want := range []string{"Traceback (most recent call last):", "line 4, in <module>", "in f", "return 1/0", "ZeroDivisionError: division by zero"} {
				if !strings.Contains(ce.Traceback, want) {
					t.Errorf("traceback lacks %q:\n%s", want, ce.Traceback)
				}
			}
			if strings.Contains(ce.Traceback, "\x1b[") {
				t.Errorf("traceback has ANSI escapes: %q", ce.Traceback)
			}
			if strings.Contains(ce.Traceback, "_rlm") || strings.Contains(ce.Traceback, "execute") {
				t.Errorf("traceback shows sandbox internals:\n%s", ce.Traceback)
			}
		})
		t.Run("no bootstrap frames", func(t *testing.T) {
			// The bootstrap's own Python (its time.sleep, its refusal of
			// imports the sandbox cannot satisfy) and the helpers' (this
			// sandbox has no OnLLMQuery: llm_query raises BridgeError)
			// raise on the code's behalf: the traceback ends at the code's
			// call, as for a function written in C, in the exceptions
			// chained to the one raised and in groups too; exec'd strings
			// keep their frames.
			for _, c := range []struct{ code, want, frame string }{
				{"import time\ntime.sleep('x')", "TypeError", "time.sleep('x')"},
				{"import js", "ImportError", "import js"},
				{"exec('def g():\\n    1/0\\ng()')", "ZeroDivisionError", `File "<string>", line 2, in g`},
				{"llm_query('x')", "BridgeError", "llm_query('x')"},
				{"try:\n    llm_query('x')\nexcept Exception:\n    raise ValueError('v')", "ValueError", "llm_query('x')"},
				{"try:\n    llm_query('x')\nexcept Exception as e:\n    raise ValueError('v') from e", "ValueError", "llm_query('x')"},
				{"try:\n    llm_query('x')\nexcept Exception as e:\n    raise ExceptionGroup('g', [e])", "ExceptionGroup", "llm_query('x')"},
			} {
				ce := exec(t, sb, c.code)
				if ce.ErrorType != c.want || !strings.Contains(ce.Traceback, c.frame) {
					t.Fatalf("%q: got %+v", c.code, ce)
				}
				if strings.Contains(ce.Traceback, `File "<rlm`) || (c.want != "ZeroDivisionError" && strings.Contains(ce.Traceback, "<string>")) {
					t.Errorf("%q: traceback shows the bootstrap:\n%s", c.code, ce.Traceback)
				}
			}
		})
		t.Run("group members show their lines", func(t *testing.T) {
			// An exception caught in one cell and raised in a group by a
			// later one: its frames are in the earlier cell, whose source
			// the traceback shows too.
			exec(t, sb, "def boom():\n    return 1/0\ntry:\n    boom()\nexcept Exception as e:\n    saved = e")
			ce := exec(t, sb, "raise ExceptionGroup('g', [saved])")
			if ce.ErrorType != "ExceptionGroup" {
				t.Fatalf("got %+v", ce)
			}
			for _, want := range []string{"raise ExceptionGroup('g', [saved])", "    boom()", "return 1/0", "ZeroDivisionError: division by zero"} {
				if !strings.Contains(ce.Traceback, want) {
					t.Errorf("traceback lacks %q:\n%s", want, ce.Traceback)
				}
			}
		})
		t.Run("syntax error", func(t *testing.T) {
			ce := exec(t, sb, "def broken(:\n  pass")
			if ce.ErrorType != "SyntaxError" || !strings.Contains(ce.Traceback, "SyntaxError") {
				t.Fatalf("got %+v", ce)
			}
		})
		t.Run("globals persist", func(t *testing.T) {
			exec(t, sb, "counter = 41\ndef bump():\n    global counter\n    counter += 1")
			exec(t, sb, "bump()")
			ce := exec(t, sb, "print(counter)")
			if ce.Stdout != "42\n" {
				t.Fatalf("stdout %q", ce.Stdout)
			}
		})
		t.Run("context", func(t *testing.T) {
			ce := exec(t, sb, "print(type(context).__name__, len(context), context.split()[2])")
			if ce.Stdout != "str 19 brown\n" {
				t.Fatalf("stdout %q", ce.Stdout)
			}
		})
		t.Run("system exit is an exception", func(t *testing.T) {
			ce := exec(t, sb, "import sys\nsys.exit(3)")
			if ce.ErrorType != "SystemExit" {
				t.Fatalf("got %+v", ce)
			}
			if ce := exec(t, sb, "print('alive')"); ce.Stdout != "alive\n" {
				t.Fatalf("after SystemExit: %+v", ce)
			}
		})
	})
}

func TestNotInitialized(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		ctx := context.Background()
		sb, err := supervisor.New(ctx, m.cfg(supervisor.Config{}))
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Destroy()
		if _, err := sb.Execute(ctx, "pass"); !errors.Is(err, supervisor.ErrNotInitialized) {
			t.Fatalf("Execute before Initialize: %v", err)
		}
		if _, _, err := sb.GetVariable(ctx, "x"); !errors.Is(err, supervisor.ErrNotInitialized) {
			t.Fatalf("GetVariable before Initialize: %v", err)
		}
		if err := sb.Destroy(); err != nil {
			t.Fatal(err)
		}
		if err := sb.Destroy(); err != nil {
			t.Fatalf("second Destroy: %v", err)
		}
		if _, err := sb.Execute(ctx, "pass"); !errors.Is(err, supervisor.ErrDestroyed) {
			t.Fatalf("Execute after Destroy: %v", err)
		}
		if err := sb.Initialize(ctx, "x"); !errors.Is(err, supervisor.ErrDestroyed) {
			t.Fatalf("Initialize after Destroy: %v", err)
		}
	})
}

// TestLoneSurrogateInError: an exception message or traceback holding a
// lone surrogate (os.fsdecode of bytes that are not UTF-8 makes them)
// reaches the host as Python's stderr writes it, "\udcff", in valid UTF-8,
// in both modes and on both of the host's paths for a cell.
func TestLoneSurrogateInError(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, "")
		for _, code := range []string{
			`raise ValueError("x\udcffy é")`,
			"import os\nraise ValueError(os.fsdecode(b'x\\xffy') + ' é')",
		} {
			for _, interactive := range []bool{false, true} {
				run := sb.Execute
				if interactive {
					run = sb.ExecuteInteractive
				}
				ce, err := run(context.Background(), code)
				if err != nil {
					t.Fatal(err)
				}
				if ce.ErrorType != "ValueError" || ce.Error != `ValueError: x\udcffy é` {
					t.Errorf("%q: error %q %q, want ValueError: x\\udcffy é", code, ce.ErrorType, ce.Error)
				}
				if !utf8.ValidString(ce.Traceback) || !strings.HasSuffix(ce.Traceback, "ValueError: x\\udcffy é\n") {
					t.Errorf("%q: traceback %q", code, ce.Traceback)
				}
			}
		}
	})
}

// TestEndlessExceptionStr: an exception whose __str__ never returns is
// stopped by the time limit like any other code: the cell ends with
// ErrTimeout and KeyboardInterrupt, and the sandbox lives on (it used to
// format the exception again after the interrupt, and be killed).
func TestEndlessExceptionStr(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{Timeout: 500 * time.Millisecond, GracePeriod: 5 * time.Second}, "")
		for _, run := range []func(context.Context, string) (*supervisor.CodeExecution, error){sb.Execute, sb.ExecuteInteractive} {
			ce, err := run(context.Background(), "class E(Exception):\n    def __str__(self):\n        while True: pass\nraise E()\n")
			if !errors.Is(err, supervisor.ErrTimeout) || ce == nil || ce.ErrorType != "KeyboardInterrupt" {
				t.Fatalf("err %v, execution %+v", err, ce)
			}
			if ce := exec(t, sb, "print(6 * 7)"); ce.Stdout != "42\n" {
				t.Fatalf("after: %+v", ce)
			}
		}
	})
}

// TestRaisingTraceHooks: trace and profile functions that raise (the
// code's own sys.settrace and sys.setprofile) do not hide the cell's
// exception behind an interrupt: CPython unsets a hook that raised, and
// the sandbox reports the exception and goes on.
func TestRaisingTraceHooks(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, "")
		for _, code := range []string{
			"import sys\nsys.settrace(lambda *a: 1/0)\nsys.setprofile(lambda *a: 1/0)",
			"import sys\nsys.setprofile(lambda *a: 1/0)",
			"import sys\nsys.settrace(lambda *a: 1/0)\nraise ValueError('mine')",
		} {
			for _, run := range []func(context.Context, string) (*supervisor.CodeExecution, error){sb.Execute, sb.ExecuteInteractive} {
				ce, err := run(context.Background(), code)
				if err != nil || ce.ErrorType == "" || ce.ErrorType == "KeyboardInterrupt" || ce.Traceback == "" {
					t.Fatalf("%q: err %v, execution %+v", code, err, ce)
				}
				if ce := exec(t, sb, "import sys\nsys.settrace(None)\nsys.setprofile(None)\nprint(6 * 7)"); ce.Stdout != "42\n" {
					t.Fatalf("after %q: %+v", code, ce)
				}
			}
		}
	})
}

// TestOddExceptionClasses: an exception whose class or instance misbehaves
// when it is described is still reported as the error it is, in both ways
// of running a cell: a class named "" (it was reported as success), a
// metaclass whose __name__ lies or raises, an instance whose
// __getattribute__ raises (reported as KeyboardInterrupt) or whose
// __traceback__ raises (reported as the sandbox's failure).
func TestOddExceptionClasses(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, "")
		for _, c := range []struct{ code, errorType, errorHas string }{
			{`raise type("", (Exception,), {})("boom")`, "<unnamed exception class>", "boom"},
			{"class M(type):\n    __name__ = property(lambda c: 5)\nclass E(Exception, metaclass=M): pass\nraise E('boom')", "E", "E: boom"},
			{"class M(type):\n    @property\n    def __name__(c): raise RuntimeError('nm')\nclass E(Exception, metaclass=M): pass\nraise E('boom')", "E", "E: boom"},
			{"class E(Exception):\n    def __getattribute__(self, n): raise RuntimeError(n)\nraise E('ga')", "E", "E: ga"},
			{"class E(Exception):\n    @property\n    def __traceback__(self): raise RuntimeError\nraise E('tb')", "E", "E: tb"},
		} {
			for _, run := range []func(context.Context, string) (*supervisor.CodeExecution, error){sb.Execute, sb.ExecuteInteractive} {
				ce, err := run(context.Background(), c.code)
				if err != nil || ce.ErrorType != c.errorType || !strings.Contains(ce.Error, c.errorHas) {
					t.Fatalf("%q: err %v, execution %+v", c.code, err, ce)
				}
				if ce := exec(t, sb, "print(6 * 7)"); ce.Stdout != "42\n" {
					t.Fatalf("after %q: %+v", c.code, ce)
				}
			}
		}
	})
}

// TestSystemExit: a SystemExit (or a subclass) comes with what CPython's
// top level does with it, judged by its code's type, not its text (a
// caller read "4" from sys.exit("4") as the status 4); other exceptions
// have no Exit.
func TestSystemExit(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{MaxOutputLength: 500}, "")
		for _, c := range []struct {
			code string
			want *supervisor.Exit
		}{
			{"import sys; sys.exit()", &supervisor.Exit{Status: 0}},
			{"import sys; sys.exit(300)", &supervisor.Exit{Status: 44}},
			{"import sys; sys.exit(-2**70)", &supervisor.Exit{Status: 255}},
			{"import sys; sys.exit('4')", &supervisor.Exit{Status: 1, Stderr: "4\n"}},
			{"raise SystemExit(1, 'a')", &supervisor.Exit{Status: 1, Stderr: "(1, 'a')\n"}},
			{"class E(SystemExit): pass\nraise E(3)", &supervisor.Exit{Status: 3}},
			{"class F(SystemExit):\n    @property\n    def code(self): raise ValueError\nraise F('x')", &supervisor.Exit{Status: 1, Stderr: "x\n"}},
			{"1/0", nil},
		} {
			ce := exec(t, sb, c.code)
			if (ce.Exit == nil) != (c.want == nil) || (c.want != nil && *ce.Exit != *c.want) || ce.Truncated {
				t.Errorf("%q: Exit %+v, want %+v", c.code, ce.Exit, c.want)
			}
		}
		// The text is cut to MaxOutputLength, as Error is.
		ce := exec(t, sb, "import sys; sys.exit('x' * 2000)")
		if ce.Exit == nil || ce.Exit.Status != 1 || !ce.Truncated || len(ce.Exit.Stderr) > 1000 || !strings.HasPrefix(ce.Exit.Stderr, "xxx") {
			t.Errorf("a long message: %+v, truncated %v", ce.Exit, ce.Truncated)
		}
	})
}
