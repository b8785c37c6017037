package tests

import (
	"errors"
	"os"
	osexec "os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// terminal is a process running on a pseudo-terminal, as in a person's
// terminal: Ctrl-C and Ctrl-D are the characters the terminal turns into
// SIGINT and end of input.
type terminal struct {
	t      *testing.T
	master *os.File
	cmd    *osexec.Cmd
	out    *watchedBuffer
	seen   int // how much of out expect has consumed
	done   chan struct{}
	err    error
}

// startTerminal runs bin/rlm-sandbox with args on a new pseudo-terminal,
// as the session leader with the terminal as its controlling terminal.
func startTerminal(t *testing.T, args ...string) *terminal {
	t.Helper()
	master, slave := openPTY(t)
	term := &terminal{t: t, master: master, cmd: osexec.Command(cliBin(t), args...), out: newWatchedBuffer(), done: make(chan struct{})}
	term.cmd.Stdin, term.cmd.Stdout, term.cmd.Stderr = slave, slave, slave
	term.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := term.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			term.out.Write(buf[:n])
			if err != nil {
				return // EIO once the process and the terminal are gone
			}
		}
	}()
	go func() {
		term.err = term.cmd.Wait()
		close(term.done)
	}()
	t.Cleanup(func() {
		select {
		case <-term.done:
		default:
			term.cmd.Process.Kill()
			<-term.done
		}
		master.Close()
	})
	return term
}

// typeIn writes what a person types.
func (term *terminal) typeIn(s string) {
	term.t.Helper()
	if _, err := term.master.WriteString(s); err != nil {
		term.t.Fatal(err)
	}
}

// expect waits for want to appear in the output after what earlier calls
// consumed, and consumes the output up to its end.
func (term *terminal) expect(want string) {
	term.t.Helper()
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for {
		term.out.mu.Lock()
		all, changed := term.out.buf.String(), term.out.changed
		term.out.mu.Unlock()
		if i := strings.Index(all[term.seen:], want); i >= 0 {
			term.seen += i + len(want)
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			term.t.Fatalf("no %q on the terminal within a minute; after the part already matched it shows:\n%q", want, all[term.seen:])
		}
	}
}

// rest is the output not consumed yet.
func (term *terminal) rest() string {
	s := term.out.String()
	return s[term.seen:]
}

func (term *terminal) wait() int {
	term.t.Helper()
	select {
	case <-term.done:
	case <-time.After(time.Minute):
		term.t.Fatalf("still running a minute later; the terminal shows:\n%s", term.out)
	}
	var exit *osexec.ExitError
	if errors.As(term.err, &exit) {
		return exit.ExitCode()
	}
	if term.err != nil {
		term.t.Fatal(term.err)
	}
	return 0
}

// TestReplTerminal drives rlm-sandbox repl as a person would, on a
// terminal: prompts, echoed values, blocks, exceptions, Ctrl-C while code
// runs and at the prompt, and Ctrl-D.
func TestReplTerminal(t *testing.T) {
	term := startTerminal(t, "repl", "--context", "the input")
	term.expect("Ctrl-D exits")
	term.expect(">>> ")

	term.typeIn("1 + 1\r")
	term.expect("2\r\n>>> ")

	term.typeIn("context.upper()\r")
	term.expect("'THE INPUT'\r\n>>> ")

	term.typeIn("None\r")
	term.expect(">>> ")
	if rest := term.rest(); rest != "" {
		t.Fatalf("None printed %q", rest)
	}

	term.typeIn("for i in range(3):\r")
	term.expect("... ")
	term.typeIn("    print(i * 10)\r")
	term.expect("... ")
	term.typeIn("\r")
	term.expect("0\r\n10\r\n20\r\n>>> ")

	term.typeIn("1/0\r")
	term.expect("ZeroDivisionError: division by zero\r\n>>> ")

	// Ctrl-C while code runs interrupts it; the session and its variables
	// live on.
	term.typeIn("kept = 41\r")
	term.expect(">>> ")
	term.typeIn("print('spinning'); sum(1 for _ in iter(int, 1))\r")
	term.expect("spinning\r\n")
	term.typeIn("\x03")
	term.expect("KeyboardInterrupt\r\n>>> ")
	term.typeIn("kept + 1\r")
	term.expect("42\r\n>>> ")

	// A Ctrl-C that the code catches prints no KeyboardInterrupt.
	term.typeIn("try:\r")
	term.expect("... ")
	term.typeIn("    print('waiting'); sum(1 for _ in iter(int, 1))\r")
	term.expect("... ")
	term.typeIn("except KeyboardInterrupt:\r")
	term.expect("... ")
	term.typeIn("    print('handled')\r")
	term.expect("... ")
	term.typeIn("\r")
	term.expect("waiting\r\n")
	term.typeIn("\x03")
	term.expect("handled\r\n>>> ")

	// Ctrl-C at the prompt discards the block being typed.
	term.typeIn("for i in range(3):\r")
	term.expect("... ")
	term.typeIn("\x03")
	term.expect("KeyboardInterrupt\r\n>>> ")
	term.typeIn("7 * 6\r")
	term.expect("42\r\n>>> ")

	// Ctrl-D at an empty prompt ends the session.
	term.typeIn("\x04")
	if code := term.wait(); code != 0 {
		t.Fatalf("exit status %d; the terminal shows:\n%s", code, term.out)
	}
}

// TestReplPiped feeds the repl from a pipe: no prompts, the same echo,
// exit() ends the session, and after code that ignores the interrupt is
// killed a fresh interpreter takes over, with the context set again.
func TestReplPiped(t *testing.T) {
	lines := func(l ...string) string { return strings.Join(l, "\n") + "\n" }
	out, errOut, code := runCLI(t, lines(
		"x = 2",
		"x * 21",
		"def f(n):",
		"    return n + 1",
		"",
		"f(x)",
		"exit()",
		"print('not reached')",
	), "repl")
	if code != 0 || out != "42\n3\n" || strings.Contains(errOut, ">>>") || strings.Contains(errOut, "SystemExit") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	out, errOut, code = runCLI(t, lines(
		"x = 1",
		"while True:",
		"    try:",
		"        while True: pass",
		"    except KeyboardInterrupt:",
		"        pass",
		"",
		"print(context, 'x' in globals())",
	), "repl", "--context", "ctx", "--timeout", "300ms")
	if code != 0 || out != "ctx False\n" || !strings.Contains(errOut, "starting a fresh interpreter") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestCLIExecTerminalWithoutCode: exec with nothing to run and a terminal
// for stdin says what to do instead of waiting for input.
func TestCLIExecTerminalWithoutCode(t *testing.T) {
	term := startTerminal(t, "exec")
	if code := term.wait(); code != 2 {
		t.Fatalf("exit status %d", code)
	}
	term.expect("rlm-sandbox repl")
}

// TestReplShowsLastExpression: the repl prints the value of the last
// top-level statement of what was typed when it is an expression, and
// only that one, and its help says so rather than "as Python's own prompt
// does" (which would print every expression statement, those of a block
// included).
func TestReplShowsLastExpression(t *testing.T) {
	help, _, code := runCLI(t, "", "repl", "--help")
	if code != 0 || !strings.Contains(help, `"1; 2" prints 2`) || !strings.Contains(help, `"for i in range(3): i"`) {
		t.Fatalf("exit %d; the help does not say which values are printed:\n%s", code, help)
	}
	lines := func(l ...string) string { return strings.Join(l, "\n") + "\n" }
	out, errOut, code := runCLI(t, lines(
		"1; 2",
		"for i in range(3): i",
		"",
		"if True:",
		"    3",
		"    4",
		"",
		"'a'; None",
		"None",
		"_ * 10",
	), "repl")
	if code != 0 || out != "2\n20\n" {
		t.Fatalf("exit %d, stdout %q (want %q), stderr %q", code, out, "2\n20\n", errOut)
	}
}
