package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
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
		defer os.Remove(path)
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
// whole when ctx ends (the execution was interrupted or timed out).
func runBridgeCommand(ctx context.Context, flag, command, input string, env []string) (string, error) {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.Stdin = strings.NewReader(input)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return "", context.Cause(ctx)
	}
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > maxBridgeStderr {
			msg = "..." + msg[len(msg)-maxBridgeStderr:]
		}
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			if msg == "" {
				return "", fmt.Errorf("%s failed (%v) and printed nothing on stderr", flag, exit)
			}
			return "", fmt.Errorf("%s failed (%v): %s", flag, exit, msg)
		}
		return "", fmt.Errorf("%s: %v", flag, err)
	}
	return strings.TrimRight(stdout.String(), "\n"), nil
}
