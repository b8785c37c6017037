package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// serveOptions are serve's flags.
type serveOptions struct {
	global        *globalOptions
	stdio         bool
	requireWorker bool // a create without "direct" needs an rlm-worker

	// serve --listen
	listen         string
	tokenFile      string
	insecureNoAuth bool
	tlsCert        string
	tlsKey         string
	clientCA       string
	maxMessage     byteSize
	maxOutputLimit int
	maxInflight    int
	maxConns       int
	maxSandboxes   int
	maxPerConn     int
	memoryBudget   byteSize
	pool           int
	metricsListen  string
	drainTimeout   time.Duration
	logFormat      string
}

func newServeCmd(ios *iostreams, g *globalOptions, runF func(*serveOptions) error) *cobra.Command {
	o := &serveOptions{global: g}
	cmd := &cobra.Command{
		Use:   "serve (--stdio | --listen ADDR)",
		Short: "Serve sandboxes over JSON-RPC 2.0 on standard input and output, or on a socket",
		Long: `Lets a program in any language create and drive sandboxes: JSON-RPC 2.0,
one message per line, requests on standard input and responses on standard
output. Methods: create, execute, get_variable, set_variable, cancel,
destroy, restart, stats, version. llm_query and rlm_query in the code
become requests from the server that the client answers; output can stream
as "output" notifications. Several sandboxes run concurrently; requests
for one sandbox are served in the order they arrive.

A sandbox runs in an rlm-worker process, locked down. A create that does
not say "direct" runs in-process when no worker can start (its result
says "worker": false, and a warning is logged); with --require-worker it
fails instead, as a create with "direct": false always does.

When standard input ends, the server answers the requests it has read,
destroys every sandbox and exits. docs/serve.md describes the protocol,
with a complete example session. Logs go to standard error.

With --listen unix:PATH or HOST:PORT the server takes many clients, each
connection a session with the same protocol and its own sandboxes, which
end with the connection. TCP needs --token-file (or --client-ca) unless
--insecure-no-auth is given; the first message then must be
"authenticate". SIGTERM drains: no new work, running executes finish
(up to --drain-timeout; what still runs then gets the shutdown error),
then every sandbox is destroyed and the server exits 0. --require-worker
is recommended there. docs/serve.md, "The network server", has the
details.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.stdio == (o.listen != "") {
				return usageErrorf("serve needs one transport: --stdio or --listen ADDR")
			}
			if o.stdio {
				var only []string
				cmd.Flags().Visit(func(f *pflag.Flag) {
					if f.Name != "stdio" && f.Name != "verbose" && f.Name != "require-worker" {
						only = append(only, "--"+f.Name)
					}
				})
				if len(only) > 0 {
					return usageErrorf("%s: only with --listen", strings.Join(only, ", "))
				}
			}
			if runF != nil {
				return runF(o)
			}
			if o.listen != "" {
				return runListen(cmd.Context(), ios, o)
			}
			return runServe(cmd.Context(), ios, o)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.stdio, "stdio", false, "speak JSON-RPC on standard input and output")
	f.BoolVar(&o.requireWorker, "require-worker", false, `run every sandbox in an rlm-worker: a create fails when none can start, instead of running in-process, and one with "direct": true is refused`)
	f.StringVar(&o.listen, "listen", "", "serve clients on `ADDR`: unix:PATH (a socket of mode 0600) or HOST:PORT")
	f.StringVar(&o.tokenFile, "token-file", "", "`FILE` holding the bearer token clients must authenticate with")
	f.BoolVar(&o.insecureNoAuth, "insecure-no-auth", false, "allow TCP clients without a token or client certificate")
	f.StringVar(&o.tlsCert, "tls-cert", "", "serve TLS with this certificate `FILE` (PEM)")
	f.StringVar(&o.tlsKey, "tls-key", "", "the TLS private key `FILE` (PEM)")
	f.StringVar(&o.clientCA, "client-ca", "", "require client certificates signed by the CA in `FILE` (mutual TLS)")
	o.maxMessage = 64 << 20
	f.Var(&o.maxMessage, "max-message", "longest message a client may send (bytes; K, M, G suffixes)")
	f.IntVar(&o.maxOutputLimit, "max-output-limit", 0, "the largest max_output a create may ask for, in characters; no cap (negative) is refused too (0: no limit)")
	f.IntVar(&o.maxInflight, "max-inflight", 256, "requests per connection read and not yet answered (0: no limit)")
	f.IntVar(&o.maxConns, "max-connections", 0, "authenticated connections at once, and as many waiting to authenticate; more are answered busy (0: no limit)")
	f.IntVar(&o.maxSandboxes, "max-sandboxes", 0, "sandboxes at once in all connections (0: no limit)")
	f.IntVar(&o.maxPerConn, "max-sandboxes-per-connection", 0, "sandboxes at once in one connection (0: no limit)")
	f.Var(&o.memoryBudget, "memory-budget", "total worker RSS to admit new sandboxes under (bytes; K, M, G suffixes; 0: none)")
	f.IntVar(&o.pool, "pool", 0, "warm sandboxes to keep started for creates with default settings")
	f.StringVar(&o.metricsListen, "metrics-listen", "", "serve /metrics, /healthz and /readyz over HTTP on `HOST:PORT`")
	f.DurationVar(&o.drainTimeout, "drain-timeout", 30*time.Second, "on SIGTERM, how long running requests may take before everything is destroyed")
	f.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	return cmd
}

// shutdownWriteTimeout bounds the writing of the shutdown errors when the
// server stops at once: a client that does not read holds it no longer.
const shutdownWriteTimeout = 2 * time.Second

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
	s.requireWorker = o.requireWorker
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
	// Stopped at once (a signal): what is still running or queued fails.
	s.endOpen(shutdownError(), shutdownWriteTimeout)
	s.destroyAll()
	if cause := context.Cause(s.ctx); cause != nil && err == nil {
		err = cause
	}
	return err
}
