package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/rlm-sandbox/rlm-sandbox/ipc"
)

// Environment of an --rlm-cmd command: the file that holds the context of
// the rlm_query call, and how to read it.
const (
	envContextFile   = "RLM_CONTEXT_FILE"
	envContextFormat = "RLM_CONTEXT_FORMAT" // "text" or "json"
)

// maxBridgeStderr bounds how much of a failed command's stderr the Python
// exception carries.
const maxBridgeStderr = 4000

// maxBridgeAnswer bounds a command's answer: a worker cannot pass Python
// more than ipc.MaxFrameSize (64 MiB) in one reply, framing included, and
// direct mode keeps the same limit. A command that prints more is killed
// and the call fails at once.
const maxBridgeAnswer = ipc.MaxFrameSize - 1<<10

// llmQueryFunc answers llm_query by running command (see --llm-cmd), or,
// when command is empty, refuses with an error that names the flag.
func llmQueryFunc(command string) func(context.Context, string) (string, error) {
	if command == "" {
		return func(context.Context, string) (string, error) {
			return "", errors.New("llm_query has no model to ask: run rlm-sandbox with --llm-cmd 'COMMAND' " +
				"(COMMAND gets the prompt on stdin and prints the answer)")
		}
	}
	return func(ctx context.Context, prompt string) (string, error) {
		return runBridgeCommand(ctx, "--llm-cmd", command, prompt, nil)
	}
}

// rlmQueryFunc answers rlm_query by running command with the task on stdin
// and the context in the file $RLM_CONTEXT_FILE (see --rlm-cmd), or, when
// command is empty, refuses with an error that names the flag.
func rlmQueryFunc(command string) func(context.Context, string, any) (string, error) {
	if command == "" {
		return func(context.Context, string, any) (string, error) {
			return "", errors.New("rlm_query has no sub-agent to ask: run rlm-sandbox with --rlm-cmd 'COMMAND' " +
				"(COMMAND gets the task on stdin, the context in the file $" + envContextFile + ", and prints the answer)")
		}
	}
	return func(ctx context.Context, task string, value any) (string, error) {
		path, format, err := writeContextFile(value)
		if err != nil {
			return "", fmt.Errorf("--rlm-cmd: write the context file: %v", err)
		}
		bridgeReaper().addFile(path)
		defer func() {
			os.Remove(path)
			bridgeReaper().forgetFile(path)
		}()
		env := []string{envContextFile + "=" + path, envContextFormat + "=" + format}
		return runBridgeCommand(ctx, "--rlm-cmd", command, task, env)
	}
}

// writeContextFile writes an rlm_query context to a temporary file: a
// string as its text, anything else as JSON.
func writeContextFile(value any) (path, format string, err error) {
	f, err := os.CreateTemp("", "rlm-context-*")
	if err != nil {
		return "", "", err
	}
	format = "text"
	if s, ok := value.(string); ok {
		_, err = f.WriteString(s)
	} else {
		format = "json"
		enc := json.NewEncoder(f)
		enc.SetEscapeHTML(false)
		err = enc.Encode(toJSON(value))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", "", err
	}
	return f.Name(), format, nil
}

// runBridgeCommand runs command with sh -c, input on its stdin, and returns
// its stdout without trailing newlines (as $(...) does). A failure becomes
// an error whose message, raised in Python as BridgeError, carries the
// command's stderr. The command runs in its own process group, killed
// whole when ctx ends (the execution was interrupted or timed out), when
// it prints more than an answer may hold (it fails at once), and when the
// command itself has exited: what a background child of it still holds
// open is not waited for. If rlm-sandbox dies first (SIGKILL included),
// the reaper kills the group (see bridgeReaper); on Linux the shell also
// has Pdeathsig, for when no reaper could start.
func runBridgeCommand(ctx context.Context, flag, command, input string, env []string) (string, error) {
	// The pipes are the command's own files, not ones exec.Cmd copies
	// through: Wait then returns when the command exits, even if a child
	// it left behind holds them open.
	var files []*os.File // closed on return
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err := pipe()
	if err != nil {
		return "", fmt.Errorf("%s: %v", flag, err)
	}
	outR, outW, err := pipe()
	if err != nil {
		return "", fmt.Errorf("%s: %v", flag, err)
	}
	errR, errW, err := pipe()
	if err != nil {
		return "", fmt.Errorf("%s: %v", flag, err)
	}
	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = bridgeProcAttr()
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("%s: %v", flag, err)
	}
	// Killed whole by the reaper if rlm-sandbox dies before the group is
	// killed below.
	bridgeReaper().addGroup(cmd.Process.Pid)
	defer bridgeReaper().forgetGroup(cmd.Process.Pid)
	inR.Close()
	outW.Close()
	errW.Close()
	kill := func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }

	go func() {
		io.WriteString(inW, input) // fails (EPIPE) if the command stops reading
		inW.Close()
	}()
	answer := make(chan cappedOutput, 1)
	go func() { answer <- readCapped(outR, maxBridgeAnswer) }()
	var stderr tailBuffer
	stderrDone := make(chan struct{})
	go func() {
		io.Copy(&stderr, errR)
		close(stderrDone)
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	var (
		out     cappedOutput
		outDone bool
		waitErr error
		done    bool
	)
	for !done || !outDone {
		select {
		case <-ctx.Done():
			kill()
			if !done {
				<-exited
			}
			return "", context.Cause(ctx)
		case out = <-answer:
			outDone = true
			if out.over {
				kill()
				if !done {
					<-exited
				}
				return "", fmt.Errorf("%s printed more than an answer may hold (%d MiB): it was stopped there",
					flag, ipc.MaxFrameSize>>20)
			}
		case waitErr = <-exited:
			done = true
			// What the command left running goes with it, and its
			// output is read to the end of what was written; a
			// process that left the group is given a second.
			kill()
			deadline := time.Now().Add(time.Second)
			outR.SetReadDeadline(deadline)
			errR.SetReadDeadline(deadline)
		}
	}
	if waitErr != nil {
		<-stderrDone
		msg := stderr.text(maxBridgeStderr)
		var exit *exec.ExitError
		if errors.As(waitErr, &exit) {
			if msg == "" {
				return "", fmt.Errorf("%s failed (%v) and printed nothing on stderr", flag, exit)
			}
			return "", fmt.Errorf("%s failed (%v): %s", flag, exit, msg)
		}
		return "", fmt.Errorf("%s: %v", flag, waitErr)
	}
	return strings.TrimRight(string(out.b), "\n"), nil
}

// cappedOutput is what readCapped read.
type cappedOutput struct {
	b    []byte
	over bool // there was more than the cap: b is incomplete
}

// readCapped reads r to its end, or to a read error (a deadline), but no
// more than max bytes.
func readCapped(r io.Reader, max int) cappedOutput {
	var buf bytes.Buffer
	n, _ := io.Copy(&buf, io.LimitReader(r, int64(max)+1))
	if n > int64(max) {
		return cappedOutput{over: true}
	}
	return cappedOutput{b: buf.Bytes()}
}

// tailBuffer keeps the end of what is written to it, in bounded memory.
type tailBuffer struct {
	b       []byte
	dropped bool
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 4*maxBridgeStderr {
		t.b = append(t.b[:0], t.b[len(t.b)-2*maxBridgeStderr:]...)
		t.dropped = true
	}
	return len(p), nil
}

// text is the end of what was written, trimmed of spaces, at most max
// bytes of it after a "..." when it is cut; it is cut between characters.
func (t *tailBuffer) text(max int) string {
	msg := strings.TrimSpace(string(t.b))
	if len(msg) <= max && !t.dropped {
		return msg
	}
	return "..." + tailRunes(msg, max)
}

// tailRunes is the end of s, at most max bytes, starting at a character
// boundary of valid UTF-8.
func tailRunes(s string, max int) string {
	if len(s) <= max {
		return s
	}
	i := len(s) - max
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}
