package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
	"github.com/spf13/cobra"
)

type execOptions struct {
	code        string
	contextText string
	contextFile string
	timeout     time.Duration
	direct      bool
}

func newExecCmd() *cobra.Command {
	var o execOptions
	cmd := &cobra.Command{
		Use:   "exec [file.py | -]",
		Short: "Run Python code and print its output",
		Long: `Runs Python code in a fresh sandbox. The code comes from -c, from a file,
or from standard input ("-" or no argument). Its stdout and stderr stream to
this command's stdout and stderr; an exception prints its traceback to stderr
and exits with status 1.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			code := o.code
			if code == "" {
				var err error
				if code, err = readSource(cmd.InOrStdin(), args); err != nil {
					return err
				}
			} else if len(args) > 0 {
				return fmt.Errorf("%w: give code with -c or as a file, not both", errUsage)
			}
			text := o.contextText
			if o.contextFile != "" {
				if o.contextText != "" {
					return fmt.Errorf("%w: give --context or --context-file, not both", errUsage)
				}
				b, err := os.ReadFile(o.contextFile)
				if err != nil {
					return err
				}
				text = string(b)
			}
			return runExec(cmd, o, code, text)
		},
	}
	cmd.Flags().StringVarP(&o.code, "code", "c", "", "Python code to run")
	cmd.Flags().StringVar(&o.contextText, "context", "", "text of the Python variable `context`")
	cmd.Flags().StringVar(&o.contextFile, "context-file", "", "file whose text becomes the Python variable `context`")
	cmd.Flags().DurationVar(&o.timeout, "timeout", supervisor.DefaultTimeout, "interrupt the code after this long")
	cmd.Flags().BoolVar(&o.direct, "direct", false, "run the interpreter in this process instead of an rlm-worker")
	return cmd
}

func readSource(stdin io.Reader, args []string) (string, error) {
	if len(args) == 0 || args[0] == "-" {
		b, err := io.ReadAll(stdin)
		return string(b), err
	}
	b, err := os.ReadFile(args[0])
	return string(b), err
}

func runExec(cmd *cobra.Command, o execOptions, code, text string) error {
	ctx := cmd.Context()
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	cfg := supervisor.Config{
		Timeout:         o.timeout,
		MaxOutputLength: -1,
		OnStdout:        func(l string) { fmt.Fprintln(out, l) },
		OnStderr:        func(l string) { fmt.Fprintln(errOut, l) },
	}
	if o.direct {
		cfg.UseWorker = supervisor.WorkerNever
	}
	sb, err := supervisor.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer sb.Destroy()
	if err := sb.Initialize(ctx, text); err != nil {
		return err
	}
	ce, err := sb.Execute(ctx, code)
	if err != nil {
		return err
	}
	if ce.Error != "" {
		fmt.Fprint(errOut, ce.Traceback)
		return errPython
	}
	return nil
}
