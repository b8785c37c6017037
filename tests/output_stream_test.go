package tests

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
)

// syncBuffer is an io.Writer the test reads after the execution.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// Long lines, a line ending exactly at a 64 KiB frame, writes without a
// newline and a missing last newline: Config.Stdout/Stderr get the bytes
// as written, OnStdout gets each line (in pieces of at most 64 KiB that
// join to it), and the CodeExecution keeps it all.
func TestOutputStreamsLongLines(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		var out, errOut syncBuffer
		var mu sync.Mutex
		var pieces []string
		sb := newSandbox(t, m, supervisor.Config{
			MaxOutputLength: -1,
			Stdout:          &out,
			Stderr:          &errOut,
			OnStdout: func(l string) {
				mu.Lock()
				pieces = append(pieces, l)
				mu.Unlock()
			},
		}, "")
		code := "import sys\n" +
			"print('x' * 65536)\n" + // a line that fills a 64 KiB frame, then its newline
			"print('é' * 100_000)\n" +
			"for _ in range(3): sys.stdout.write('y' * 1_000_000)\n" + // one 3 MB line, written in parts
			"print()\n" +
			"sys.stderr.write('warn')\n" +
			"print('no newline at the end', end='')"
		ce := exec(t, sb, code)
		want := strings.Repeat("x", 65536) + "\n" + strings.Repeat("é", 100_000) + "\n" +
			strings.Repeat("y", 3_000_000) + "\nno newline at the end"
		if ce.Error != "" {
			t.Fatalf("error: %s", ce.Error)
		}
		if ce.Stdout != want {
			t.Fatalf("CodeExecution.Stdout: %d bytes, want %d", len(ce.Stdout), len(want))
		}
		if got := out.String(); got != want {
			t.Fatalf("Config.Stdout got %d bytes, want %d (%q…)", len(got), len(want), got[:min(len(got), 40)])
		}
		if got := errOut.String(); got != "warn" || ce.Stderr != "warn" {
			t.Fatalf("stderr: writer %q, CodeExecution %q", got, ce.Stderr)
		}
		mu.Lock()
		defer mu.Unlock()
		var joined strings.Builder
		for _, p := range pieces {
			if len(p) > 64<<10 {
				t.Fatalf("OnStdout got a piece of %d bytes", len(p))
			}
			joined.WriteString(p)
		}
		if joined.String() != strings.ReplaceAll(want, "\n", "") {
			t.Fatalf("OnStdout's pieces join to %d bytes, want %d", joined.Len(), len(want)-3)
		}
	})
}

// A cell that replaces sys.stdout or sys.stderr and fails before putting
// it back (or never does) does not silence the cells after it: each cell
// ends with the host's streams back in place. What the cell itself wrote
// to its replacement stays there.
func TestReplacedStreamsComeBack(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		var lines syncBuffer
		sb := newSandbox(t, m, supervisor.Config{OnStdout: func(l string) { lines.Write([]byte(l + "\n")) }}, "")
		ce := exec(t, sb, "import io, sys\nbuf = io.StringIO()\nsys.stdout = buf\nsys.stderr = io.StringIO()\nprint('captured')\nraise ValueError('helper failed')")
		if ce.ErrorType != "ValueError" || ce.Stdout != "" {
			t.Fatalf("capturing cell: %+v", ce)
		}
		ce = exec(t, sb, "print('result:', 42)\nprint('warn', file=sys.stderr)\nprint(buf.getvalue(), end='')")
		if ce.Stdout != "result: 42\ncaptured\n" || ce.Stderr != "warn\n" {
			t.Fatalf("next cell: %+v", ce)
		}
		ce, err := sb.ExecuteInteractive(context.Background(), "sys.stdout = io.StringIO()")
		if err != nil || ce.Error != "" {
			t.Fatalf("%v %+v", err, ce)
		}
		if ce := exec(t, sb, "print('back')"); ce.Stdout != "back\n" {
			t.Fatalf("after an interactive cell: %+v", ce)
		}
		if got := lines.String(); got != "result: 42\ncaptured\nback\n" {
			t.Fatalf("OnStdout got %q", got)
		}
		// What code does to change the streams' encoding, or closes of
		// them: each cell after one still prints. A wrapper of the host's
		// file used to close it when collected, and every later cell
		// failed ("I/O operation on closed file").
		for _, c := range []struct{ name, code string }{
			{"wrapper of buffer", "sys.stdout = io.TextIOWrapper(sys.stdout.buffer, encoding='utf-8')\nsys.stderr = io.TextIOWrapper(sys.stderr.buffer, encoding='utf-8')"},
			{"wrapper of detach", "sys.stdout = io.TextIOWrapper(sys.stdout.detach(), encoding='utf-8')"},
			{"open of fileno", "sys.stdout = open(sys.stdout.fileno(), 'w', encoding='utf-8')"},
			{"with open(1)", "with open(1, 'w') as f:\n    f.write('')"},
			{"close", "sys.stdout.close()\nsys.stderr.close()"},
			{"os.close", "import os\nos.close(1)\nos.close(2)"},
		} {
			exec(t, sb, c.code+"\nimport gc\ngc.collect()")
			ce := exec(t, sb, "print('after', "+strconv.Quote(c.name)+")\nprint('err', file=sys.stderr)")
			if ce.Stdout != "after "+c.name+"\n" || ce.Stderr != "err\n" {
				t.Errorf("after %s: %+v", c.name, ce)
			}
		}
	})
}
