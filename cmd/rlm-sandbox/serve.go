package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// serveOptions are serve's flags.
type serveOptions struct {
	global *globalOptions
	stdio  bool
}

func newServeCmd(ios *iostreams, g *globalOptions, runF func(*serveOptions) error) *cobra.Command {
	o := &serveOptions{global: g}
	cmd := &cobra.Command{
		Use:   "serve --stdio",
		Short: "Serve sandboxes over JSON-RPC 2.0 on standard input and output",
		Long: `Lets a program in any language create and drive sandboxes: JSON-RPC 2.0,
one message per line, requests on standard input and responses on standard
output. Methods: create, execute, get_variable, set_variable, cancel,
destroy, restart, stats, version. llm_query and rlm_query in the code
become requests from the server that the client answers; output can stream
as "output" notifications. Several sandboxes run concurrently; requests
for one sandbox are served in the order they arrive.

When standard input ends, the server answers the requests it has read,
destroys every sandbox and exits. docs/serve.md describes the protocol,
with a complete example session. Logs go to standard error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !o.stdio {
				return usageErrorf("serve needs a transport: --stdio (the only one so far)")
			}
			if runF != nil {
				return runF(o)
			}
			return runServe(cmd.Context(), ios, o)
		},
	}
	cmd.Flags().BoolVar(&o.stdio, "stdio", false, "speak JSON-RPC on standard input and output")
	return cmd
}

// errClientGone: the client closed the server's standard output.
var errClientGone = errors.New("the client stopped reading standard output")

func runServe(parent context.Context, ios *iostreams, o *serveOptions) error {
	ctx, stop := interruptContext(parent)
	defer stop()
	// A client that goes away makes writes fail with EPIPE (instead of
	// killing the process), so the sandboxes are destroyed on the way out.
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	defer signal.Stop(pipe)

	s := newServer(ctx, ios.Out, newLogger(ios.ErrOut, o.global.verbose))
	watchReaderGone(ios.Out, func() { s.cancel(errClientGone) })
	read := make(chan error, 1)
	go func() { read <- s.readLoop(ios.In) }()
	var err error
	select {
	case err = <-read:
		s.endOfInput()
		s.drain()
	case <-s.ctx.Done():
	}
	s.destroyAll()
	if cause := context.Cause(s.ctx); cause != nil && err == nil {
		err = cause
	}
	return err
}
