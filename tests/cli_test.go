package tests

import (
	"bytes"
	"errors"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runCLI runs bin/rlm-sandbox (built by `make`) and returns its output and
// exit status.
func runCLI(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	bin, err := filepath.Abs("../bin/rlm-sandbox")
	if err != nil {
		t.Fatal(err)
	}
	cmd := osexec.Command(bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	var exit *osexec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("run %s: %v (run `make` first)", bin, err)
	}
	return out.String(), errb.String(), code
}

func TestCLIExec(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "doc.txt")
	if err := os.WriteFile(doc, []byte("alpha beta"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "s.py")
	if err := os.WriteFile(script, []byte("import sys\nprint('file', context.split()[1])\nprint('warn', file=sys.stderr)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, stdin    string
		args           []string
		out, errSubstr string
		code           int
	}{
		{"code flag", "", []string{"exec", "-c", "print(6*7)"}, "42\n", "", 0},
		{"stdin with context file (README)", "print(sum(range(10)), context[:5])", []string{"exec", "--context-file", doc}, "45 alpha\n", "", 0},
		{"file", "", []string{"exec", script, "--context-file", doc}, "file beta\n", "warn", 0},
		{"context string, direct", "", []string{"exec", "--direct", "--context", "hi", "-c", "print(context.upper())"}, "HI\n", "", 0},
		{"exception", "", []string{"exec", "-c", "print('before')\n1/0"}, "before\n", "ZeroDivisionError: division by zero", 1},
		{"timeout", "", []string{"exec", "--timeout", "300ms", "-c", "while True: pass"}, "", "timed out", 3},
		{"usage", "", []string{"exec", "--no-such-flag"}, "", "unknown flag", 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, c.stdin, c.args...)
			if out != c.out || code != c.code || !strings.Contains(errOut, c.errSubstr) {
				t.Fatalf("stdout %q stderr %q code %d; want stdout %q, stderr containing %q, code %d", out, errOut, code, c.out, c.errSubstr, c.code)
			}
		})
	}
}
