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
