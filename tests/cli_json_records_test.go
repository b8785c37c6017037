package tests

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rlm-sandbox/rlm-sandbox/runtime"
)

// jsonRecords parses exec --json's stdout: one JSON object a line, each
// with the fields of the schema exec --help lists.
func jsonRecords(t *testing.T, out string) []map[string]any {
	t.Helper()
	keys := []string{"stdout", "stderr", "error", "error_type", "traceback", "duration_ms", "python_duration_ms", "bridge_calls", "timed_out", "truncated"}
	var recs []map[string]any
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON record: %q: %v (stdout %q)", l, err, out)
		}
		got := make([]string, 0, len(m))
		for k := range m {
			got = append(got, k)
		}
		if !sameSet(got, keys) {
			t.Fatalf("fields %v, want %v", got, keys)
		}
		recs = append(recs, m)
	}
	return recs
}

// TestCLIExecJSONWhenNothingRuns: exec --json prints a record for what
// failed when none of the code runs, as it does for a block that ran: the
// SyntaxError of a block whose code does not decode, the SandboxError of a
// sandbox that does not start. The exit statuses are those without --json.
func TestCLIExecJSONWhenNothingRuns(t *testing.T) {
	dir := t.TempDir()
	bad := writeFile(t, dir, "bad.py", "print(1)\n# caf\xe9\n")
	notUTF8 := "SyntaxError: Non-UTF-8 code starting with '\\xe9' in file " + bad +
		" on line 2, but no encoding declared; see https://peps.python.org/pep-0263/ for details"
	for _, c := range []struct {
		name, stdin string
		args        []string
		error       string
	}{
		{name: "a file that does not decode, the second block", args: []string{"exec", "--json", "-c", "print('not run')", bad},
			error: notUTF8 + " (<cell-2>)"},
		{name: "stdin that does not decode", stdin: "print('\xe9')\n", args: []string{"exec", "--json"},
			error: "SyntaxError: Non-UTF-8 code starting with '\\xe9' in file <stdin> on line 1, but no encoding declared; " +
				"see https://peps.python.org/pep-0263/ for details (<cell-1>)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, c.stdin, c.args...)
			if code != 1 {
				t.Fatalf("exit status %d, want 1; stdout %q stderr %q", code, out, errOut)
			}
			recs := jsonRecords(t, out)
			want := map[string]any{"stdout": "", "stderr": "", "error": c.error, "error_type": "SyntaxError", "traceback": c.error + "\n",
				"duration_ms": 0.0, "python_duration_ms": 0.0, "bridge_calls": 0.0, "timed_out": false, "truncated": false}
			if len(recs) != 1 || !reflect.DeepEqual(recs[0], want) {
				t.Fatalf("records %v, want one: %v", recs, want)
			}
			// As for an exception of code that ran, the record says it all.
			if strings.Contains(errOut, "SyntaxError") {
				t.Fatalf("--json printed the SyntaxError on stderr too: %q", errOut)
			}
		})
	}
	t.Run("without --json", func(t *testing.T) {
		out, errOut, code := runCLI(t, "", "exec", "-c", "print('not run')", bad)
		if code != 1 || out != "" || !strings.Contains(errOut, notUTF8) {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	})

	noPyodide := []string{
		"RLM_SANDBOX_PYODIDE=" + filepath.Join(dir, "no-pyodide"),
		"RLM_PYODIDE_INDEX_URL=" + filepath.Join(dir, "no-pyodide"),
		"RLM_SANDBOX_CACHE=" + filepath.Join(dir, "cache"),
	}
	for _, mode := range [][]string{nil, {"--direct"}} {
		t.Run("the sandbox does not start "+strings.Join(mode, ""), func(t *testing.T) {
			args := append(append([]string{"exec", "--json"}, mode...), "-c", "print('not run')", "-c", "print('nor this')")
			out, errOut, code := runCLIEnv(t, noPyodide, "", args...)
			if code != 3 {
				t.Fatalf("exit status %d, want 3; stdout %q stderr %q", code, out, errOut)
			}
			recs := jsonRecords(t, out)
			if len(recs) != 1 {
				t.Fatalf("want one record, got %q", out)
			}
			r := recs[0]
			if r["error_type"] != "SandboxError" || !strings.HasPrefix(r["error"].(string), "SandboxError: ") ||
				!strings.Contains(r["error"].(string), "no-pyodide") || r["traceback"] != nil ||
				r["stdout"] != "" || r["stderr"] != "" || r["timed_out"] != false {
				t.Fatalf("record %v", r)
			}
			// The message and its hint are on stderr, as for a block whose
			// sandbox failed.
			if !strings.Contains(errOut, "Pyodide") || !strings.Contains(errOut, "hint: Pyodide "+runtime.PyodideVersion+" is downloaded on first use") {
				t.Fatalf("stderr %q", errOut)
			}
		})
	}
}

// TestCLIExecJSONInvalidUTF8: output bytes that are not UTF-8 are
// replaced as Python's decoder replaces them, one U+FFFD per maximal
// ill-formed part (encoding/json wrote one per byte).
func TestCLIExecJSONInvalidUTF8(t *testing.T) {
	out, errOut, code := runCLI(t, "", "exec", "--json", "-c", `import sys; sys.stdout.buffer.write(b"B\xe2\x82\n\xff\xfeC\n"); sys.stdout.flush()`)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	const want = "B\ufffd\n\ufffd\ufffdC\n" // as b"...".decode("utf-8", "replace") gives it
	if recs := jsonRecords(t, out); len(recs) != 1 || recs[0]["stdout"] != want {
		t.Fatalf("records %v, want stdout %q", recs, want)
	}
}

// TestCLIExecLoneSurrogate: print() of a lone surrogate (os.fsdecode makes
// them of bytes that are not UTF-8) writes its byte, as CPython does under
// the sandbox's C.UTF-8 locale (surrogateescape; it raised
// UnicodeEncodeError), and --json reads it as Python's decoder does.
func TestCLIExecLoneSurrogate(t *testing.T) {
	code := `import os, sys; print(os.fsdecode(b"a\xffb"), sys.stdout.errors)`
	if out, errOut, status := runCLI(t, "", "exec", "-c", code); status != 0 || out != "a\xffb surrogateescape\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", status, out, errOut)
	}
	out, errOut, status := runCLI(t, "", "exec", "--json", "-c", code)
	if recs := jsonRecords(t, out); status != 0 || len(recs) != 1 || recs[0]["stdout"] != "a\ufffdb surrogateescape\n" {
		t.Fatalf("exit %d, records %v, stderr %q", status, recs, errOut)
	}
}
