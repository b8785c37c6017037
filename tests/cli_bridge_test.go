package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// bridgeAnswerLimit is the most a --llm-cmd answer may hold: 64 MiB less
// 1 KiB, room for the worker's framing (see cmd/rlm-sandbox/bridge.go).
const bridgeAnswerLimit = 64<<20 - 1<<10

// TestCLIBridgeAnswerLimit checks that a command printing more than an
// answer may hold fails the call at once, in both modes, instead of being
// read whole.
func TestCLIBridgeAnswerLimit(t *testing.T) {
	printBytes := func(n int) string { return fmt.Sprintf("head -c %d /dev/zero | tr '\\0' a", n) }
	const tooMuch = "--llm-cmd printed more than an answer may hold (64 MiB)"
	runCLICases(t, []cliCase{
		{name: "endless", args: []string{"exec", "--llm-cmd", "yes", "-c", `llm_query("x")`},
			errHas: []string{"BridgeError", tooMuch}, code: 1},
		{name: "endless, direct", args: []string{"exec", "--direct", "--llm-cmd", "yes", "-c", `llm_query("x")`},
			errHas: []string{"BridgeError", tooMuch}, code: 1},
		{name: "100 MB, direct", args: []string{"exec", "--direct", "--llm-cmd", printBytes(100_000_000), "-c", `llm_query("x")`},
			errHas: []string{"BridgeError", tooMuch}, code: 1},
		{name: "one byte over", args: []string{"exec", "--llm-cmd", printBytes(bridgeAnswerLimit + 1), "-c", `llm_query("x")`},
			errHas: []string{"BridgeError", tooMuch}, code: 1},
		{name: "rlm-cmd", args: []string{"exec", "--rlm-cmd", "yes", "-c", `rlm_query("x")`},
			errHas: []string{"BridgeError", "--rlm-cmd printed more than an answer may hold"}, code: 1},
		{name: "at the limit", args: []string{"exec", "--llm-cmd", printBytes(bridgeAnswerLimit), "-c", `print(len(llm_query("x")))`},
			out: strconv.Itoa(bridgeAnswerLimit) + "\n"},
	})
}

// TestCLIBridgeBackgroundChild checks that a command's answer is what it
// printed once it exited, though a child it left in the background holds
// its stdout open, and that the child is killed.
func TestCLIBridgeBackgroundChild(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	start := time.Now()
	out, errOut, code := runCLI(t, "", "exec", "--llm-cmd", "sleep 120 & echo $! > "+pidFile+"; echo hi",
		"-c", `print(llm_query("x"))`)
	if code != 0 || out != "hi\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if d := time.Since(start); d > 60*time.Second {
		t.Fatalf("took %v: the background child was waited for", d)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	waitGone(t, []int{pid}, time.Minute)
}

// TestCLIBridgeCommandDiesWithCLI checks that a bridge command waiting
// on its answer is killed when rlm-sandbox itself is killed (SIGKILL,
// which it cannot catch), instead of running on as an orphan: the shell
// become the command (exec), and a command the shell started in the
// background, whose rlm_query context file is removed too.
func TestCLIBridgeCommandDiesWithCLI(t *testing.T) {
	for _, c := range []struct{ name, flag, command, code string }{
		{"exec", "--llm-cmd", "echo $$ > PID.tmp; mv PID.tmp PID; exec sleep 120", `llm_query("x")`},
		{"background", "--rlm-cmd", "echo $RLM_CONTEXT_FILE > CTX; sleep 120 & echo $! > PID.tmp; mv PID.tmp PID; wait", `rlm_query("t", "the context")`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			pidFile, ctxFile := filepath.Join(dir, "pid"), filepath.Join(dir, "ctx")
			command := strings.NewReplacer("PID", pidFile, "CTX", ctxFile).Replace(c.command)
			p := startCLI(t, "exec", c.flag, command, "-c", c.code)
			var pid int
			deadline := time.Now().Add(time.Minute)
			for {
				b, err := os.ReadFile(pidFile)
				if err == nil {
					if pid, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
						t.Fatal(err)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the command did not start within a minute; stderr:\n%s", p.stderr)
				}
				time.Sleep(10 * time.Millisecond) // polling the file system: nothing to wait on
			}
			if processGone(pid) {
				t.Fatalf("the command (pid %d) ended before rlm-sandbox was killed", pid)
			}
			var contextFile string
			if c.flag == "--rlm-cmd" {
				b, err := os.ReadFile(ctxFile)
				if err != nil {
					t.Fatal(err)
				}
				contextFile = strings.TrimSpace(string(b))
				if got, err := os.ReadFile(contextFile); err != nil || string(got) != "the context" {
					t.Fatalf("the context file %s: %q (%v)", contextFile, got, err)
				}
			}
			p.cmd.Process.Kill()
			p.wait(t, time.Minute)
			waitGone(t, []int{pid}, time.Minute)
			if contextFile != "" {
				// Removed after the group is killed: poll for it.
				for _, err := os.Stat(contextFile); err == nil; _, err = os.Stat(contextFile) {
					if time.Now().After(deadline) {
						t.Fatalf("the context file %s is still there", contextFile)
					}
					time.Sleep(10 * time.Millisecond) // polling the file system: nothing to wait on
				}
			}
		})
	}
}

// TestCLIBridgeStderrCut checks that a failed command's long stderr is cut
// to its last 4,000 bytes between characters, not inside one.
func TestCLIBridgeStderrCut(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		suffix string
		kept   int // characters é kept
	}{
		{"", 2000},  // 6,000 bytes: the cut falls between two é
		{"x", 1999}, // 6,001 bytes: the cut falls inside an é, and moves past it
	} {
		t.Run(fmt.Sprintf("suffix %q", c.suffix), func(t *testing.T) {
			f := writeFile(t, dir, "stderr"+c.suffix, strings.Repeat("\u00e9", 3000)+c.suffix)
			out, errOut, code := runCLI(t, "", "exec", "--llm-cmd", "cat "+f+" >&2; exit 1", "-c",
				"try:\n    llm_query('x')\nexcept BridgeError as e:\n    m = str(e)\n    print(m[:37], m.count('\\u00e9'), '\\ufffd' in m, m.endswith('\\u00e9' + "+fmt.Sprintf("%q", c.suffix)+"))")
			want := fmt.Sprintf("--llm-cmd failed (exit status 1): ... %d False True\n", c.kept)
			if code != 0 || out != want {
				t.Fatalf("exit %d, stdout %q, want %q; stderr %q", code, out, want, errOut)
			}
		})
	}
}
