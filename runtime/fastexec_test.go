package runtime

import (
	"context"
	"strings"
	"testing"
)

// TestFastPathTaken: an interpreter that booted and one restored from its
// boot snapshot both run plain cells through the fast path (fastexec.go),
// whose cells have no frame of the bootstrap's under them.
func TestFastPathTaken(t *testing.T) {
	var notice strings.Builder
	cfg := snapshotConfig(snapshotCache(t), &notice)
	booted := newSnapshotInterp(t, cfg)
	if booted.restored {
		t.Fatal("the first interpreter of a fresh cache was restored")
	}
	restored := newSnapshotInterp(t, cfg)
	if !restored.restored {
		t.Fatalf("the second interpreter booted: %s", notice.String())
	}
	for name, in := range map[string]*Interpreter{"booted": booted, "restored": restored} {
		if in.fastPath() == nil {
			t.Errorf("%s: no fast path", name)
		}
		if out := run(t, in, "import sys\nprint(sys._getframe().f_back)"); out != "None\n" {
			t.Errorf("%s: the cell's caller is %q, want None", name, out)
		}
	}
}

// TestFastPathSemantics: a cell run through the fast path behaves as
// exec(compile(src, name, "exec", dont_inherit=True), globals) did in the
// bootstrap, and cells that take the bootstrap's path fit in with it.
func TestFastPathSemantics(t *testing.T) {
	ctx := context.Background()
	in := newSnapshotInterp(t, Config{})
	exec := func(code string, interactive bool) *Result {
		t.Helper()
		var res *Result
		var err error
		if interactive {
			res, err = in.ExecInteractive(ctx, code, Output{})
		} else {
			res, err = in.Exec(ctx, code, Output{})
		}
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// The cells are numbered across both paths.
	exec("pass", false)
	exec("1", true)
	res := exec("def f():\n    1/0\nf()", false)
	if res.Error == nil || res.Error.Type != "ZeroDivisionError" || !strings.Contains(res.Error.Traceback, `File "<cell-3>", line 2, in f`) ||
		!strings.Contains(res.Error.Traceback, "1/0") {
		t.Errorf("third cell's error: %+v", res.Error)
	}
	if strings.Contains(res.Error.Traceback, "rlm-boot") {
		t.Errorf("the traceback shows the bootstrap:\n%s", res.Error.Traceback)
	}
	// A syntax error names the cell and shows the line.
	res = exec("x = (\n", false)
	if res.Error == nil || res.Error.Type != "SyntaxError" || !strings.Contains(res.Error.Traceback, `File "<cell-4>", line 1`) {
		t.Errorf("syntax error: %+v", res.Error)
	}
	// compile() of a str ignores coding cookies: the text is already decoded.
	if out := run(t, in, "# -*- coding: latin-1 -*-\nprint(len('é'))"); out != "1\n" {
		t.Errorf("coding cookie: %q", out)
	}
	// exec() puts __builtins__ back into globals that lost it.
	run(t, in, "del __builtins__")
	if out := run(t, in, "print(type(__builtins__).__name__, len([1]))"); out != "module 1\n" {
		t.Errorf("__builtins__ after its deletion: %q", out)
	}
	// The cell runs in __main__.
	if out := run(t, in, "import __main__\nprint(__main__.__dict__ is globals(), __name__)"); out != "True __main__\n" {
		t.Errorf("globals: %q", out)
	}
	// An interactive cell shows its last expression, through the fast path.
	var out strings.Builder
	if res, err := in.ExecInteractive(ctx, "y = 6\ny * 7", Output{Stdout: &out}); err != nil || res.Error != nil || out.String() != "42\n" {
		t.Errorf("interactive: %v %+v %q", err, res, out.String())
	}
	// As the ast-based run_interactive shows them, whichever way they go.
	for _, tc := range []struct{ code, want string }{
		{"for i in range(2):\n    i", ""},      // a compound last statement shows nothing
		{"a = 1; a + 1", "2\n"},                // only the last statement of the line
		{"None", ""},                           // displayhook skips None
		{"5 * 5", "25\n"},                      //
		{"_ + 1", "26\n"},                      // and binds _
		{"print('''\nq\n''')", "\nq\n\n"},      // a split inside the string does not compile
		{"@staticmethod\ndef h(): pass\n", ""}, // a decorated definition
		{"'doc'", "'doc'\n"},                   //
	} {
		out.Reset()
		res, err := in.ExecInteractive(ctx, tc.code, Output{Stdout: &out})
		if err != nil || res.Error != nil || out.String() != tc.want {
			t.Errorf("interactive %q: %v %+v, stdout %q, want %q", tc.code, err, res, out.String(), tc.want)
		}
	}
	res = exec("x = 1\n\n1/0", true)
	if res.Error == nil || !strings.Contains(res.Error.Traceback, "line 3") {
		t.Errorf("interactive error in the last statement: %+v", res.Error)
	}
	res = exec("x = (\n", true)
	if res.Error == nil || res.Error.Type != "SyntaxError" || !strings.Contains(res.Error.Traceback, "line 1") {
		t.Errorf("interactive syntax error: %+v", res.Error)
	}
	res = exec("def g():\n    raise KeyError('k')\ng()", true)
	if res.Error == nil || res.Error.Type != "KeyError" || strings.Contains(res.Error.Traceback, "rlm-boot") ||
		!strings.Contains(res.Error.Traceback, "raise KeyError('k')") || strings.Count(res.Error.Traceback, "File ") != 2 {
		t.Errorf("interactive error: %+v", res.Error)
	}
	// A NUL byte: compile()'s error, from the bootstrap's path.
	res = exec("x = 1\x00", false)
	if res.Error == nil || res.Error.Type != "SyntaxError" || !strings.Contains(res.Error.Message, "null bytes") {
		t.Errorf("NUL byte: %+v", res.Error)
	}
	// A cell larger than the scratch buffer keeps, then small ones.
	big := "s = '" + strings.Repeat("a", fastKeep+10) + "'"
	exec(big, false)
	if out := run(t, in, "print(len(s))"); out != "1048586\n" {
		t.Errorf("big cell: %q", out)
	}
	if f := in.fastPath(); f == nil || f.cap > fastKeep {
		t.Errorf("the fast path kept a buffer of %d bytes", f.cap)
	}
}

func TestSplitCell(t *testing.T) {
	for _, tc := range []struct {
		code, head, tail string
		display, split   bool
	}{
		{"x", "", "x", true, true},
		{"x = 1\ny", "x = 1\n", "y", true, true},
		{"x = 1\ny\n\n# end\n", "x = 1\n", "y\n\n# end\n", true, true},
		{"def f():\n    return 1\nf()", "def f():\n    return 1\n", "f()", true, true},
		{"for i in x:\n    i", "", "for i in x:\n    i", false, true},
		{"x = 1\n@d\ndef f(): pass", "x = 1\n", "@d\ndef f(): pass", false, true},
		{"@d\n@e(1)\nclass C: pass", "", "@d\n@e(1)\nclass C: pass", false, true},
		{"iffy = 2\niffy", "iffy = 2\n", "iffy", true, true},
		{"print(\n  1)", "", "print(\n  1)", true, true},
		{"x = 1; y", "", "", false, false},
		{"match x:\n    case 1: pass", "", "", false, false},
		{"  # only a comment\n\n", "", "", false, false},
		{"x = 1\r\ny\r\n", "x = 1\r\n", "y\r\n", true, true},
	} {
		head, tail, lines, display, split := splitCell(tc.code)
		if head != tc.head || tail != tc.tail || display != tc.display || split != tc.split || lines != strings.Count(tc.head, "\n") {
			t.Errorf("splitCell(%q) = %q, %q, %d, %v, %v", tc.code, head, tail, lines, display, split)
		}
	}
}
