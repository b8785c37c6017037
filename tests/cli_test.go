package tests

import (
	"bytes"
	"errors"
	"io"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The tests named TestCLI*, TestRepl* and TestServe* run the real
// bin/rlm-sandbox, which `make` (and `make test`) builds.

// cliBin is the path of bin/rlm-sandbox.
func cliBin(t *testing.T) string {
	t.Helper()
	bin, err := filepath.Abs("../bin/rlm-sandbox")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%v (run `make` first, or `go build -o bin/ ./cmd/...`)", err)
	}
	return bin
}

// runCLI runs bin/rlm-sandbox to the end and returns its output and exit
// status.
func runCLI(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runCLIEnv(t, nil, stdin, args...)
}

// runCLIEnv is runCLI with extra environment variables.
func runCLIEnv(t *testing.T, env []string, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := osexec.Command(cliBin(t), args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	return out.String(), errb.String(), exitStatus(t, err)
}

func exitStatus(t *testing.T, err error) int {
	t.Helper()
	var exit *osexec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	}
	t.Fatalf("run rlm-sandbox: %v", err)
	return -1
}

// watchedBuffer is an output stream a test can wait on.
type watchedBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // closed and replaced at each write
}

func newWatchedBuffer() *watchedBuffer { return &watchedBuffer{changed: make(chan struct{})} }

func (b *watchedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	close(b.changed)
	b.changed = make(chan struct{})
	return len(p), nil
}

func (b *watchedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor waits until the output contains want.
func (b *watchedBuffer) waitFor(t *testing.T, want string, within time.Duration) {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		b.mu.Lock()
		found, changed := strings.Contains(b.buf.String(), want), b.changed
		b.mu.Unlock()
		if found {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("no %q in the output within %v; output so far:\n%s", want, within, b.String())
		}
	}
}

// cliProcess is a running bin/rlm-sandbox.
type cliProcess struct {
	cmd            *osexec.Cmd
	stdin          io.WriteCloser
	stdout, stderr *watchedBuffer
	done           chan struct{}
	err            error
}

func startCLI(t *testing.T, args ...string) *cliProcess {
	t.Helper()
	return startCLIEnv(t, nil, args...)
}

// startCLIEnv is startCLI with extra environment variables.
func startCLIEnv(t *testing.T, env []string, args ...string) *cliProcess {
	t.Helper()
	p := &cliProcess{
		cmd:    osexec.Command(cliBin(t), args...),
		stdout: newWatchedBuffer(), stderr: newWatchedBuffer(),
		done: make(chan struct{}),
	}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	stdin, err := p.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.stdin = stdin
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait waits for the process to exit and returns its status.
func (p *cliProcess) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		t.Fatalf("rlm-sandbox still running after %v; stdout:\n%s\nstderr:\n%s", within, p.stdout, p.stderr)
	}
	return exitStatus(t, p.err)
}

// TestCLIExec checks the commands of README.md's first version and the
// exit status of each outcome.
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
		{"stdin with context file", "print(sum(range(10)), context[:5])", []string{"exec", "--context-file", doc}, "45 alpha\n", "", 0},
		{"file", "", []string{"exec", script, "--context-file", doc}, "file beta\n", "warn", 0},
		{"context string, direct", "", []string{"exec", "--direct", "--context", "hi", "-c", "print(context.upper())"}, "HI\n", "", 0},
		{"exception", "", []string{"exec", "-c", "print('before')\n1/0"}, "before\n", "ZeroDivisionError: division by zero", 1},
		{"timeout", "", []string{"exec", "--timeout", "300ms", "-c", "while True: pass"}, "", "timed out", 124},
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
