package tests

import (
	"regexp"
	"strconv"
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
		want := cpythonTraceback(t, sb, "g(0)", "ValueError")
		const header = "Traceback (most recent call last):\n"
		if !strings.HasPrefix(want, header) || !strings.Contains(want, "[Previous line repeated 1996 more times]") {
			t.Fatalf("CPython's own text is not what the test expects:\n%s", want)
		}
		if !strings.HasPrefix(ce.Traceback, header) || !strings.HasSuffix(ce.Traceback, want[len(header):]) {
			t.Fatalf("traceback:\n%s\nwant its frames after <module> to be:\n%s", ce.Traceback, want[len(header):])
		}
	})
}

// A recursion through two functions is not collapsed: thousands of frames
// deep, the traceback shows its first and last frames, as CPython formats
// them, around a line that counts the others (formatting each frame costs
// 0.1 ms, and all but those are cut anyway).
func TestMutualRecursionTraceback(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{MaxOutputLength: -1}, "")
		exec(t, sb, "import sys, traceback\nsys.setrecursionlimit(20000)\n"+
			"def f(n): return g(n + 1)\ndef g(n): return f(n + 1)")
		ce := exec(t, sb, "f(0)")
		if ce.ErrorType != "RecursionError" {
			t.Fatalf("error %q", ce.Error)
		}
		want := cpythonTraceback(t, sb, "f(0)", "RecursionError")
		const header = "Traceback (most recent call last):\n"
		wantFrames := strings.Count(want, "\n  File ")
		if !strings.HasPrefix(want, header) || wantFrames < 19000 {
			t.Fatalf("CPython's own text is not what the test expects (%d frames):\n%.2000s", wantFrames, want)
		}
		got := ce.Traceback
		// Without its header and the <module> frame, it is CPython's text
		// cut in the middle.
		i := strings.Index(got, "\n  File ")
		j := strings.Index(got[i+1:], "\n  File ")
		if !strings.HasPrefix(got, header) || i < 0 || j < 0 {
			t.Fatalf("traceback:\n%.2000s", got)
		}
		body, wantBody := got[i+1+j+1:], want[len(header):]
		marker := regexp.MustCompile(`(?m)^  \[\.\.\. (\d+) frames omitted \.\.\.\]\n`)
		at := marker.FindAllStringSubmatchIndex(body, -1)
		if len(at) != 1 {
			t.Fatalf("want one line counting the frames omitted, got %d:\n%.3000s", len(at), got)
		}
		head, tail := body[:at[0][0]], body[at[0][1]:]
		if !strings.HasPrefix(wantBody, head) || !strings.HasSuffix(wantBody, tail) || len(head) == 0 || len(tail) == 0 {
			t.Fatalf("the frames around the count are not CPython's first and last:\n%.3000s", got)
		}
		omitted, _ := strconv.Atoi(body[at[0][2]:at[0][3]])
		shown := strings.Count(head, "  File ") + strings.Count(tail, "  File ")
		if shown+omitted != wantFrames || shown > 1200 {
			t.Fatalf("%d frames shown and %d omitted; CPython has %d", shown, omitted, wantFrames)
		}
	})
}

// cpythonTraceback is the text CPython's traceback module gives the
// exception of class exc that call raises, for the frames after the
// cell's <module> (the cells' lines known, as the sandbox knows them).
func cpythonTraceback(t *testing.T, sb supervisor.Sandbox, call, exc string) string {
	t.Helper()
	return exec(t, sb, "import traceback\ntry:\n    "+call+"\nexcept "+exc+" as e:\n"+
		"    print(''.join(traceback.format_exception(type(e), e, e.__traceback__.tb_next)), end='')").Stdout
}
