package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/rlm-sandbox/rlm-sandbox/ipc"
	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// execOptions are exec's flags and arguments.
type execOptions struct {
	sandbox   sandboxOptions
	global    *globalOptions
	codeFlags []codeArg    // -c, with where each stood among the arguments
	sources   []codeSource // the code blocks, in command-line order
	json      bool
	maxOutput int
}

// codeSource is one block of code: given with -c, or in a file ("-":
// standard input).
type codeSource struct {
	name string // for messages: "-c", a path, or "<stdin>"
	code string // for -c
	path string // for a file; "-" is standard input
}

func newExecCmd(ios *iostreams, g *globalOptions, runF func(*execOptions) error) *cobra.Command {
	o := &execOptions{global: g}
	cmd := &cobra.Command{
		Use:   "exec [flags] [FILE.py | -]...",
		Short: "Run Python code in a fresh sandbox and print its output",
		Long: `Runs Python code in a fresh sandbox. The code comes from -c CODE, from
files, or from standard input ("-", or nothing given and stdin not a
terminal). Several -c and files run one after another, in the order given,
in the same sandbox; the first that raises an exception stops the run.
Files and standard input are read as CPython reads a script: UTF-8, a
byte order mark dropped, or the coding a PEP 263 declaration names
(Latin-1 and ASCII besides UTF-8); code that does not decode is a
SyntaxError, and then none of the code runs.

Python's stdout and stderr stream to this command's stdout and stderr as
they are written; an exception prints its traceback to stderr. Python's
stdin is empty (input() raises EOFError): pipe data in as the context,
with --context-file -. The code may run up to 1 MiB ahead of a slow
reader of this command's output; past that it waits for the reader, and
that wait counts against --timeout, as the time of a native script
blocked on its output would (so "exec big.py | less" times out while
less is not read). After a timeout or Ctrl-C, the output past that 1 MiB
is not shown, and that 1 MiB only as far as the reader takes it within
2 s (the grace period interrupted code has). With --json,
each block prints instead one JSON object (one line) with its stdout,
stderr, error ("Type: message" or null), error_type, traceback,
duration_ms, python_duration_ms, bridge_calls, timed_out and truncated.
A block that called os._exit has error_type "ProcessExit", and one whose
sandbox failed without a Python exception (its worker was killed, say)
"SandboxError". When none of the code runs, one record still says why:
a block whose code does not decode has error_type "SyntaxError" (its
error ends with the block's name, as in "(<cell-2>)"), and a sandbox
that fails to start "SandboxError".

exit() and sys.exit() end the run as they end a Python script, with the
status CPython gives: none, None, 0 or False exit 0, an int exits with it,
anything else is printed on stderr and exits 1 (the value is seen through
its str(): sys.exit("4") exits 4). os._exit(N) ends the run with status N.

llm_query(prompt) and rlm_query(task, ctx) in the code are answered by the
shell commands of --llm-cmd and --rlm-cmd; without them they raise
BridgeError. The answer is what the command printed by the time it exited
(children it left running are killed), at most 64 MiB (less 1 KiB): past
that the command is killed and the call raises BridgeError.

Exit status: 0 success, 1 the code raised an exception, 2 usage error,
3 the sandbox failed (or the output could not be written), 124 timeout
(--timeout or --wall-timeout), 130 interrupted by Ctrl-C (the first
interrupts the code, a second ends the command at once) or the code
raised KeyboardInterrupt itself, as CPython exits, 143 ended by
SIGTERM (the code is interrupted first), N the code called sys.exit(N) or
os._exit(N); a reader that closes this command's output (| head -1) ends
it with SIGPIPE (141 in a shell).`,
		Example: `  rlm-sandbox exec -c 'print(6*7)'
  rlm-sandbox exec script.py --context-file big.txt --timeout 10s
  seq 100 | rlm-sandbox exec --context-file - -c 'print(sum(map(int, context.split())))'
  rlm-sandbox exec --llm-cmd 'tr a-z A-Z' -c 'print(llm_query("hello"))'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.sources = mergeSources(o.codeFlags, args)
			if err := o.validate(ios); err != nil {
				return err
			}
			if runF != nil {
				return runF(o)
			}
			return runExec(cmd.Context(), ios, o)
		},
	}
	fs := cmd.Flags()
	fs.VarP(&codeFlag{fs: fs, list: &o.codeFlags}, "code", "c", "Python `CODE` to run (repeatable)")
	fs.BoolVar(&o.json, "json", false, "print one JSON object per code block instead of streaming the output")
	fs.IntVar(&o.maxOutput, "max-output", 0, "cap each block's stdout and stderr at `N` characters, keeping head and tail\n"+
		"(output is then printed when the block ends; default: no cap, or 50000 with --json)")
	o.sandbox.addFlags(fs, supervisor.DefaultTimeout)
	return cmd
}

func (o *execOptions) validate(ios *iostreams) error {
	if err := o.sandbox.validate(); err != nil {
		return err
	}
	if len(o.sources) == 0 {
		if ios.inTTY {
			return usageErrorf("no code to run: give -c CODE, a file, or pipe code on stdin (for an interactive session run `rlm-sandbox repl`)")
		}
		o.sources = []codeSource{{name: "<stdin>", path: "-"}}
	}
	stdin := 0
	for _, s := range o.sources {
		if s.path == "-" {
			stdin++
		}
	}
	switch {
	case stdin > 1:
		return usageErrorf(`"-" (code from standard input) can be given once`)
	case stdin == 1 && o.sandbox.contextFromStdin():
		return usageErrorf("the code is read from standard input, so the context cannot be: give the code with -c or a file")
	case o.maxOutput < 0:
		return usageErrorf("--max-output must be 0 (the default) or more, not %d", o.maxOutput)
	}
	return nil
}

// readSources returns the code of each block; the files are read before
// any sandbox starts, so a wrong path fails fast. Files and standard input
// are decoded as CPython decodes a script (see decodeSource). When err is
// not nil, failed is the index of the block whose code could not be read.
func (o *execOptions) readSources(stdin io.Reader) (codes []string, failed int, err error) {
	codes = make([]string, len(o.sources))
	for i, s := range o.sources {
		switch s.path {
		case "":
			codes[i] = s.code
		case "-":
			b, err := readExact(stdin, maxCode)
			if errors.Is(err, errTooLong) {
				return nil, i, usageErrorf("the code on standard input is longer than a sandbox takes (%d MiB)", maxCode>>20)
			}
			if err != nil {
				return nil, i, fmt.Errorf("read code from standard input: %w", err)
			}
			if codes[i], err = decodeSource(s.name, b); err != nil {
				return nil, i, err
			}
		default:
			b, err := readFile(s.path, maxCode)
			if errors.Is(err, errTooLong) {
				return nil, i, usageErrorf("%s is longer than a sandbox takes (%d MiB)", s.path, maxCode>>20)
			}
			if err != nil {
				return nil, i, usageErrorf("%v", err)
			}
			if codes[i], err = decodeSource(s.name, b); err != nil {
				return nil, i, err
			}
		}
	}
	return codes, 0, nil
}

func runExec(parent context.Context, ios *iostreams, o *execOptions) error {
	// Output that could not be written (a full disk, a file size limit)
	// fails the command, as a lost line of a script's output would, and
	// stops the code at once (it ran on to its time limit, which then
	// hid the cause), as CPython's first failed print does.
	ctx, stop := context.WithCancelCause(parent)
	defer stop(nil)
	checked := *ios
	out := &checkedWriter{w: ios.Out, failed: func(error) { stop(errOutputLost) }}
	errOut := &checkedWriter{w: ios.ErrOut, failed: func(error) { stop(errOutputLost) }}
	checked.Out, checked.ErrOut = out, errOut
	err := runBlocks(ctx, &checked, o)
	var sig *signalError
	if err == nil || !errors.As(err, &sig) {
		if werr := out.failure(); werr != nil {
			return fmt.Errorf("write standard output: %w", werr)
		}
		if werr := errOut.failure(); werr != nil {
			return fmt.Errorf("write standard error: %w", werr)
		}
	}
	return err
}

// maxCode bounds what exec reads as one block's code: a worker takes at
// most a frame's worth (64 MiB), and /dev/zero has no end.
const maxCode = ipc.MaxFrameSize

// errOutputLost is the cause of the context of blocks stopped because
// their output could not be written.
var errOutputLost = errors.New("the output could not be written")

// checkedWriter is a writer that remembers its first failure, and calls
// failed with it.
type checkedWriter struct {
	w      io.Writer
	failed func(error)
	mu     sync.Mutex
	err    error
}

func (c *checkedWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if err != nil {
		c.mu.Lock()
		first := c.err == nil
		if first {
			c.err = err
		}
		c.mu.Unlock()
		if first && c.failed != nil {
			c.failed(err)
		}
	}
	return n, err
}

func (c *checkedWriter) failure() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// runBlocks runs the blocks of exec.
func runBlocks(parent context.Context, ios *iostreams, o *execOptions) error {
	enc := json.NewEncoder(ios.Out)
	enc.SetEscapeHTML(false)
	// Inputs are read first, while Ctrl-C still ends the command at once.
	codes, failed, err := o.readSources(ios.In)
	var bad *sourceError
	if errors.As(err, &bad) {
		// As CPython does, before any of the code runs. With --json the
		// record says it, as it says the exceptions of code that ran.
		if o.json {
			if err := enc.Encode(undecodedRecord(failed, bad)); err != nil {
				return err
			}
			return errPython
		}
		fmt.Fprintln(ios.ErrOut, "rlm-sandbox:", bad)
		return errPython
	}
	if err != nil {
		return err
	}
	value, err := o.sandbox.contextValue(ios.In)
	if err != nil {
		return err
	}
	ctx, stop := interruptContext(parent)
	defer stop()
	cfg := o.sandbox.config(newLogger(ios.ErrOut, o.global.verbose))
	streaming := !o.json && o.maxOutput == 0
	if streaming {
		cfg.Stdout, cfg.Stderr = ios.Out, ios.ErrOut
	} else {
		cfg.MaxOutputLength = o.maxOutput
	}
	sb, err := supervisor.New(ctx, cfg)
	if err == nil {
		defer sb.Destroy()
		err = sb.Initialize(ctx, value)
	}
	if err != nil {
		// No block ran: with --json one record says why, and the error
		// goes to stderr as a failed block's does.
		if o.json {
			if err := enc.Encode(sandboxFailedRecord(err)); err != nil {
				return err
			}
		}
		return orInterrupted(ctx, err)
	}
	for i, code := range codes {
		ce, err := sb.Execute(ctx, code)
		if ce == nil && err != nil && o.json {
			// The block did not start (its sandbox was gone already, say):
			// its record is a SandboxError all the same.
			ce = &supervisor.CodeExecution{Code: code}
		}
		// exit() and sys.exit() end the run, as in a Python script, with
		// the status CPython would give; so does os._exit, which also ends
		// the interpreter.
		status, exitText, exited := systemExit(ce)
		exited = exited && err == nil
		osStatus, osExited := processExit(err)
		if ce != nil {
			switch {
			case o.json:
				r := executionResult(ce, err)
				switch {
				case osExited:
					r.Error = nullable(processExitType + ": " + processExitMessage(osStatus))
					r.ErrorType = nullable(processExitType)
				case err != nil && r.Error == nil:
					// The sandbox failed (a killed worker, say): not a success.
					r.Error = nullable(sandboxErrorType + ": " + err.Error())
					r.ErrorType = nullable(sandboxErrorType)
				}
				if err := enc.Encode(r); err != nil {
					return err
				}
			case !streaming:
				io.WriteString(ios.Out, ce.Stdout)
				io.WriteString(ios.ErrOut, ce.Stderr)
			}
			// Not the KeyboardInterrupt of code stopped because its output
			// could not be written: the command says why.
			if ce.Traceback != "" && !o.json && !exited && context.Cause(parent) != errOutputLost {
				io.WriteString(ios.ErrOut, withNewline(ce.Traceback))
			}
		}
		switch {
		case osExited:
			if osStatus&0xff != 0 && !o.json {
				fmt.Fprintf(ios.ErrOut, "rlm-sandbox: %s: %s\n", o.sources[i].name, processExitMessage(osStatus))
			}
			return exitStatus(osStatus & 0xff)
		case err != nil:
			return fmt.Errorf("%s: %w", o.sources[i].name, orInterrupted(ctx, err))
		case exited:
			if !o.json {
				io.WriteString(ios.ErrOut, exitText)
			}
			return exitStatus(status)
		case ce.ErrorType == "KeyboardInterrupt":
			// The code raised it itself (an interrupt of the run's is err):
			// CPython exits 130 then, as if interrupted.
			return exitStatus(exitInterrupted)
		case ce.Error != "":
			if ce.ErrorType == "EOFError" && !o.json {
				// input() or sys.stdin: a pipe into this command does not reach them.
				fmt.Fprintln(ios.ErrOut, "hint: Python's standard input is empty in the sandbox; pass data in as the context (--context-file FILE, or - for this command's standard input)")
			}
			return errPython
		}
	}
	return nil
}

// undecodedRecord is the --json record of block i, whose code does not
// decode: the SyntaxError CPython raises for it, as CPython renders a
// SyntaxError that names its file (here the block's, <cell-N>, the name
// tracebacks give it) but no line.
func undecodedRecord(i int, bad *sourceError) *execution {
	msg := fmt.Sprintf("SyntaxError: %s (<cell-%d>)", bad.msg, i+1)
	return &execution{
		Error:     nullable(msg),
		ErrorType: nullable("SyntaxError"),
		Traceback: nullable(msg + "\n"),
	}
}

// sandboxFailedRecord is the --json record of a run whose sandbox failed
// to start (or to take the context), so that no block ran.
func sandboxFailedRecord(err error) *execution {
	return &execution{
		Error:     nullable(sandboxErrorType + ": " + err.Error()),
		ErrorType: nullable(sandboxErrorType),
		TimedOut:  errors.Is(err, supervisor.ErrTimeout),
	}
}

// orInterrupted returns the signal that cancelled ctx, if one did, else err.
func orInterrupted(ctx context.Context, err error) error {
	if sig := interruption(ctx); sig != nil {
		return sig
	}
	return err
}

func withNewline(s string) string {
	if strings.HasSuffix(s, "\n") {
		return s
	}
	return s + "\n"
}

// codeArg is a -c flag and the number of arguments before it.
type codeArg struct {
	pos  int
	code string
}

// codeFlag collects -c values, noting for each how many positional
// arguments pflag had seen when it parsed it, so that -c and files run in
// the order they were given.
type codeFlag struct {
	fs   *pflag.FlagSet
	list *[]codeArg
}

func (f *codeFlag) String() string { return "" }
func (f *codeFlag) Type() string   { return "CODE" }
func (f *codeFlag) Set(s string) error {
	*f.list = append(*f.list, codeArg{pos: len(f.fs.Args()), code: s})
	return nil
}

// mergeSources interleaves the -c blocks with the file arguments.
func mergeSources(codes []codeArg, args []string) []codeSource {
	var out []codeSource
	name := func(c int) string {
		if len(codes) == 1 {
			return "-c"
		}
		return fmt.Sprintf("-c #%d", c+1)
	}
	c := 0
	for i := 0; i <= len(args); i++ {
		for ; c < len(codes) && codes[c].pos <= i; c++ {
			out = append(out, codeSource{name: name(c), code: codes[c].code})
		}
		if i < len(args) {
			s := codeSource{name: args[i], path: args[i]}
			if s.path == "-" {
				s.name = "<stdin>"
			}
			out = append(out, s)
		}
	}
	return out
}
