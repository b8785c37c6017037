package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/rlm-sandbox/rlm-sandbox/runtime"
	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
	"github.com/spf13/cobra"
)

// prepareOptions are prepare's flags.
type prepareOptions struct {
	indexURL []string
}

func newPrepareCmd(ios *iostreams, runF func(*prepareOptions) error) *cobra.Command {
	o := &prepareOptions{}
	cmd := &cobra.Command{
		Use:   "prepare",
		Short: "Do the one-time work ahead of use: check Pyodide, fill the caches (`make` runs it)",
		Long: `Does ahead of time the work the first sandbox of a machine would otherwise
do: loads Pyodide ` + runtime.PyodideVersion + ` and checks its files, compiles it to native code and
its standard library to bytecode (both cached on disk, see RLM_SANDBOX_CACHE),
then starts a sandbox and runs Python in it. Running it again is quick and
changes nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(o)
			}
			return runPrepare(cmd.Context(), ios, o)
		},
	}
	addIndexURLFlag(cmd.Flags(), &o.indexURL)
	return cmd
}

func runPrepare(parent context.Context, ios *iostreams, o *prepareOptions) error {
	ctx, stop := interruptContext(parent)
	defer stop()
	p := newProgress(ios.Out, ios.outTTY)
	rc := runtime.Config{Notice: p, IndexURL: o.indexURL}

	p.begin("Pyodide " + runtime.PyodideVersion + ": load, verify, compile to native code")
	prepared, err := runtime.StdlibPrepared(ctx, rc)
	p.end(err, "ready")
	if err != nil {
		return orInterrupted(ctx, err)
	}

	p.begin("standard library: compile to bytecode")
	path, err := runtime.PrepareStdlib(ctx, rc)
	result := "cached in " + path
	if prepared {
		result = "already cached in " + path
	}
	p.end(err, result)
	if err != nil {
		return orInterrupted(ctx, err)
	}

	p.begin("sandbox: start one and run Python")
	// The worker's notices (its own compile of Pyodide, without bounds
	// checks, on a fresh machine) show as the step's detail.
	result, err = trySandbox(ctx, o.indexURL, newLogger(p, false))
	p.end(err, result)
	return orInterrupted(ctx, err)
}

// trySandbox starts a sandbox the way exec does and runs a line of Python.
func trySandbox(ctx context.Context, indexURL []string, logger *slog.Logger) (string, error) {
	sb, err := supervisor.New(ctx, supervisor.Config{IndexURL: indexURL, Logger: logger})
	if err != nil {
		return "", err
	}
	defer sb.Destroy()
	if err := sb.Initialize(ctx, ""); err != nil {
		return "", err
	}
	ce, err := sb.Execute(ctx, "print(sum(range(10)))")
	if err != nil {
		return "", err
	}
	if ce.Stdout != "45\n" {
		return "", fmt.Errorf("print(sum(range(10))) printed %q %s", ce.Stdout, ce.Error)
	}
	info := sb.Info()
	if info.Worker {
		return fmt.Sprintf("Python %s in rlm-worker, pid %d", info.PythonVersion, info.PID), nil
	}
	return fmt.Sprintf("Python %s in-process: %s", info.PythonVersion, info.Reason), nil
}
