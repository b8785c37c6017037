package main

import (
	"context"
	"errors"

	"github.com/spf13/cobra"
)

// globalOptions are the flags every command has.
type globalOptions struct {
	verbose bool
}

// run executes the command line args and returns the exit status. Errors
// are printed here, once; cobra's own error and usage printing is off.
func run(args []string, ios *iostreams) int {
	var g globalOptions
	started := false // set once flags and arguments have been accepted
	root := &cobra.Command{
		Use:   "rlm-sandbox",
		Short: "Run LLM-written Python in a sandbox (real CPython on WebAssembly)",
		Long: `rlm-sandbox runs Python for Recursive Language Model agents in a sandbox:
real CPython (Pyodide) on WebAssembly, one rlm-worker process per sandbox,
no network and no access to the host's files. The agent's input is the
Python variable ` + "`context`" + `.

Exit status: 0 success, 1 the Python code raised an exception, 2 usage
error, 3 the sandbox failed (Pyodide missing, worker crashed...), 124
timeout, 130 interrupted (SIGINT, Ctrl-C), 143 terminated (SIGTERM), N the
code called sys.exit(N) or os._exit(N).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(*cobra.Command, []string) {
			started = true
		},
	}
	root.PersistentFlags().BoolVarP(&g.verbose, "verbose", "v", false, "log what the sandboxes do, on stderr")
	root.SetArgs(args)
	root.SetIn(ios.In)
	root.SetOut(ios.Out)
	root.SetErr(ios.ErrOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErrorf("%v", err) })
	root.CompletionOptions.HiddenDefaultCmd = true
	root.AddCommand(
		newExecCmd(ios, &g, nil),
		newReplCmd(ios, &g, nil),
		newServeCmd(ios, &g, nil),
		newPrepareCmd(ios, nil),
		newVersionCmd(ios, nil),
	)
	cmd, err := root.ExecuteContextC(context.Background())
	if err != nil && !started && !errors.Is(err, errUsage) {
		err = usageErrorf("%v", err) // an unknown command, or bad arguments
	}
	if err != nil {
		reportError(ios.ErrOut, err, cmd.CommandPath())
	}
	return exitCode(err)
}
