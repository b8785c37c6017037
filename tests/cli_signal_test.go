package tests

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCLIInterrupt sends SIGINT, as Ctrl-C does, to rlm-sandbox exec
// while the code spins: the code gets KeyboardInterrupt, the worker goes
// away, and the exit status is 130.
func TestCLIInterrupt(t *testing.T) {
	cases := []struct {
		name string
		args []string
	}{
		{"worker", []string{"exec", "-c", "print('started', flush=True)\nwhile True: pass"}},
		{"direct", []string{"exec", "--direct", "-c", "print('started', flush=True)\nwhile True: pass"}},
		{"waiting for --llm-cmd", []string{"exec", "--llm-cmd", "sleep 60", "-c", "print('started', flush=True)\nllm_query('x')"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := startCLI(t, c.args...)
			p.stdout.waitFor(t, "started\n", 2*time.Minute)
			var children []int
			if c.name != "direct" {
				children = childPIDs(t, p.cmd.Process.Pid)
			}
			if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			if code := p.wait(t, 30*time.Second); code != 130 {
				t.Fatalf("exit status %d, want 130; stderr %q", code, p.stderr)
			}
			if !strings.Contains(p.stderr.String(), "KeyboardInterrupt") {
				t.Fatalf("stderr %q, want the KeyboardInterrupt traceback", p.stderr)
			}
			waitGone(t, children, 10*time.Second)
		})
	}
}

// TestCLITerminate sends SIGTERM to rlm-sandbox exec while the code spins:
// the code is interrupted and the exit status is 143 (128 + SIGTERM), as
// README.md and --help say.
func TestCLITerminate(t *testing.T) {
	p := startCLI(t, "exec", "-c", "print('started', flush=True)\nwhile True: pass")
	p.stdout.waitFor(t, "started\n", 2*time.Minute)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 30*time.Second); code != 143 {
		t.Fatalf("exit status %d, want 143; stderr %q", code, p.stderr)
	}
}
