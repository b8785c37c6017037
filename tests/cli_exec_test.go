package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cliCase is one run of bin/rlm-sandbox and what it must do.
type cliCase struct {
	name    string
	stdin   string
	args    []string
	out     string // the exact stdout
	errHas  []string
	code    int
	env     []string
	outFunc func(t *testing.T, out string) // instead of out, when set
}

func runCLICases(t *testing.T, cases []cliCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := runCLIEnv(t, c.env, c.stdin, c.args...)
			if code != c.code {
				t.Fatalf("exit status %d, want %d; stdout %q stderr %q", code, c.code, out, errOut)
			}
			if c.outFunc != nil {
				c.outFunc(t, out)
			} else if out != c.out {
				t.Fatalf("stdout %q, want %q (stderr %q)", out, c.out, errOut)
			}
			for _, s := range c.errHas {
				if !strings.Contains(errOut, s) {
					t.Fatalf("stderr %q does not contain %q", errOut, s)
				}
			}
		})
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCLIExecInputs(t *testing.T) {
	dir := t.TempDir()
	times10 := writeFile(t, dir, "times10.py", "x = x * 10\n")
	show := writeFile(t, dir, "show.py", "print('x is', x)\n")
	runCLICases(t, []cliCase{
		{name: "-c", args: []string{"exec", "-c", "print(6*7)"}, out: "42\n"},
		{name: "several -c share the sandbox", args: []string{"exec", "-c", "x = 1", "-c", "x += 1; print(x)"}, out: "2\n"},
		{name: "-c and files run in the order given", args: []string{"exec", "-c", "x = 1", times10, "-c", "x += 1", show}, out: "x is 11\n"},
		{name: "files", args: []string{"exec", "--direct", writeFile(t, dir, "set.py", "x = 7\n"), times10, show}, out: "x is 70\n"},
		{name: "stdin, nothing given", stdin: "print('from stdin')", args: []string{"exec"}, out: "from stdin\n"},
		{name: "stdin as -", stdin: "x = x + 5", args: []string{"exec", "-c", "x = 1", "-", show}, out: "x is 6\n"},
		{name: "the first exception stops the run", args: []string{"exec", "-c", "print('a')", "-c", "1/0", "-c", "print('never')"},
			out: "a\n", errHas: []string{"ZeroDivisionError"}, code: 1},
		{name: "exit() ends the run", args: []string{"exec", "-c", "print(1); exit()", "-c", "print(2)"}, out: "1\n"},
		{name: "sys.exit with a message", args: []string{"exec", "-c", "import sys; sys.exit('bye')"}, errHas: []string{"bye"}, code: 1},
		{name: "partial last line", args: []string{"exec", "-c", "print('no newline', end='')"}, out: "no newline"},
		{name: "partial lines of two blocks", args: []string{"exec", "-c", "print('a', end='')", "-c", "print('b', end='')"}, out: "ab"},
		{name: "a line of 64 KiB", args: []string{"exec", "-c", "print('x' * 65536)"}, out: strings.Repeat("x", 65536) + "\n"},
		{name: "a line of 3 MB, direct", args: []string{"exec", "--direct", "-c", "print('y' * 3_000_000)"}, out: strings.Repeat("y", 3_000_000) + "\n"},
		{name: "missing file", args: []string{"exec", filepath.Join(dir, "nope.py")}, errHas: []string{"nope.py", "no such file"}, code: 2},
		{name: "stdin twice", args: []string{"exec", "-", "-"}, errHas: []string{`"-"`}, code: 2},
		{name: "unknown command", args: []string{"exce"}, errHas: []string{"unknown command", "--help"}, code: 2},
		{name: "too many arguments", args: []string{"repl", "extra"}, errHas: []string{"extra"}, code: 2},
	})
}

func TestCLIExecContext(t *testing.T) {
	dir := t.TempDir()
	doc := writeFile(t, dir, "doc.txt", "alpha beta\ngamma\n")
	js := writeFile(t, dir, "ctx.json", `{"users": [{"name": "ada"}, {"name": "alan"}]}`)
	typed := "print(type(context).__name__, context)"
	runCLICases(t, []cliCase{
		{name: "none", args: []string{"exec", "-c", "print(repr(context))"}, out: "''\n"},
		{name: "--context", args: []string{"exec", "--context", "some text", "-c", typed}, out: "str some text\n"},
		{name: "--context-file", args: []string{"exec", "--context-file", doc, "-c", "print(context.split())"}, out: "['alpha', 'beta', 'gamma']\n"},
		{name: "--context-file -", stdin: "piped text", args: []string{"exec", "--context-file", "-", "-c", typed}, out: "str piped text\n"},
		{name: "--context-file, invalid UTF-8", stdin: "a\xffb", args: []string{"exec", "--context-file", "-", "-c", "print(ascii(context))"}, out: "'a\\ufffdb'\n"},
		// As Python's decode("utf-8", "replace"): one U+FFFD per byte of
		// a run of bad bytes, one for a truncated character.
		{name: "--context-file, invalid runs", stdin: "\xff\xfe|\xe2\x82|\xf0\x80\x80", args: []string{"exec", "--context-file", "-", "-c", "print(ascii(context))"},
			out: "'\\ufffd\\ufffd|\\ufffd|\\ufffd\\ufffd\\ufffd'\n"},
		{name: "--context-json", args: []string{"exec", "--context-json", `{"n": 12345678901234567890123, "xs": [1, 2.5, null, true, "s"]}`,
			"-c", "print(type(context).__name__, context['n'] + 1, context['xs'])"},
			out: "dict 12345678901234567890124 [1, 2.5, None, True, 's']\n"},
		{name: "--context-json -", stdin: "[1, 2, 3]", args: []string{"exec", "--context-json", "-", "-c", "print(sum(context))"}, out: "6\n"},
		{name: "--context-json @file", args: []string{"exec", "--context-json", "@" + js, "-c", "print([u['name'] for u in context['users']])"}, out: "['ada', 'alan']\n"},
		{name: "--context-json keeps the order", args: []string{"exec", "--context-json", `{"q": 1, "docs": [{"z": 0, "a": 1}], "q": 2}`, "-c", "print(context)"},
			out: "{'q': 2, 'docs': [{'z': 0, 'a': 1}]}\n"},
		{name: "--context-json keeps the order, direct", args: []string{"exec", "--direct", "--context-json", `{"q": 1, "docs": [{"z": 0, "a": 1}]}`, "-c", "print(context)"},
			out: "{'q': 1, 'docs': [{'z': 0, 'a': 1}]}\n"},
		{name: "--context-json string", args: []string{"exec", "--context-json", `"just a string"`, "-c", typed}, out: "str just a string\n"},
		{name: "invalid JSON", args: []string{"exec", "--context-json", "{nope", "-c", "pass"}, errHas: []string{"--context-json", "JSON"}, code: 2},
		{name: "two JSON values", args: []string{"exec", "--context-json", "1 2", "-c", "pass"}, errHas: []string{"--context-json"}, code: 2},
		{name: "two context flags", args: []string{"exec", "--context", "a", "--context-file", doc, "-c", "pass"}, errHas: []string{"one of"}, code: 2},
		{name: "missing context file", args: []string{"exec", "--context-file", filepath.Join(dir, "nope"), "-c", "pass"}, errHas: []string{"--context-file"}, code: 2},
		{name: "code and context both on stdin", stdin: "print(1)", args: []string{"exec", "--context-file", "-"}, errHas: []string{"standard input"}, code: 2},
	})
}

// TestCLIExecPipeline feeds a few megabytes through a shell pipeline into
// the context, and from a file on standard input: whole, and from where
// an earlier reader of it stopped (the command reads a regular file from
// its offset in one allocation of the size left).
func TestCLIExecPipeline(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	for i := range 200_000 {
		fmt.Fprintf(&b, "line %d needle=%v\n", i, i%1000 == 0)
	}
	big := writeFile(t, dir, "big.txt", b.String())
	code := `'print(len(context), context.count("needle=true"), repr(context[:9]))'`
	for _, c := range []struct{ script, want string }{
		{fmt.Sprintf(`cat %s | %s exec --context-file - -c %s`, big, cliBin(t), code), fmt.Sprintf("%d 200 'line 0 ne'\n", b.Len())},
		{fmt.Sprintf(`%s exec --context-file - -c %s < %s`, cliBin(t), code, big), fmt.Sprintf("%d 200 'line 0 ne'\n", b.Len())},
		{fmt.Sprintf(`{ dd bs=5 count=1 of=/dev/null 2>/dev/null; %s exec --context-file - -c %s; } < %s`, cliBin(t), code, big),
			fmt.Sprintf("%d 200 '0 needle='\n", b.Len()-5)},
	} {
		got, err := shell(t, c.script)
		if got != c.want || err != nil {
			t.Errorf("%s\n-> %q (%v), want %q", c.script, got, err, c.want)
		}
	}
}

// shell runs a script with sh and returns its stdout.
func shell(t *testing.T, script string) (string, error) {
	t.Helper()
	cmd := osexec.Command("sh", "-c", script)
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%v: %s", err, errb.String())
	}
	return string(out), nil
}

func TestCLIExecJSON(t *testing.T) {
	out, errOut, code := runCLI(t, "", "exec", "--json",
		"-c", `print("hi")`,
		"-c", "import sys\nprint('oops', file=sys.stderr)\nraise ValueError('bad')")
	if code != 1 {
		t.Fatalf("exit status %d, want 1; stderr %q", code, errOut)
	}
	if strings.Contains(errOut, "Traceback") {
		t.Fatalf("--json printed the traceback on stderr too: %q", errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("want one JSON object per block, got %q", out)
	}
	keys := []string{"stdout", "stderr", "error", "error_type", "traceback", "duration_ms", "python_duration_ms", "bridge_calls", "timed_out", "truncated"}
	var objs []map[string]any
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %q: %v", l, err)
		}
		got := make([]string, 0, len(m))
		for k := range m {
			got = append(got, k)
		}
		if !sameSet(got, keys) {
			t.Fatalf("fields %v, want %v", got, keys)
		}
		if d, ok := m["duration_ms"].(float64); !ok || d < 0 {
			t.Fatalf("duration_ms %v", m["duration_ms"])
		}
		objs = append(objs, m)
	}
	want0 := map[string]any{"stdout": "hi\n", "stderr": "", "error": nil, "error_type": nil, "traceback": nil, "timed_out": false, "truncated": false, "bridge_calls": 0.0}
	for k, v := range want0 {
		if !reflect.DeepEqual(objs[0][k], v) {
			t.Fatalf("block 1 %s = %#v, want %#v", k, objs[0][k], v)
		}
	}
	if o := objs[1]; o["stderr"] != "oops\n" || o["error"] != "ValueError: bad" || o["error_type"] != "ValueError" ||
		!strings.Contains(fmt.Sprint(o["traceback"]), "raise ValueError('bad')") {
		t.Fatalf("block 2: %v", o)
	}

	t.Run("timeout", func(t *testing.T) {
		out, _, code := runCLI(t, "", "exec", "--json", "--timeout", "200ms", "-c", "print('started')\nwhile True: pass")
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil || code != 124 {
			t.Fatalf("exit %d, stdout %q", code, out)
		}
		if m["timed_out"] != true || m["stdout"] != "started\n" || m["error_type"] != "KeyboardInterrupt" {
			t.Fatalf("%v", m)
		}
	})
	t.Run("max-output", func(t *testing.T) {
		out, _, code := runCLI(t, "", "exec", "--json", "--max-output", "100", "-c", "print('x' * 1000 + 'END')")
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil || code != 0 {
			t.Fatalf("exit %d, stdout %q", code, out)
		}
		s := m["stdout"].(string)
		if m["truncated"] != true || len(s) > 400 || !strings.HasPrefix(s, "xxx") || !strings.HasSuffix(s, "END\n") {
			t.Fatalf("truncated %v, stdout %q", m["truncated"], s)
		}
	})
	t.Run("max-output without --json", func(t *testing.T) {
		out, _, code := runCLI(t, "", "exec", "--max-output", "100", "-c", "print('x' * 1000 + 'END')")
		if code != 0 || len(out) > 400 || !strings.HasSuffix(out, "END\n") {
			t.Fatalf("exit %d, stdout %q", code, out)
		}
	})
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func TestCLIExecBridges(t *testing.T) {
	bin := cliBin(t)
	runCLICases(t, []cliCase{
		{name: "llm-cmd", args: []string{"exec", "--llm-cmd", "tr a-z A-Z", "-c", `print(llm_query("hello"))`}, out: "HELLO\n"},
		{name: "llm-cmd batched", args: []string{"exec", "--llm-cmd", "tr a-z A-Z", "-c", `print(llm_query_batched(["a", "b", "c"]))`}, out: "['A', 'B', 'C']\n"},
		{name: "llm-cmd trailing newlines dropped", args: []string{"exec", "--llm-cmd", "cat; echo; echo", "-c", `print(repr(llm_query("x")))`}, out: "'x'\n"},
		{name: "llm-cmd failure", args: []string{"exec", "--llm-cmd", `echo "quota exceeded" >&2; exit 7`, "-c", `llm_query("hello")`},
			errHas: []string{"BridgeError", "quota exceeded", "exit status 7"}, code: 1},
		{name: "llm-cmd failure caught", args: []string{"exec", "--llm-cmd", "exit 1", "-c",
			"try:\n    llm_query('x')\nexcept BridgeError as e:\n    print('caught:', e)"},
			out: "caught: --llm-cmd failed (exit status 1) and printed nothing on stderr\n"},
		{name: "no llm-cmd", args: []string{"exec", "-c", `llm_query("hello")`}, errHas: []string{"BridgeError", "--llm-cmd"}, code: 1},
		{name: "no rlm-cmd", args: []string{"exec", "-c", `rlm_query("task")`}, errHas: []string{"BridgeError", "--rlm-cmd"}, code: 1},
		{name: "rlm-cmd, the sandbox's context", args: []string{"exec", "--context", "the doc",
			"--rlm-cmd", `printf '%s|%s|' "$(cat)" "$RLM_CONTEXT_FORMAT"; cat "$RLM_CONTEXT_FILE"`,
			"-c", `print(rlm_query("sum it"))`}, out: "sum it|text|the doc\n"},
		{name: "rlm-cmd, a JSON ctx", args: []string{"exec",
			"--rlm-cmd", `printf '%s|' "$RLM_CONTEXT_FORMAT"; cat "$RLM_CONTEXT_FILE"`,
			"-c", `print(rlm_query("t", ctx={"a": [1, 2]}))`}, out: "json|{\"a\":[1,2]}\n"},
		{name: "rlm-cmd, a dict ctx keeps its order", args: []string{"exec", "--direct",
			"--rlm-cmd", `cat "$RLM_CONTEXT_FILE"`,
			"-c", `print(rlm_query("t", ctx={"b": 1, "a": [{"z": 0, "y": 1}]}))`}, out: "{\"b\":1,\"a\":[{\"z\":0,\"y\":1}]}\n"},
		{name: "rlm-cmd runs rlm-sandbox", args: []string{"exec", "--context", "four",
			"--rlm-cmd", bin + ` exec --context-file "$RLM_CONTEXT_FILE" -c "print(len(context), '$(cat)')"`,
			"-c", `print(rlm_query("sub-task"))`}, out: "4 sub-task\n"},
	})
	t.Run("pipeline", func(t *testing.T) {
		script := fmt.Sprintf(`printf 'alpha\nbeta\n' | %s exec --context-file - --llm-cmd 'tr a-z A-Z' -c 'for w in context.split(): print(llm_query(w))'`, bin)
		if got, err := shell(t, script); got != "ALPHA\nBETA\n" || err != nil {
			t.Fatalf("%q %v", got, err)
		}
	})
	t.Run("wall-timeout ends a slow llm-cmd", func(t *testing.T) {
		start := time.Now()
		_, errOut, code := runCLI(t, "", "exec", "--wall-timeout", "500ms", "--llm-cmd", "sleep 60", "-c", `llm_query("x")`)
		if code != 124 || time.Since(start) > 30*time.Second {
			t.Fatalf("exit %d after %v; stderr %q", code, time.Since(start), errOut)
		}
	})
}

func TestCLIExecLimits(t *testing.T) {
	runCLICases(t, []cliCase{
		{name: "memory-limit", args: []string{"exec", "--memory-limit", "64M", "-c", "x = bytearray(512 * 1024 * 1024)"},
			errHas: []string{"MemoryError"}, code: 1},
		{name: "memory-limit usable below it", args: []string{"exec", "--memory-limit", "256MiB", "-c", "print(len(bytearray(32 * 1024 * 1024)))"},
			out: "33554432\n"},
		{name: "bad memory-limit", args: []string{"exec", "--memory-limit", "lots", "-c", "pass"}, errHas: []string{"lots"}, code: 2},
		{name: "bad timeout", args: []string{"exec", "--timeout", "soon", "-c", "pass"}, errHas: []string{"soon"}, code: 2},
		{name: "timeout counts Python time only", args: []string{"exec", "--timeout", "1s", "--llm-cmd", "sleep 2; echo done", "-c", `print(llm_query("x"))`},
			out: "done\n"},
	})
}

// TestCLIExecSandboxFailure checks exit status 3 and its messages.
func TestCLIExecSandboxFailure(t *testing.T) {
	dir := t.TempDir()
	noPyodide := []string{
		"RLM_SANDBOX_PYODIDE=" + filepath.Join(dir, "no-pyodide"),
		"RLM_PYODIDE_INDEX_URL=" + filepath.Join(dir, "no-pyodide"),
		"RLM_SANDBOX_CACHE=" + filepath.Join(dir, "cache"),
	}
	runCLICases(t, []cliCase{
		{name: "no Pyodide", env: noPyodide, args: []string{"exec", "-c", "pass"}, errHas: []string{"Pyodide", "make"}, code: 3},
		{name: "no Pyodide, direct", env: noPyodide, args: []string{"exec", "--direct", "-c", "pass"}, errHas: []string{"Pyodide", "make"}, code: 3},
		{name: "no Pyodide, prepare", env: noPyodide, args: []string{"prepare"}, errHas: []string{"make"}, code: 3,
			outFunc: func(t *testing.T, out string) {
				if !strings.Contains(out, "failed") {
					t.Fatalf("prepare printed %q", out)
				}
			}},
	})
	t.Run("worker killed", func(t *testing.T) {
		p := startCLI(t, "exec", "-c", "print('ready', flush=True)\nwhile True: pass")
		p.stdout.waitFor(t, "ready\n", 2*time.Minute)
		workers := childPIDs(t, p.cmd.Process.Pid)
		if len(workers) != 1 {
			t.Fatalf("rlm-sandbox has children %v, want one worker", workers)
		}
		if err := syscall.Kill(workers[0], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if code := p.wait(t, time.Minute); code != 3 || !strings.Contains(p.stderr.String(), "worker") {
			t.Fatalf("exit %d, stderr %q", code, p.stderr)
		}
	})
}

// childPIDs lists the children of process pid (Linux).
func childPIDs(t *testing.T, pid int) []int {
	t.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	if err != nil || len(tasks) == 0 {
		t.Skipf("cannot list the children of a process here (%v)", err)
	}
	var pids []int
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, s := range strings.Fields(string(b)) {
			var c int
			fmt.Sscan(s, &c)
			pids = append(pids, c)
		}
	}
	return pids
}

// processGone reports whether pid has exited (a zombie counts as gone).
func processGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == syscall.ESRCH
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z' || s[i+2] == 'X'
	}
	return false
}

// waitGone waits until every pid has exited.
func waitGone(t *testing.T, pids []int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for _, pid := range pids {
		for !processGone(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d still running %v later", pid, within)
			}
			time.Sleep(10 * time.Millisecond) // polling /proc: nothing to wait on
		}
	}
}

// Output the command cannot write (a full disk: /dev/full) fails it with
// the reason, streamed or in --json records, rather than ending with 0
// and the output lost.
func TestCLIOutputNotWritten(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("no /dev/full")
	}
	defer full.Close()
	// Code that goes on printing is stopped at the first failed write (it
	// ran to its time limit, which then hid the cause: status 124).
	loop := []string{"--timeout", "20s", "-c", "while True: print('hello')"}
	for _, args := range [][]string{{"exec", "-c", "print('hello')"}, {"exec", "--json", "-c", "print('hello')"}, append([]string{"exec"}, loop...)} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			cmd := osexec.Command(cliBin(t), args...)
			var stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = full, &stderr
			code := exitStatus(t, cmd.Run())
			if code != 3 || !strings.Contains(stderr.String(), "no space left on device") || strings.Contains(stderr.String(), "KeyboardInterrupt") {
				t.Fatalf("status %d, stderr %q; want 3 and the write's error", code, stderr.String())
			}
		})
	}
}

// TestCLIContextLargerThanMemory: a context larger than the sandbox's
// memory, or code longer than it takes, is a usage error, found without
// reading it all (the command read /dev/zero until the machine's memory
// was gone).
func TestCLIContextLargerThanMemory(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.txt")
	if err := os.WriteFile(big, bytes.Repeat([]byte("x"), 40<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"exec", "--context-file", "/dev/zero", "-c", "1"},
		{"exec", "--memory-limit", "32M", "--context-file", big, "-c", "1"},
	} {
		_, errOut, code := runCLI(t, "", args...)
		if code != 2 || !strings.Contains(errOut, "larger than the sandbox's memory") {
			t.Errorf("%v: status %d, stderr %q; want 2 and the reason", args, code, errOut)
		}
	}
	// And code longer than a sandbox takes (64 MiB).
	if _, errOut, code := runCLI(t, "", "exec", "/dev/zero"); code != 2 || !strings.Contains(errOut, "longer than a sandbox takes") {
		t.Errorf("exec /dev/zero: status %d, stderr %q; want 2 and the reason", code, errOut)
	}
	// Under the limit, as before.
	if out, errOut, code := runCLI(t, "", "exec", "--memory-limit", "64M", "--context-file", big, "-c", "print(len(context))"); code != 0 || out != "41943040\n" {
		t.Errorf("a 40 MiB context under 64M: status %d, stdout %q, stderr %q", code, out, errOut)
	}
}
