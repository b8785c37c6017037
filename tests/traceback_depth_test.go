package tests

import (
	"strings"
	"testing"

	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
)

// A deep recursion's traceback is CPython's own text, "[Previous line
// repeated N more times]" included (the sandbox formats only the frames
// it shows; traceback formats them all, each with a parse of its line).
func TestDeepRecursionTraceback(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, "")
		exec(t, sb, "import sys, traceback\nsys.setrecursionlimit(3000)\n"+
			"def f(n):\n    if n == 2000: raise ValueError('deep')\n    return f(n+1)\n"+
			"def g(n):\n    return f(n) if n else g(n+1)")
		ce := exec(t, sb, "g(0)")
		if ce.ErrorType != "ValueError" {
			t.Fatalf("error %q", ce.Error)
		}
		// CPython's text for the same frames, once the cells' lines are known.
		want := exec(t, sb, "try:\n    g(0)\nexcept ValueError as e:\n"+
			"    print(''.join(traceback.format_exception(type(e), e, e.__traceback__.tb_next)), end='')").Stdout
		const header = "Traceback (most recent call last):\n"
		if !strings.HasPrefix(want, header) || !strings.Contains(want, "[Previous line repeated 1996 more times]") {
			t.Fatalf("CPython's own text is not what the test expects:\n%s", want)
		}
		if !strings.HasPrefix(ce.Traceback, header) || !strings.HasSuffix(ce.Traceback, want[len(header):]) {
			t.Fatalf("traceback:\n%s\nwant its frames after <module> to be:\n%s", ce.Traceback, want[len(header):])
		}
	})
}
