package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
)

// runListen is serve --listen: every connection is a session of the
// --stdio protocol (plus authenticate), with its own sandboxes.
func runListen(parent context.Context, ios *iostreams, o *serveOptions) error {
	logger, err := newServeLogger(ios.ErrOut, o.logFormat, o.global.verbose)
	if err != nil {
		return err
	}
	token, err := readToken(o.tokenFile)
	if err != nil {
		return err
	}
	network, addr, err := parseListenAddr(o.listen)
	if err != nil {
		return err
	}
	isUnix := network == "unix"
	if o.maxOutputLimit != 0 && o.maxOutputLimit < supervisor.DefaultMaxOutputLength {
		return usageErrorf("--max-output-limit %d: at least %d (the max_output of a create that gives none), or 0 for no limit",
			o.maxOutputLimit, supervisor.DefaultMaxOutputLength)
	}
	if o.metricsListen != "" {
		if err := checkHostPort("--metrics-listen", o.metricsListen); err != nil {
			return err
		}
	}
	if !isUnix && token == nil && o.clientCA == "" && !o.insecureNoAuth {
		return usageErrorf("--listen %s is TCP: give --token-file (or --client-ca), or --insecure-no-auth to serve anyone who connects", o.listen)
	}
	tlsConf, err := serverTLS(o)
	if err != nil {
		return err
	}
	ln, err := listenOn(network, addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.listen, err)
	}
	if isUnix {
		defer os.Remove(addr)
	}
	if tlsConf != nil {
		ln = tls.NewListener(ln, tlsConf)
	}

	// SIGTERM or SIGINT drains; a second one ends everything at once.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(sigs)
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	defer signal.Stop(pipe)

	var metrics *serveMetrics
	if o.metricsListen != "" {
		metrics = newServeMetrics()
	}
	h := newHub(hubOptions{
		maxSandboxes: o.maxSandboxes, maxPerConn: o.maxPerConn, memoryBudget: uint64(o.memoryBudget),
		maxConns: o.maxConns, pool: o.pool, drainDeadline: o.drainTimeout, requireWorker: o.requireWorker,
	}, logger, metrics)
	defer h.close()
	if metrics != nil {
		mln, err := net.Listen("tcp", o.metricsListen)
		if err != nil {
			ln.Close()
			return fmt.Errorf("--metrics-listen %s: %w", o.metricsListen, err)
		}
		srv := &http.Server{Handler: metricsHandler(metrics, h), ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(mln)
		defer srv.Close()
		logger.Info("metrics", "addr", mln.Addr().String())
	}
	// Tests and scripts read the address from this line (port 0 picks one).
	logger.Info("listening", "addr", ln.Addr().String(), "tls", tlsConf != nil, "token", token != nil)

	var conns sync.WaitGroup
	accepting, stopAccepting := context.WithCancel(context.Background())
	defer stopAccepting()
	stopListening := func() {
		stopAccepting() // ends a pause between retries
		ln.Close()
	}
	accepted := make(chan error, 1)
	go func() {
		accepted <- acceptLoop(accepting, ln, h, logger, o, token, &conns)
	}()

	var hard bool
	var failed error
	select {
	case sig := <-sigs:
		h.drain.Store(true)
		stopListening()
		logger.Info("draining", "signal", sig.String(), "drain_timeout", o.drainTimeout)
		<-accepted
		hard = drain(h, sigs, o.drainTimeout, logger)
	case err := <-accepted:
		// Not one of the failures acceptLoop retries: no new client can
		// be served, so the server ends, with the sessions it has.
		failed = fmt.Errorf("accept connections on %s: %w", o.listen, err)
		logger.Error("accept failed: stopping", "err", err)
		stopListening()
		h.drain.Store(true)
		hard = true
	case <-parent.Done():
		stopListening()
		<-accepted
	}
	h.endOpen(shutdownError(), shutdownWriteTimeout)
	h.endSessions(errServerDrained)
	conns.Wait()
	logger.Info("stopped", "forced", hard)
	return failed
}

// drain refuses new work, then waits until the sessions have answered every
// request, timeout passes or a second signal comes. It reports whether it
// had to stop waiting.
func drain(h *hub, sigs <-chan os.Signal, timeout time.Duration, logger *slog.Logger) bool {
	h.drain.Store(true)
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		n := h.busyRequests()
		if n == 0 {
			return false
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			logger.Warn("drain timeout: destroying the sandboxes with requests still running", "requests", n)
			return true
		case sig := <-sigs:
			logger.Warn("second signal: destroying everything now", "signal", sig.String())
			return true
		}
	}
}

// Pauses between retries of a failed accept, as net/http's Server.Serve
// makes them: from the first, doubling up to the last.
const (
	acceptRetryFirst = 5 * time.Millisecond
	acceptRetryMax   = time.Second
)

// acceptLoop serves each connection on its own goroutine until ln is
// closed or ctx ends (then it returns nil), or accepting fails for good
// (then it returns the error). A failure that passes (temporaryAccept
// says which) is logged and retried after a pause, so that running out of
// file descriptors, say, refuses new clients for a while but does not end
// the server and its sessions.
func acceptLoop(ctx context.Context, ln net.Listener, h *hub, logger *slog.Logger, o *serveOptions, token []byte, conns *sync.WaitGroup) error {
	n := 0
	var pause time.Duration
	for {
		conn, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
				return nil
			}
			hint, temporary := temporaryAccept(err)
			if !temporary {
				return err
			}
			pause = min(max(2*pause, acceptRetryFirst), acceptRetryMax)
			logger.Warn("accept failed; retrying", "err", err, "in", pause, "hint", hint)
			t := time.NewTimer(pause)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil
			}
			continue
		}
		pause = 0
		n++
		s := newServer(h.ctx, conn, logger.With("conn", n, "remote", conn.RemoteAddr().String()))
		s.hub, s.token, s.requireWorker = h, token, o.requireWorker
		s.maxMessage, s.maxInflight, s.maxOutputLimit = int(o.maxMessage), o.maxInflight, o.maxOutputLimit
		// A connection counts toward --max-connections once it has
		// authenticated: with a token, by its first message; with only
		// --client-ca, by the TLS handshake; with neither, at once.
		certAuth := token == nil && o.clientCA != ""
		if err := h.addSession(s, token == nil && !certAuth); err != nil {
			// On its own goroutine: a TLS handshake could keep the accept loop waiting.
			go func() {
				s.logger.Warn("connection refused", "err", err)
				conn.SetDeadline(time.Now().Add(handshakeTimeout))
				s.send(errorResponse{"2.0", nullID, err.(*rpcError)})
				s.cancel(err)
				lingerClose(conn)
			}()
			continue
		}
		conns.Add(1)
		go func() {
			defer conns.Done()
			serveConn(s, conn, certAuth)
			// Logged once the session is gone from the hub (and from the
			// metrics): what follows the log line sees it gone.
			h.removeSession(s)
			s.logger.Info("disconnected", "cause", context.Cause(s.ctx).Error())
		}()
	}
}

// temporaryAccept reports whether a failed Accept may succeed later, and
// what an operator can do about it: the process or the system is out of
// file descriptors or memory, a connection went away before it was
// accepted, or a deadline passed.
func temporaryAccept(err error) (hint string, temporary bool) {
	switch {
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		return "out of file descriptors: raise the limit (ulimit -n, LimitNOFILE) or lower --max-connections", true
	case errors.Is(err, syscall.ENOBUFS), errors.Is(err, syscall.ENOMEM):
		return "out of memory", true
	case errors.Is(err, syscall.ECONNABORTED):
		return "the connection went away before it was accepted", true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timed out", true
	}
	return "", false
}

// handshakeTimeout bounds a TLS handshake and, with a token, the time from
// connecting to authenticating: a client that does neither does not hold
// one of the places of the connections waiting to authenticate for long.
const handshakeTimeout = 10 * time.Second

// serveConn runs one session until the client disconnects (or the server
// ends it): then every sandbox of the session is destroyed at once,
// running executes included. certAuth: the TLS handshake authenticates
// the client (--client-ca without a token), so the session counts toward
// --max-connections from then on. The caller removes the session from the
// hub.
func serveConn(s *server, conn net.Conn, certAuth bool) {
	s.logger.Info("connected")
	stop := context.AfterFunc(s.ctx, func() { conn.Close() })
	defer stop()
	var err error
	if tc, ok := conn.(*tls.Conn); ok {
		ctx, cancel := context.WithTimeout(s.ctx, handshakeTimeout)
		err = tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			s.logger.Warn("TLS handshake failed", "err", err)
		}
	}
	if err == nil && certAuth {
		if busy := s.hub.authenticated(s); busy != nil {
			s.send(errorResponse{"2.0", nullID, busy.(*rpcError)})
			err = errTooManyConns
		}
	}
	if err == nil && s.token != nil {
		conn.SetReadDeadline(time.Now().Add(handshakeTimeout))
		s.afterAuth = func() { conn.SetReadDeadline(time.Time{}) }
	}
	if err == nil {
		err = s.readLoop(conn)
	}
	switch {
	case errors.Is(err, errUnauthorized), errors.Is(err, errMessageTooLarge), errors.Is(err, errTooManyConns):
		s.logger.Warn("closing the connection", "err", err)
		lingerClose(conn)
	case err != nil && s.ctx.Err() == nil:
		s.logger.Info("read failed", "err", err)
	}
	s.endOfInput()
	if err == nil {
		err = errDisconnected
	}
	s.cancel(err)
	s.endOpen(nil, 0) // no one to answer
	s.destroyAll()
	conn.Close()
}

// lingerClose closes conn after the client has read what was written: it
// shuts down the writing side, reads what the client still sends (for a
// while) and closes. Closing at once could reset the connection before
// the client reads the error.
func lingerClose(conn net.Conn) {
	defer conn.Close()
	type closeWriter interface{ CloseWrite() error }
	if cw, ok := conn.(closeWriter); ok {
		cw.CloseWrite()
	}
	conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	io.Copy(io.Discard, conn)
}

// listenForms says what --listen accepts, for the errors about it.
const listenForms = "give unix:PATH (a Unix socket, created with mode 0600) or HOST:PORT (TCP: 127.0.0.1:7070, or :7070 for every address; port 0 picks a free one)"

// parseListenAddr splits --listen into a network ("unix" or "tcp") and an
// address. A value of neither form is a usage error. An abstract Unix
// socket (unix:@NAME) is refused: it has no file mode, so any process in
// the network namespace could connect to it.
func parseListenAddr(s string) (network, addr string, err error) {
	if p, ok := strings.CutPrefix(s, "unix:"); ok {
		switch {
		case p == "":
			return "", "", usageErrorf("--listen %q names no socket file; %s", s, listenForms)
		case p[0] == '@' || p[0] == 0:
			return "", "", usageErrorf("--listen %q: abstract Unix sockets are not supported (they have no file mode, so any local process could connect); %s", s, listenForms)
		}
		return "unix", p, nil
	}
	if err := checkHostPort("--listen", s); err != nil {
		return "", "", err
	}
	return "tcp", s, nil
}

// checkHostPort checks that the value of flag is HOST:PORT with a numeric
// port (HOST may be empty: every address).
func checkHostPort(flag, s string) error {
	forms := "give HOST:PORT (127.0.0.1:9090, or :9090 for every address)"
	if flag == "--listen" {
		forms = listenForms
	}
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		var ae *net.AddrError
		if errors.As(err, &ae) {
			err = errors.New(ae.Err) // without the address, which the message gives already
		}
		return usageErrorf("%s %q: %v; %s", flag, s, err, forms)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return usageErrorf("%s %q: the port must be a number from 0 to 65535; %s", flag, s, forms)
	}
	return nil
}

// listenOn listens; a Unix socket is created with mode 0600, replacing a
// stale socket file that no server answers on.
func listenOn(network, addr string) (net.Listener, error) {
	if network != "unix" {
		return net.Listen(network, addr)
	}
	if fi, err := os.Lstat(addr); err == nil && fi.Mode()&os.ModeSocket != 0 {
		if c, err := net.Dial("unix", addr); err == nil {
			c.Close()
			return nil, fmt.Errorf("another server listens on %s", addr)
		}
		os.Remove(addr)
	}
	old := syscall.Umask(0o177)
	ln, err := net.Listen("unix", addr)
	syscall.Umask(old)
	if err != nil {
		return nil, err
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false) // removed by runListen
	if err := os.Chmod(addr, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// readToken reads --token-file: its content without surrounding
// whitespace, which must not be empty. No file: nil.
func readToken(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usageErrorf("--token-file: %v", err)
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, usageErrorf("--token-file %s is empty", path)
	}
	return b, nil
}

// serverTLS is the TLS configuration of --tls-cert, --tls-key and
// --client-ca, or nil without --tls-cert.
func serverTLS(o *serveOptions) (*tls.Config, error) {
	if o.tlsCert == "" && o.tlsKey == "" {
		if o.clientCA != "" {
			return nil, usageErrorf("--client-ca needs --tls-cert and --tls-key")
		}
		return nil, nil
	}
	if o.tlsCert == "" || o.tlsKey == "" {
		return nil, usageErrorf("--tls-cert and --tls-key go together")
	}
	cert, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
	if err != nil {
		return nil, usageErrorf("--tls-cert/--tls-key: %v", err)
	}
	conf := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if o.clientCA != "" {
		pem, err := os.ReadFile(o.clientCA)
		if err != nil {
			return nil, usageErrorf("--client-ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usageErrorf("--client-ca %s holds no PEM certificate", o.clientCA)
		}
		conf.ClientCAs = pool
		conf.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return conf, nil
}

// newServeLogger logs at Info (Debug with -v) as text or JSON.
func newServeLogger(w io.Writer, format string, verbose bool) (*slog.Logger, error) {
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	opts := &slog.HandlerOptions{Level: level}
	switch format {
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usageErrorf("--log-format %q: text or json", format)
}
