package main

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
)

// Why a network session ends.
var (
	errMessageTooLarge = errors.New("a message exceeded the size limit")
	errUnauthorized    = errors.New("the client did not authenticate")
	errTooManyConns    = errors.New("the client authenticated with the server at --max-connections")
	errServerDrained   = errors.New("the server shut down (drain over)")
	errDisconnected    = errors.New("the client disconnected")
)

// hubOptions are the limits of serve --listen.
type hubOptions struct {
	maxSandboxes  int    // in all sessions; 0: no limit
	maxPerConn    int    // in one session; 0: no limit
	memoryBudget  uint64 // bytes of worker RSS; 0: no budget
	maxConns      int    // authenticated sessions at once, and as many waiting to authenticate; 0: no limit
	pool          int    // warm sandboxes kept started
	retryAfter    time.Duration
	estimatedRSS  uint64 // a sandbox's RSS before it is measured
	drainDeadline time.Duration
	requireWorker bool // --require-worker: warm sandboxes are workers or none
}

// hub is what the sessions of serve --listen share: admission control
// (sandbox and memory limits), the warm pool, the metrics and the drain
// state. Its methods do nothing on a nil hub (serve --stdio).
type hub struct {
	opts    hubOptions
	logger  *slog.Logger
	metrics *serveMetrics
	ctx     context.Context // ends the pool's starts
	stop    context.CancelFunc

	drain atomic.Bool

	mu       sync.Mutex
	live     int             // sandboxes admitted and not ended
	perConn  map[*server]int // the same by session
	measured int             // live sandboxes whose RSS is known
	rss      uint64          // their RSS, summed
	// The live sandboxes measured at least once, for the --memory-budget
	// watch to measure again while their code runs.
	watched  map[*sandboxEntry]supervisor.Sandbox
	sessions map[*server]bool // every connection; true once it counts toward maxConns
	counted  int              // sessions authenticated (or with nothing to authenticate)
	waiting  int              // sessions waiting to authenticate

	pool      chan *pooled
	room      chan struct{} // a token per place in the pool not idle nor being filled
	poolDone  chan struct{}
	watchDone chan struct{} // closed when watchRSS has returned
}

// watchInterval is how often, with --memory-budget, the workers' RSS is
// measured while their code runs (an execute is also measured when it
// ends, at most this often).
const watchInterval = time.Second

func newHub(opts hubOptions, logger *slog.Logger, m *serveMetrics) *hub {
	if opts.estimatedRSS == 0 {
		opts.estimatedRSS = 64 << 20
	}
	if opts.retryAfter <= 0 {
		opts.retryAfter = time.Second
	}
	h := &hub{opts: opts, logger: logger, metrics: m, perConn: map[*server]int{}, sessions: map[*server]bool{},
		watched: map[*sandboxEntry]supervisor.Sandbox{}, poolDone: make(chan struct{}), watchDone: make(chan struct{})}
	h.ctx, h.stop = context.WithCancel(context.Background())
	if opts.memoryBudget > 0 {
		go h.watchRSS()
	} else {
		close(h.watchDone)
	}
	if opts.pool > 0 {
		h.pool = make(chan *pooled, opts.pool)
		h.room = make(chan struct{}, opts.pool)
		for range opts.pool {
			h.room <- struct{}{}
		}
		go h.fillPool()
	} else {
		close(h.poolDone)
	}
	return h
}

func (h *hub) draining() bool { return h != nil && h.drain.Load() }

// startsWork: methods refused while draining (they would start something
// new); the others (cancel, destroy, stats, get_variable, version) still work.
func startsWork(method string) bool {
	switch method {
	case "create", "execute", "set_variable", "restart":
		return true
	}
	return false
}

// admit reserves a place for a new sandbox of session s, or answers busy
// at once. release gives the place back when the sandbox ends.
func (h *hub) admit(s *server) (release func(*sandboxEntry), err error) {
	if h == nil {
		return nil, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch o := h.opts; {
	case o.maxSandboxes > 0 && h.live >= o.maxSandboxes:
		err = busyError(limitSandboxes, o.retryAfter, "the server runs %d sandboxes, its limit (--max-sandboxes)", h.live)
	case o.maxPerConn > 0 && h.perConn[s] >= o.maxPerConn:
		err = busyError(limitPerConnection, 0,
			"this connection has %d sandboxes, the limit per connection (--max-sandboxes-per-connection); destroy one first", h.perConn[s])
	case o.memoryBudget > 0 && h.projectedRSS()+o.estimatedRSS > o.memoryBudget:
		err = busyError(limitMemory, o.retryAfter, "the workers use about %d MiB of the memory budget of %d MiB (--memory-budget)",
			h.projectedRSS()>>20, o.memoryBudget>>20)
	}
	if err != nil {
		h.metrics.rejected(err.(*rpcError).Data.(*errorData).Limit)
		return nil, err
	}
	h.live++
	h.perConn[s]++
	h.metrics.setLive(h.live)
	return func(e *sandboxEntry) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.live--
		if h.perConn[s]--; h.perConn[s] <= 0 {
			delete(h.perConn, s)
		}
		if e.measured.Load() != 0 {
			h.measured--
			h.rss -= e.rss.Load()
		}
		e.measured.Store(-1) // no more measurements count
		delete(h.watched, e)
		h.metrics.setLive(h.live)
		h.metrics.setRSS(h.rss)
		e.mu.Lock()
		wasCreated := e.sb != nil
		e.mu.Unlock()
		if wasCreated {
			h.metrics.destroyed()
		}
	}, nil
}

// projectedRSS is the measured RSS plus an estimate for the sandboxes not
// measured yet (the mean of those measured, or estimatedRSS). h.mu is held.
func (h *hub) projectedRSS() uint64 {
	est := h.opts.estimatedRSS
	if h.measured > 0 {
		est = h.rss / uint64(h.measured)
	}
	return h.rss + uint64(h.live-h.measured)*est
}

// measure records the RSS of e's worker, unless it was measured less than
// minInterval ago. The sessions call it in e's queue, so it never waits for
// an execute; with --memory-budget, watchRSS measures while the code runs
// too.
func (h *hub) measure(e *sandboxEntry, sb supervisor.Sandbox, minInterval time.Duration) {
	if h == nil {
		return
	}
	last := e.measured.Load()
	if last < 0 || (last > 0 && time.Since(time.Unix(0, last)) < minInterval) {
		return
	}
	ctx, cancel := context.WithTimeout(e.ctx, 2*time.Second)
	st, err := sb.Stats(ctx)
	cancel()
	if err != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	prev := e.measured.Load()
	if prev < 0 { // ended meanwhile
		return
	}
	if prev == 0 {
		h.measured++
		if sb.Info().Worker { // a worker answers Stats while its code runs
			h.watched[e] = sb
		}
	} else {
		h.rss -= e.rss.Load()
	}
	h.rss += st.RSSBytes
	e.rss.Store(st.RSSBytes)
	e.measured.Store(time.Now().UnixNano())
	h.metrics.setRSS(h.rss)
}

// watchRSS measures the workers again every watchInterval, until the hub
// closes, so that --memory-budget sees what code that runs for long
// allocates (the measure after an execute comes only when it ends).
func (h *hub) watchRSS() {
	defer close(h.watchDone)
	t := time.NewTicker(watchInterval)
	defer t.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
		}
		h.mu.Lock()
		type entry struct {
			e  *sandboxEntry
			sb supervisor.Sandbox
		}
		list := make([]entry, 0, len(h.watched))
		for e, sb := range h.watched {
			list = append(list, entry{e, sb})
		}
		h.mu.Unlock()
		for _, w := range list {
			if h.ctx.Err() != nil {
				return
			}
			h.measure(w.e, w.sb, watchInterval/2)
		}
	}
}

// ready: the warm pool is filled, the server is below its limits and not
// draining (/readyz).
func (h *hub) ready() (bool, string) {
	if h.draining() {
		return false, "draining"
	}
	if h.opts.pool > 0 && len(h.pool) < h.opts.pool {
		return false, fmt.Sprintf("warm pool %d/%d", len(h.pool), h.opts.pool)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.opts.maxSandboxes > 0 && h.live >= h.opts.maxSandboxes {
		return false, "at --max-sandboxes"
	}
	if h.opts.memoryBudget > 0 && h.projectedRSS()+h.opts.estimatedRSS > h.opts.memoryBudget {
		return false, "at --memory-budget"
	}
	return true, "ok"
}

func (h *hub) created() {
	if h != nil {
		h.metrics.created()
	}
}

func (h *hub) createFailed(real bool) {
	if h != nil && real {
		h.metrics.failed()
	}
}

func (h *hub) observeExecute(ce *supervisor.CodeExecution, err error, d time.Duration) {
	if h == nil {
		return
	}
	outcome := "ok"
	switch {
	case err != nil:
		outcome = errorKind(err)
	case ce != nil && ce.Error != "":
		outcome = "exception"
	}
	h.metrics.execution(outcome, d)
}

func (h *hub) rejected(reason string) {
	if h != nil {
		h.metrics.rejected(reason)
	}
}

func (h *hub) observeBridge(method string, d time.Duration) {
	if h != nil {
		h.metrics.bridge(method, d)
	}
}

// addSession registers a new connection, or refuses it. counted: nothing
// is to authenticate, so it counts toward --max-connections now; otherwise
// it waits to authenticate (authenticated counts it then), and at most
// --max-connections connections wait at once. So clients that connect and
// never authenticate cannot take the places of those that do.
func (h *hub) addSession(s *server, counted bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch limit := h.opts.maxConns; {
	case counted && limit > 0 && h.counted >= limit:
		h.metrics.rejected(limitConnections)
		return busyError(limitConnections, h.opts.retryAfter,
			"the server has %d connections, its limit (--max-connections)", h.counted)
	case !counted && limit > 0 && h.waiting >= limit:
		h.metrics.rejected(limitUnauthenticated)
		return busyError(limitUnauthenticated, h.opts.retryAfter,
			"%d connections wait to authenticate, the server's limit (--max-connections)", h.waiting)
	case counted:
		h.counted++
	default:
		h.waiting++
	}
	h.sessions[s] = counted
	h.metrics.setConnections(h.counted, h.waiting, true)
	return nil
}

// authenticated counts session s toward --max-connections now that it
// has authenticated, or refuses it (busy) when the server has that many
// (the caller then ends the session). It does nothing on a nil hub or a
// session counted already.
func (h *hub) authenticated(s *server) error {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if counted, ok := h.sessions[s]; !ok || counted {
		return nil
	}
	if h.opts.maxConns > 0 && h.counted >= h.opts.maxConns {
		h.metrics.rejected(limitConnections)
		return busyError(limitConnections, h.opts.retryAfter,
			"the server has %d connections, its limit (--max-connections); the connection is closed", h.counted)
	}
	h.waiting--
	h.counted++
	h.sessions[s] = true
	h.metrics.setConnections(h.counted, h.waiting, false)
	return nil
}

func (h *hub) removeSession(s *server) {
	h.mu.Lock()
	defer h.mu.Unlock()
	counted, ok := h.sessions[s]
	if !ok {
		return
	}
	if counted {
		h.counted--
	} else {
		h.waiting--
	}
	delete(h.sessions, s)
	h.metrics.setConnections(h.counted, h.waiting, false)
}

// busyRequests is the number of requests the sessions have not answered.
func (h *hub) busyRequests() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var n int64
	for s := range h.sessions {
		n += s.inflightN.Load()
	}
	return n
}

// endOpen answers the requests the sessions have not answered with e,
// when the server stops before they finish (see server.endOpen).
func (h *hub) endOpen(e *rpcError, within time.Duration) {
	h.mu.Lock()
	sessions := make([]*server, 0, len(h.sessions))
	for s := range h.sessions {
		sessions = append(sessions, s)
	}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Go(func() { s.endOpen(e, within) })
	}
	wg.Wait()
}

// endSessions ends every session at once (their sandboxes are destroyed).
func (h *hub) endSessions(cause error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.sessions {
		s.cancel(cause)
	}
}

// close stops the pool and destroys its idle sandboxes.
func (h *hub) close() {
	h.stop()
	<-h.poolDone
	<-h.watchDone
	if h.pool == nil {
		return
	}
	for {
		select {
		case p := <-h.pool:
			p.sb.Destroy()
		default:
			return
		}
	}
}

// pooled is a warm sandbox: started with callbacks that forward to the
// config bound when a create takes it. (supervisor.Pool cannot serve here:
// its sandboxes share one Config, so their callbacks cannot tell which
// session's sandbox they belong to.)
type pooled struct {
	sb    supervisor.Sandbox
	bound atomic.Pointer[supervisor.Config]
}

// fillPool keeps the pool full until h.ctx ends. It starts a sandbox only
// for a place that is free (a token from h.room, given back when a create
// takes a sandbox from the pool), so that at most opts.pool sandboxes are
// idle or starting, never one more waiting for room.
func (h *hub) fillPool() {
	defer close(h.poolDone)
	for {
		select {
		case <-h.room:
		case <-h.ctx.Done():
			return
		}
		p := h.startPooled()
		if p == nil {
			return // h.ctx ended
		}
		h.pool <- p // never waits: the place was free
		h.metrics.setPoolIdle(len(h.pool))
	}
}

// startPooled starts a warm sandbox, retrying a failed start after a
// growing delay; nil once h.ctx has ended.
func (h *hub) startPooled() *pooled {
	for delay := time.Duration(0); ; {
		p := &pooled{}
		sb, err := supervisor.New(h.ctx, p.config(h.logger.With("pool", true), h.opts.requireWorker))
		if err == nil {
			p.sb = sb
			return p
		}
		if h.ctx.Err() != nil {
			return nil
		}
		delay = min(max(2*delay, time.Second), time.Minute)
		h.logger.Warn("warm pool: could not start a sandbox; retrying", "err", err, "in", delay)
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-h.ctx.Done():
			t.Stop()
			return nil
		}
	}
}

// config is the default sandbox configuration (a worker, required or
// not) with callbacks that forward to the bound config.
func (p *pooled) config(logger *slog.Logger, requireWorker bool) supervisor.Config {
	mode := supervisor.WorkerAuto
	if requireWorker {
		mode = supervisor.WorkerAlways
	}
	return supervisor.Config{
		Logger:    logger,
		UseWorker: mode,
		// as serve's own creates: dicts come back to the client in order
		KeepDictOrder: true,

		OnStdout: func(line string) {
			if c := p.bound.Load(); c != nil && c.OnStdout != nil {
				c.OnStdout(line)
			}
		},
		OnStderr: func(line string) {
			if c := p.bound.Load(); c != nil && c.OnStderr != nil {
				c.OnStderr(line)
			}
		},
		OnLLMQuery: func(ctx context.Context, prompt string) (string, error) {
			if c := p.bound.Load(); c != nil {
				return c.OnLLMQuery(ctx, prompt)
			}
			return "", errors.New("llm_query is not available")
		},
		OnRLMQuery: func(ctx context.Context, task string, value any) (string, error) {
			if c := p.bound.Load(); c != nil {
				return c.OnRLMQuery(ctx, task, value)
			}
			return "", errors.New("rlm_query is not available")
		},
	}
}

// poolable: a create whose sandbox a warm one can be (the defaults, not
// in-process).
func poolable(p createParams) bool {
	return p.TimeoutMS == nil && p.WallTimeoutMS == 0 && p.MaxOutput == 0 && p.MemoryLimit == 0 &&
		(p.Direct == nil || !*p.Direct) && len(p.IndexURL) == 0
}

// newSandbox starts the sandbox of a create: a warm one when the pool has
// one that fits, otherwise a new one.
func (h *hub) newSandbox(ctx context.Context, cfg supervisor.Config, p createParams) (supervisor.Sandbox, error) {
	if h != nil && h.pool != nil && poolable(p) {
		for {
			select {
			case w := <-h.pool:
				h.room <- struct{}{} // never waits: the place was taken
				h.metrics.setPoolIdle(len(h.pool))
				if _, err := w.sb.Stats(ctx); err != nil { // died while idle
					w.sb.Destroy()
					continue
				}
				if cfg.UseWorker == supervisor.WorkerAlways && !w.sb.Info().Worker {
					w.sb.Destroy() // in-process for want of a worker: the create needs one
					continue
				}
				w.bound.Store(&cfg)
				return w.sb, nil
			default:
			}
			break
		}
	}
	return supervisor.New(ctx, cfg)
}

// tokenParams are authenticate's params.
type tokenParams struct {
	Token string `json:"token"`
}

// preAuthMaxMessage bounds a line read before a session that needs a
// token has authenticated: an authenticate message is small, and a client
// without the token must not make the server buffer --max-message bytes
// (64 MiB by default) per connection.
const preAuthMaxMessage = 64 << 10

// authenticateShape is what the first message of a session that needs a
// token must be, for the errors that say so.
const authenticateShape = `{"method": "authenticate", "params": {"token": …}} with the server's token`

// mustAuthenticate: the session needs a token and has not presented it.
func (s *server) mustAuthenticate() bool { return s.token != nil && !s.authed }

// authenticateFirst checks the first line of a session that needs a token:
// it must be an authenticate request with the right token. Otherwise it
// answers unauthorized and returns errUnauthorized; when the server has
// --max-connections authenticated sessions, it answers busy and returns
// errTooManyConns (either way, the session ends).
func (s *server) authenticateFirst(line []byte) error {
	if !s.mustAuthenticate() {
		return nil
	}
	m, err := decodeMessage(line)
	id := m.ID
	if len(id) == 0 {
		id = nullID
	}
	if err != nil || m.Method != "authenticate" || !s.tokenOK(m.Params) {
		s.refuseUnauthenticated(id, "unauthorized: the first message must be "+authenticateShape+"; the connection is closed")
		return errUnauthorized
	}
	if err := s.hub.authenticated(s); err != nil {
		s.send(errorResponse{"2.0", id, err.(*rpcError)})
		return errTooManyConns
	}
	s.authed = true
	if s.afterAuth != nil {
		s.afterAuth()
	}
	return nil
}

// refuseUnauthenticated answers the request id (null: none) with the
// unauthorized error; the caller then closes the connection.
func (s *server) refuseUnauthenticated(id json.RawMessage, message string) {
	s.send(errorResponse{"2.0", id, newRPCError(codeUnauthorized, kindUnauthorized, "%s", message)})
	s.hub.rejected("unauthorized")
}

func (s *server) tokenOK(raw json.RawMessage) bool {
	var p tokenParams
	if decodeParams(raw, &p) != nil {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(p.Token), s.token) == 1
}

// authenticate answers the authenticate method: {} when the token is right
// or none is needed (so a client may always send it). A wrong token, even
// after a right one, is answered unauthorized and ends the session once
// its line is handled, as a wrong first message does.
func (s *server) authenticate(raw json.RawMessage, done doneFunc) {
	if s.token == nil {
		if err := decodeParams(raw, &tokenParams{}); err != nil {
			done(nil, err)
			return
		}
	} else if !s.tokenOK(raw) {
		s.refused = true
		s.hub.rejected("unauthorized")
		done(nil, newRPCError(codeUnauthorized, kindUnauthorized, "unauthorized: wrong token; the connection is closed"))
		return
	}
	done(struct{}{}, nil)
}
