package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
	"github.com/spf13/cobra"
)

// replOptions are repl's flags.
type replOptions struct {
	sandbox sandboxOptions
	global  *globalOptions
}

func newReplCmd(ios *iostreams, g *globalOptions, runF func(*replOptions) error) *cobra.Command {
	o := &replOptions{global: g}
	cmd := &cobra.Command{
		Use:   "repl [flags]",
		Short: "Start an interactive Python session in a sandbox",
		Long: `Starts an interactive session in one sandbox, for a person: type Python at
the ">>>" prompt ("..." asks for the rest of a block; an empty line ends
it). Ctrl-C interrupts running code (or discards the input being typed)
and the session goes on; Ctrl-D or exit() ends it. exit(N) and
sys.exit(N) end it with the status Python's own prompt exits with (see
exec --help).

When the last top-level statement of what was typed (a line, or a block)
is an expression, its value is printed as Python's own prompt prints it:
its repr, through sys.displayhook, nothing for None, and bound to _. Only
that value: "1; 2" prints 2 where Python's prompt prints 1 and 2, and the
expressions inside a block print nothing ("for i in range(3): i" prints
0, 1 and 2 there).

Code that ignores the interrupt is killed after a grace period (and code
that calls os._exit ends its interpreter); the session then starts a fresh
interpreter, with ` + "`context`" + ` set again and every other
variable gone.

Lines can also be piped in: the prompts are then not shown.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.sandbox.validate(); err != nil {
				return err
			}
			if o.sandbox.contextFromStdin() {
				return usageErrorf("repl reads its input from standard input, so the context cannot come from it: use --context-file PATH")
			}
			if runF != nil {
				return runF(o)
			}
			return runRepl(cmd.Context(), ios, o)
		},
	}
	o.sandbox.addFlags(cmd.Flags(), 0)
	return cmd
}

// repl is a running session.
type repl struct {
	ios   *iostreams
	sb    supervisor.Sandbox
	value any            // the context, set again after a restart
	sigs  chan os.Signal // Ctrl-C
}

func runRepl(parent context.Context, ios *iostreams, o *replOptions) error {
	// Ctrl-C belongs to the session once it runs; SIGTERM ends it.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt)
	defer signal.Stop(sigs)
	ctx, stop := signalContext(parent, syscall.SIGTERM)
	defer stop()

	value, err := o.sandbox.contextValue(ios.In)
	if err != nil {
		return err
	}
	cfg := o.sandbox.config(newLogger(ios.ErrOut, o.global.verbose))
	cfg.Stdout, cfg.Stderr = ios.Out, ios.ErrOut
	startCtx, stopStart := interruptContext(ctx)
	sb, err := supervisor.New(startCtx, cfg)
	if err == nil {
		defer sb.Destroy()
		err = sb.Initialize(startCtx, value)
	}
	stopStart()
	if err != nil {
		return orInterrupted(startCtx, err)
	}
	for len(sigs) > 0 { // a Ctrl-C during start-up is not one for the session
		<-sigs
	}
	r := &repl{ios: ios, sb: sb, value: value, sigs: sigs}
	if ios.inTTY {
		info := sb.Info()
		mode := "in-process"
		if info.Worker {
			mode = fmt.Sprintf("worker pid %d", info.PID)
		}
		fmt.Fprintf(ios.ErrOut, "rlm-sandbox repl: Python %s (Pyodide %s, %s)\nCtrl-C interrupts, Ctrl-D exits; the input is the variable `context`.\n",
			info.PythonVersion, info.PyodideVersion, mode)
	}
	return r.loop(ctx)
}

// errEndSession: exit() was called, with a status of 0.
var errEndSession = errors.New("session ended")

// input is a line read from standard input, or the end of it.
type input struct {
	line string
	eof  bool
	err  error
}

func (r *repl) loop(ctx context.Context) error {
	lines := make(chan input)
	go readLines(r.ios.In, lines)
	var block []string
	for {
		if r.ios.inTTY {
			prompt := ">>> "
			if len(block) > 0 {
				prompt = "... "
			}
			io.WriteString(r.ios.ErrOut, prompt)
		}
		var in input
		select {
		case <-ctx.Done():
			return interruption(ctx)
		case <-r.sigs:
			io.WriteString(r.ios.ErrOut, "\nKeyboardInterrupt\n")
			block = nil
			continue
		case in = <-lines:
		}
		if in.err != nil {
			return fmt.Errorf("read standard input: %w", in.err)
		}
		if in.eof {
			if r.ios.inTTY {
				io.WriteString(r.ios.ErrOut, "\n")
			}
			if len(block) > 0 {
				if err := r.run(ctx, strings.Join(block, "\n")+"\n"); err != nil && err != errEndSession {
					return err
				}
			}
			return nil
		}
		if len(block) == 0 && strings.TrimSpace(in.line) == "" {
			continue
		}
		block = append(block, in.line)
		// Joined without a final newline, as code.InteractiveConsole does:
		// a block is complete only once an empty line follows it.
		src := strings.Join(block, "\n")
		complete, err := r.sb.IsComplete(ctx, src)
		if err != nil {
			if err = r.restartIfDead(ctx, err); err != nil {
				return err
			}
			complete, err = r.sb.IsComplete(ctx, src)
			if err != nil {
				return err
			}
		}
		if !complete {
			continue
		}
		block = nil
		switch err := r.run(ctx, src+"\n"); err {
		case nil:
		case errEndSession:
			return nil
		default:
			return err
		}
	}
}

// readLines sends each line of r, then its end.
func readLines(r io.Reader, out chan<- input) {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			out <- input{line: strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")}
		}
		if err == io.EOF {
			out <- input{eof: true}
			return
		}
		if err != nil {
			out <- input{err: err}
			return
		}
	}
}

// run executes one block, interrupting it at Ctrl-C. Only errors that end
// the session are returned.
func (r *repl) run(ctx context.Context, src string) error {
	type result struct {
		ce  *supervisor.CodeExecution
		err error
	}
	done := make(chan result, 1)
	go func() {
		ce, err := r.sb.ExecuteInteractive(ctx, src)
		done <- result{ce, err}
	}()
	var res result
wait:
	for {
		select {
		case <-r.sigs:
			r.sb.Cancel()
		case res = <-done:
			break wait
		}
	}
	// exit() and sys.exit() end the session with CPython's status.
	if status, exitText, ok := systemExit(res.ce); ok && res.err == nil {
		io.WriteString(r.ios.ErrOut, exitText)
		if status != 0 {
			return exitStatus(status)
		}
		return errEndSession
	}
	if ce := res.ce; ce != nil {
		switch {
		case ce.Traceback != "":
			io.WriteString(r.ios.ErrOut, withNewline(ce.Traceback))
		case errorKind(res.err) == kindCanceled:
			// A Ctrl-C that the code caught (it returned without an
			// exception): CPython's prompt prints nothing either.
		case res.err != nil && ce.ErrorType != "":
			fmt.Fprintln(r.ios.ErrOut, ce.ErrorType)
		}
	}
	switch kind := errorKind(res.err); {
	case res.err == nil:
		return nil
	case kind == kindTimeout:
		flag := "--timeout"
		if wallTimeout(res.err) {
			flag = "--wall-timeout"
		}
		fmt.Fprintln(r.ios.ErrOut, "rlm-sandbox: interrupted: the code ran longer than "+flag)
	case kind == kindCanceled:
		if ctx.Err() != nil {
			return interruption(ctx)
		}
	case kind == kindDead || kind == kindWorkerExited:
		return r.restartIfDead(ctx, res.err)
	default:
		return res.err
	}
	// The interpreter is killed when the code ignores the interrupt: find
	// out now rather than at the next line.
	if _, err := r.sb.IsComplete(ctx, ""); err != nil {
		return r.restartIfDead(ctx, err)
	}
	return nil
}

// restartIfDead gives the session a fresh interpreter when err says the
// old one is gone, and returns the errors it cannot recover from.
func (r *repl) restartIfDead(ctx context.Context, err error) error {
	if k := errorKind(err); k != kindDead && k != kindWorkerExited {
		return err
	}
	fmt.Fprintf(r.ios.ErrOut, "rlm-sandbox: %s\nrlm-sandbox: starting a fresh interpreter: `context` is set again, every other variable is gone\n", deadMessage(err))
	if err := r.sb.Restart(ctx); err != nil {
		return err
	}
	return r.sb.Initialize(ctx, r.value)
}
