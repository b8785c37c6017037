package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
	"github.com/spf13/cobra"
)

// Exit codes.
const (
	exitOK       = 0
	exitPython   = 1 // the code raised an exception
	exitUsage    = 2
	exitTimeout  = 3
	exitCanceled = 4
	exitSandbox  = 5 // the sandbox could not run the code
)

// exitCode maps an error to the process exit status, in one place.
func exitCode(err error) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errPython):
		return exitPython
	case errors.Is(err, supervisor.ErrTimeout):
		return exitTimeout
	case errors.Is(err, supervisor.ErrCanceled):
		return exitCanceled
	case errors.Is(err, errUsage):
		return exitUsage
	}
	return exitSandbox
}

var (
	errPython = errors.New("python raised an exception")
	errUsage  = errors.New("usage")
)

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	root := &cobra.Command{
		Use:           "rlm-sandbox",
		Short:         "Run Python in a sandbox (real CPython on WebAssembly)",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newExecCmd(), newPrepareCmd())
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return fmt.Errorf("%w: %v", errUsage, err) })
	err := root.ExecuteContext(ctx)
	if err != nil && !errors.Is(err, errPython) {
		fmt.Fprintln(stderr, "rlm-sandbox:", err)
	}
	return exitCode(err)
}
