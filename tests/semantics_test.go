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

// TestWhatTheSandboxLacksSaysSo checks the errors of what Pyodide's
// CPython cannot do, as agents' code meets them: threads (the usual way to
// run llm_query calls concurrently) and multiprocessing name
// llm_query_batched, a third-party import says the sandbox has the
// standard library only, and breakpoint() does nothing; the sandbox
// stays usable after each.
func TestWhatTheSandboxLacksSaysSo(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, "")
		for _, c := range []struct {
			code, typ string
			has       []string // in Error
			tbHas     string   // in Traceback
		}{
			{"from concurrent.futures import ThreadPoolExecutor\nwith ThreadPoolExecutor(4) as ex:\n    list(ex.map(llm_query, ['a', 'b']))",
				"RuntimeError", []string{"can't start new thread", "without threads", "llm_query_batched(prompts)"}, ""},
			{"import threading\nthreading.Thread(target=print).start()",
				"RuntimeError", []string{"without threads", "llm_query_batched"}, ""},
			{"import _thread\n_thread.start_new_thread(print, ())",
				"RuntimeError", []string{"without threads"}, ""},
			{"import multiprocessing\nmultiprocessing.Pool(2)",
				"ImportError", []string{"no other processes", "llm_query_batched"}, ""},
			// It spoke of named semaphores.
			{"from concurrent.futures import ProcessPoolExecutor\nwith ProcessPoolExecutor() as ex:\n    list(ex.map(abs, [-1]))",
				"NotImplementedError", []string{"no other processes", "llm_query_batched"}, "raise NotImplementedError"},
			{"import numpy", "ModuleNotFoundError", []string{"No module named 'numpy'"}, "standard library only"},
			{"import zoneinfo\nzoneinfo.ZoneInfo('Europe/Paris')", "ZoneInfoNotFoundError", nil, "no time zone database"},
		} {
			ce := exec(t, sb, c.code)
			if ce.ErrorType != c.typ {
				t.Errorf("%q: %s (%s), want %s", c.code, ce.ErrorType, ce.Error, c.typ)
				continue
			}
			for _, h := range c.has {
				if !strings.Contains(ce.Error, h) {
					t.Errorf("%q: error %q lacks %q", c.code, ce.Error, h)
				}
			}
			if !strings.Contains(ce.Traceback, c.tbHas) {
				t.Errorf("%q: traceback %q lacks %q", c.code, ce.Traceback, c.tbHas)
			}
		}
		// A standard module Pyodide lacks gets a note of its own; a module
		// of a standard package that does not exist, none.
		for _, mod := range []string{"_tkinter", "pwd", "resource", "curses"} {
			ce := exec(t, sb, "import "+mod)
			if ce.ErrorType != "ModuleNotFoundError" || strings.Contains(ce.Traceback, "standard library only") ||
				!strings.Contains(ce.Traceback, "'"+mod+"' is in CPython's standard library but not in Pyodide's build") {
				t.Errorf("import %s: %q", mod, ce.Traceback)
			}
		}
		if ce := exec(t, sb, "import xml.nothing"); ce.ErrorType != "ModuleNotFoundError" || strings.Contains(ce.Traceback, "Pyodide's build") {
			t.Errorf("import xml.nothing: %q", ce.Traceback)
		}
		// The error says no threads without hiding the exception the code
		// was handling when it started one.
		ce := exec(t, sb, "import threading\ntry:\n    {}['missing']\nexcept KeyError:\n    threading.Thread(target=print).start()")
		if ce.ErrorType != "RuntimeError" || !strings.Contains(ce.Traceback, "KeyError: 'missing'\n\nDuring handling of the above exception, another exception occurred:") {
			t.Errorf("a thread started in an except clause: %q", ce.Traceback)
		}
		if ce := exec(t, sb, "import json\nbreakpoint()\nprint('on')"); ce.Error != "" || ce.Stdout != "on\n" {
			t.Errorf("breakpoint(): %+v", ce)
		}
	})
}

// TestCellSourcesForTheCodeItself checks that the cells' lines are where
// CPython keeps a file's, for the code's own use: traceback.format_exc
// and inspect.getsource on a function of an earlier cell, and a warning's
// source line.
func TestCellSourcesForTheCodeItself(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, "")
		exec(t, sb, "def f(x):\n    return x + 1  # the line")
		ce := exec(t, sb, "import inspect, traceback, warnings\n"+
			"print(inspect.getsource(f).rstrip())\n"+
			"try:\n    f(None)\nexcept TypeError:\n    print(traceback.format_exc())\n"+
			"warnings.warn('careful')  # warned here")
		for _, want := range []string{
			"def f(x):\n    return x + 1  # the line\n", // getsource
			"    f(None)\n",                  // format_exc, this cell
			"    return x + 1  # the line\n", // format_exc, the earlier cell
		} {
			if !strings.Contains(ce.Stdout, want) {
				t.Errorf("stdout lacks %q:\n%s", want, ce.Stdout)
			}
		}
		if !strings.Contains(ce.Stderr, "UserWarning: careful\n  warnings.warn('careful')  # warned here\n") {
			t.Errorf("the warning lacks its source line: %q", ce.Stderr)
		}
	})
}

// TestLongExceptionsAreCut checks that an exception's message and
// traceback are cut to MaxOutputLength as output is, and that one too long
// for a reply (70 MB: a worker's frames hold 64 MiB) leaves the sandbox
// alive: it used to kill the worker.
func TestLongExceptionsAreCut(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{MaxOutputLength: 1000}, "")
		ce := exec(t, sb, "d = {}\nd['é' * 3000]")
		if ce.ErrorType != "KeyError" || !ce.Truncated {
			t.Fatalf("%s, truncated %v", ce.ErrorType, ce.Truncated)
		}
		for what, text := range map[string]string{"Error": ce.Error, "Traceback": ce.Traceback} {
			if n := utf8.RuneCountInString(text); n > 1000+len("\n[... 9999 characters omitted ...]\n") || !strings.Contains(text, " characters omitted ...]") {
				t.Errorf("%s: %d characters: %.200q", what, n, text)
			}
		}
		if !strings.HasPrefix(ce.Traceback, "Traceback (most recent call last):") || !strings.HasSuffix(ce.Error, "éé'") {
			t.Errorf("the head or the tail went: %.100q ... %.100q", ce.Traceback, ce.Error[len(ce.Error)-20:])
		}
		if m.name != "worker" {
			return
		}
		sb = newSandbox(t, m, supervisor.Config{MaxOutputLength: -1}, "")
		ce = exec(t, sb, "raise ValueError('y' * 70_000_000)")
		if ce.ErrorType != "ValueError" || len(ce.Error) > 1<<20+100 || !strings.Contains(ce.Error, " characters omitted ...]") {
			t.Fatalf("%s, truncated %v, %d bytes", ce.ErrorType, ce.Truncated, len(ce.Error))
		}
		if ce := exec(t, sb, "print('alive')"); ce.Stdout != "alive\n" {
			t.Fatalf("after: %+v", ce)
		}
	})
}

// TestStandardStreamsAreNotTerminals checks that the code sees its
// standard streams as CPython sees pipes, as Pyodide's are by default:
// isatty() is false, and input() writes its prompt to stdout and raises
// EOFError with CPython's message (it wrote the prompt to stderr, as for
// a terminal, and raised a bare EOFError).
func TestStandardStreamsAreNotTerminals(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, "")
		ce := exec(t, sb, "import os, sys\nprint([f.isatty() for f in (sys.stdin, sys.stdout, sys.stderr)], [os.isatty(i) for i in range(3)])\ninput('name? ')")
		if ce.Stdout != "[False, False, False] [False, False, False]\nname? " || ce.Stderr != "" {
			t.Errorf("stdout %q, stderr %q", ce.Stdout, ce.Stderr)
		}
		if ce.Error != "EOFError: EOF when reading a line" {
			t.Errorf("error %q", ce.Error)
		}
		// exit() and quit() close sys.stdin before they raise SystemExit:
		// a later input() still meets the end of the input (it raised
		// ValueError: I/O operation on closed file).
		exec(t, sb, "try:\n    exit()\nexcept SystemExit:\n    pass\nsys.stdin.close()")
		if ce := exec(t, sb, "input()"); ce.Error != "EOFError: EOF when reading a line" {
			t.Errorf("input() after exit(): error %q", ce.Error)
		}
	})
}

// TestCompilerSyntaxErrorsShowTheirLine checks that a SyntaxError of
// the compiler (not the parser: 'break' outside a loop) shows the cell's
// line and carets, as CPython shows a script's (it had no line at all).
func TestCompilerSyntaxErrorsShowTheirLine(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, "")
		for code, want := range map[string]string{
			"for i in range(3):\n    pass\nbreak": "line 3\n    break\n    ^^^^^\nSyntaxError: 'break' outside loop\n",
			"x = 1\nif x:\n    return x + 1":      "line 3\n    return x + 1\n    ^^^^^^^^^^^^\nSyntaxError: 'return' outside function\n",
		} {
			ce := exec(t, sb, code)
			if ce.ErrorType != "SyntaxError" || !strings.HasSuffix(ce.Traceback, want) {
				t.Errorf("%q: traceback %q, want it to end with %q", code, ce.Traceback, want)
			}
		}
	})
}

// TestLayoutStaysPut checks that /lib cannot be renamed or written to
// (renaming it away took the standard library with it), site-packages
// can; and that os.kill with a signal number the kernel refuses raises
// OSError (the number 65 killed the interpreter: Emscripten's raise()
// called through a slot past its table of handlers).
func TestLayoutStaysPut(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, "")
		ce := exec(t, sb, "import os\n"+
			"for f in (lambda: os.rename('/lib', '/tmp/lib'), lambda: os.rename('/lib/python3.14', '/tmp/p'), lambda: open('/lib/x.py', 'w')):\n"+
			"    try:\n        f()\n        print('allowed')\n    except OSError as e:\n        print(e.strerror)\n"+
			"open('/lib/python3.14/site-packages/mine.py', 'w').write('X = 1\\n')\n"+
			"import mine, csv\nprint(mine.X, csv.__name__)\n"+
			"for sig in (65, -1, 1000):\n"+
			"    try:\n        os.kill(os.getpid(), sig)\n    except OSError as e:\n        print(sig, e.strerror)")
		want := "Read-only file system\nRead-only file system\nRead-only file system\n1 csv\n65 Invalid argument\n-1 Invalid argument\n1000 Invalid argument\n"
		if ce.Error != "" || ce.Stdout != want {
			t.Fatalf("stdout %q (want %q), error %q", ce.Stdout, want, ce.Error)
		}
	})
}

// TestChannelDescriptorsClosed: code that closes or replaces the
// bootstrap's descriptors (3 to 5, its channels to the host) loses that
// cell's result, which says so, and the next cells work (every later
// error read as an interrupt, and the sandbox was not marked dead).
func TestChannelDescriptorsClosed(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, "")
		exec(t, sb, "import os\nos.closerange(3, 6)")
		if ce := exec(t, sb, "1/0"); ce.ErrorType != "ZeroDivisionError" {
			t.Fatalf("after closerange: %+v", ce)
		}
		for _, code := range []string{"os.close(3)\n1/0", "os.dup2(2, 3)\n1/0", "os.closerange(3, 6)\nllm_query('x')"} {
			ce := exec(t, sb, code)
			if ce.ErrorType != "OSError" || !strings.Contains(ce.Error, "channels to the host") {
				t.Fatalf("%q: %+v", code, ce)
			}
			if ce := exec(t, sb, "print(6 * 7)"); ce.Stdout != "42\n" || ce.Error != "" {
				t.Fatalf("after %q: %+v", code, ce)
			}
		}
	})
}

// TestCellSourcesBounded: the sources the sandbox keeps for tracebacks
// are let go of, oldest first, past 16 MiB (each cell's was kept for
// good: forty cells with a 2 MiB literal grew the memory by 80 MiB,
// whatever the code deleted); a recent cell's lines are still shown.
func TestCellSourcesBounded(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, "")
		exec(t, sb, "def old():\n    raise ValueError('old')")
		big := "s = '" + strings.Repeat("x", 2<<20) + "'\ndel s"
		exec(t, sb, big)
		before, err := sb.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for range 40 {
			exec(t, sb, big)
		}
		after, err := sb.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if grown := int64(after.LinearMemoryBytes) - int64(before.LinearMemoryBytes); grown > 40<<20 {
			t.Fatalf("40 cells of 2 MiB grew the memory by %d MiB", grown>>20)
		}
		exec(t, sb, "def recent():\n    raise ValueError('recent')")
		ce := exec(t, sb, "recent()")
		if !strings.Contains(ce.Traceback, "in recent\n    raise ValueError('recent')") {
			t.Fatalf("a recent cell's lines are gone: %q", ce.Traceback)
		}
		ce = exec(t, sb, "old()")
		if !strings.Contains(ce.Traceback, ", line 2, in old\n") || strings.Contains(ce.Traceback, "raise ValueError('old')") {
			t.Fatalf("the oldest cell's source is still kept: %q", ce.Traceback)
		}
	})
}

// TestStrSubclassesReachTheHost: what goes to the host as text may be a
// str subclass (an enum.StrEnum member): an exception's __str__, a
// __repr__ for GetVariable, an llm_query prompt. marshal refuses
// subclasses: the error read as an interrupt, GetVariable failed as
// interrupted, the prompt raised "unmarshallable object".
func TestStrSubclassesReachTheHost(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{OnLLMQuery: upper}, "")
		exec(t, sb, "import enum\nclass T(str): pass\nclass P(enum.StrEnum):\n    HI = 'say hi'\n"+
			"class E(Exception):\n    def __str__(self): return T('boom')\n"+
			"class R:\n    def __repr__(self): return T('an R')\nr = R()")
		if ce := exec(t, sb, "raise E()"); ce.ErrorType != "E" || ce.Error != "E: boom" || !strings.HasSuffix(ce.Traceback, "\nE: boom\n") {
			t.Errorf("raise E(): %+v", ce)
		}
		if ce := exec(t, sb, "print(llm_query(P.HI), llm_query_batched([P.HI, T('x')]))"); ce.Stdout != "SAY HI ['SAY HI', 'X']\n" {
			t.Errorf("prompts: %+v", ce)
		}
		if v, found, err := sb.GetVariable(context.Background(), "r"); err != nil || !found || v != "an R" {
			t.Errorf("GetVariable: %#v %v %v", v, found, err)
		}
	})
}

// TestDevices checks /dev as Emscripten lays it out: /dev/stdout and
// /dev/stderr reach the execution's output (writing to them made files
// there, and the output was lost), /dev/tty is the output too, /dev/stdin
// is at its end, /dev/urandom gives random bytes, and a name that is not
// there cannot be made (EROFS, not a file nothing reads).
func TestDevices(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, "")
		ce := exec(t, sb, "import csv, os, stat\n"+
			"with open('/dev/stdout', 'w', newline='') as f:\n    csv.writer(f).writerow(['a', 'b c'])\n"+
			"with open('/dev/stderr', 'w') as f:\n    print('to stderr', file=f)\n"+
			"print('between')\n"+
			"with open('/dev/tty', 'w') as f:\n    f.write('to the tty\\n')\n"+
			"with open('/dev/stdin') as f:\n    print(repr(f.read()))\n"+
			"with open('/dev/urandom', 'rb') as f:\n    a, b = f.read(32), f.read(32)\n"+
			"print(len(a), len(b), a != b)\n"+
			"try:\n    open('/dev/tty1', 'w')\nexcept OSError as e:\n    print(type(e).__name__, e.strerror)\n"+
			"print(sorted(n for n in os.listdir('/dev') if not stat.S_ISCHR(os.stat('/dev/' + n).st_mode)))")
		want := "a,b c\r\nbetween\nto the tty\n''\n32 32 True\nOSError Read-only file system\n[]\n"
		if ce.Error != "" || ce.Stdout != want || ce.Stderr != "to stderr\n" {
			t.Fatalf("stdout %q (want %q), stderr %q, error %q", ce.Stdout, want, ce.Stderr, ce.Error)
		}
	})
}

// TestNativeStackOverflow checks what happens when freeing a chain of a
// million nested lists recurses in C past wazero's 400 MB stack (native
// CPython defers such frees; here CPython cannot see that stack): the
// sandbox is dead, the error says why, and Restart brings it back.
func TestNativeStackOverflow(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, "")
		ctx := context.Background()
		_, err := sb.Execute(ctx, "x = []\nfor i in range(10**6):\n    x = [x]\ndel x")
		if !errors.Is(err, supervisor.ErrDead) || !strings.Contains(err.Error(), "native stack overflowed") {
			t.Fatalf("err = %v, want ErrDead saying the native stack overflowed", err)
		}
		if err := sb.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		if err := sb.Initialize(ctx, ""); err != nil {
			t.Fatal(err)
		}
		if ce := exec(t, sb, "print('back')"); ce.Stdout != "back\n" {
			t.Fatalf("after Restart: %+v", ce)
		}
		if m.name != "worker" {
			return // the same path as below, and 10 s more
		}
		// A recursion a million frames deep: its RecursionError is
		// reported, and freeing its frames afterwards overflows. The
		// execution itself says so (it used to come back as a plain
		// RecursionError, and the next call found the sandbox dead).
		_, err = sb.Execute(ctx, "import sys\nsys.setrecursionlimit(1_000_000)\ndef f(n):\n    return f(n + 1)\nf(0)")
		if !errors.Is(err, supervisor.ErrDead) || !strings.Contains(err.Error(), "native stack overflowed") {
			t.Fatalf("deep recursion: err = %v, want ErrDead saying the native stack overflowed", err)
		}
	})
}

// TestBrokenImportsDoNotBreakReports checks that code which breaks the
// import of the modules the sandbox formats tracebacks with still gets its
// exceptions reported, and its interrupts as ErrCanceled (they became an
// internal error that matched nothing).
func TestBrokenImportsDoNotBreakReports(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, "")
		exec(t, sb, "import sys\nfor name in ('traceback', 'linecache', 'ast'):\n    sys.modules[name] = None")
		ce := exec(t, sb, "1/0")
		if ce.ErrorType != "ZeroDivisionError" || !strings.Contains(ce.Traceback, "ZeroDivisionError: division by zero") {
			t.Fatalf("%+v", ce)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		if _, err := sb.Execute(ctx, "while True: pass"); !errors.Is(err, supervisor.ErrCanceled) || errors.Is(err, supervisor.ErrDead) {
			t.Fatalf("err = %v, want ErrCanceled", err)
		}
	})
}

// TestProcessTimeLeavesOutWaits: time.process_time() is the code's CPU
// time, so a sleep and a wait for an llm_query answer do not count
// (they did: the CPU clocks were the monotonic clock); busy work does.
func TestProcessTimeLeavesOutWaits(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{OnLLMQuery: func(ctx context.Context, prompt string) (string, error) {
			select { // the slow model the test is about
			case <-time.After(300 * time.Millisecond):
			case <-ctx.Done():
			}
			return "ok", nil
		}}, "")
		ce := exec(t, sb, "import time\nc0 = time.process_time()\ntime.sleep(0.3)\nllm_query('q')\nwaited = time.process_time() - c0\n"+
			"c0 = time.process_time()\nt0 = time.monotonic()\nwhile time.monotonic() - t0 < 0.05: pass\nbusy = time.process_time() - c0\n"+
			"print(waited < 0.3, busy > 0.04)")
		if ce.Stdout != "True True\n" {
			t.Fatalf("stdout %q (error %q): want the waits left out and the busy loop counted", ce.Stdout, ce.Error)
		}
	})
}

// TestStrftimeAsGlibc: strftime writes what glibc's writes (CPython on
// Linux): musl's, which Pyodide's CPython has, wrote nothing at all for a
// format with a directive it does not know (%k %l %P, %Q, a lone % at the
// end), so time.strftime, datetime.strftime and logging's datefmt
// returned "", and it ignored flags and widths. The expected lines are
// CPython 3.11's on glibc.
func TestStrftimeAsGlibc(t *testing.T) {
	code := `import datetime, time, logging, io
fmts = ['%l:%M %P', '%k', '%^a', 'Done: 100%', '%Y-%m-%d %Q', '%10A', '%#b %#p', '%-l', '%_d %-d %05d', '%^10a', '%5k',
        '%010l', '%_5H', '%3m', '%Y-%m-%dT%H:%M:%S', '%b %e %l:%M:%S %P', '%c', '%%k']
for d in (datetime.datetime(2024, 6, 1, 15, 5, 9), datetime.datetime(2024, 6, 1, 0, 5, 9)):
    print([d.strftime(f) for f in fmts])
print(time.strftime('%k:%M', (2024, 6, 1, 9, 5, 0, 5, 153, 0)))
s = io.StringIO()
h = logging.StreamHandler(s)
h.setFormatter(logging.Formatter('%(asctime)s %(message)s', datefmt='%l %P'))
log = logging.getLogger('t')
log.addHandler(h)
log.warning('hi')
print(len(s.getvalue().split()) == 3 and s.getvalue().split()[1] in ('am', 'pm'))`
	want := `[' 3:05 pm', '15', 'SAT', 'Done: 100%', '2024-06-01 %Q', '  Saturday', 'JUN pm', '3', ' 1 1 00001', '       SAT', '   15', '0000000003', '   15', '006', '2024-06-01T15:05:09', 'Jun  1  3:05:09 pm', 'Sat Jun  1 15:05:09 2024', '%k']
['12:05 am', ' 0', 'SAT', 'Done: 100%', '2024-06-01 %Q', '  Saturday', 'JUN am', '12', ' 1 1 00001', '       SAT', '    0', '0000000012', '    0', '006', '2024-06-01T00:05:09', 'Jun  1 12:05:09 am', 'Sat Jun  1 00:05:09 2024', '%k']
 9:05
True
`
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, "")
		if ce := exec(t, sb, code); ce.Error != "" || ce.Stdout != want {
			t.Fatalf("got %q (%s), want %q", ce.Stdout, ce.Error, want)
		}
	})
}

// TestImportFromWorkingDirectory: a module the code writes to its working
// directory can be imported, as under `python -c` (sys.path had no ""),
// also in the cell that writes it; and help("modules ...") lists modules
// (it printed only the refusal of _ctypes, listed as built in).
func TestImportFromWorkingDirectory(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, "")
		exec(t, sb, "open('helper_mod.py', 'w').write('V = 5\\n')")
		if ce := exec(t, sb, "import helper_mod\nprint(helper_mod.V)"); ce.Error != "" || ce.Stdout != "5\n" {
			t.Fatalf("%+v", ce)
		}
		if ce := exec(t, sb, "open('other_mod.py', 'w').write('W = 6')\nimport other_mod\nprint(other_mod.W)"); ce.Error != "" || ce.Stdout != "6\n" {
			t.Fatalf("%+v", ce)
		}
		if ce := exec(t, sb, "help('modules json')"); ce.Error != "" || !strings.Contains(ce.Stdout, "json.decoder - ") || strings.Contains(ce.Stdout, "cannot import") {
			t.Fatalf("%+v", ce)
		}
	})
}

// TestFileMmap: a regular file can be mapped (mmap.mmap of a file raised
// OSError ENODEV), writes through a shared map reach the file, and
// SQLite's WAL mode, which maps its shared-memory file, works (every
// write after "pragma journal_mode=wal" failed with "disk I/O error").
func TestFileMmap(t *testing.T) {
	code := `import mmap, sqlite3
with open('m.bin', 'wb') as f:
    f.write(b'hello world')
with open('m.bin', 'r+b') as f:
    m = mmap.mmap(f.fileno(), 0)
    print(m[:5])
    m[0:5] = b'HELLO'
    m.close()
print(open('m.bin', 'rb').read())
with open('m.bin', 'rb') as f:
    m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    print(m.find(b'world'), len(m))
    m.close()
c = sqlite3.connect('w.db')
print(c.execute('pragma journal_mode=wal').fetchone())
c.execute('create table t(a)')
c.execute('insert into t values (1), (2)')
c.commit()
c2 = sqlite3.connect('w.db')
print(c2.execute('select sum(a) from t').fetchone())
c.execute('insert into t values (3)')
c.commit()
print(c2.execute('select sum(a) from t').fetchone())`
	want := "b'hello'\nb'HELLO world'\n6 11\n('wal',)\n(3,)\n(6,)\n"
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, "")
		if ce := exec(t, sb, code); ce.Error != "" || ce.Stdout != want {
			t.Fatalf("got %q (%s), want %q", ce.Stdout, ce.Traceback, want)
		}
	})
}
