package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/internal/jsonvalue"
	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
)

// server is a JSON-RPC server over a line-oriented stream. One goroutine
// reads requests and dispatches them: create, execute and the other
// methods that use a sandbox go to that sandbox's queue, so requests for
// one sandbox are served in order and different sandboxes concurrently;
// cancel, destroy and version are answered at once. Writes are serialised.
type server struct {
	ctx    context.Context // cancelled when the server must stop at once
	cancel context.CancelCauseFunc
	logger *slog.Logger

	wmu sync.Mutex // serialises writes to out
	out io.Writer

	mu         sync.Mutex
	sandboxes  map[string]*sandboxEntry
	created    int                    // sandboxes created so far, for ids
	bridges    int                    // bridge requests sent so far, for ids
	pending    map[string]*bridgeCall // bridge requests awaiting an answer
	inputEnded bool

	inputDone chan struct{}  // closed when the input has ended
	inflight  sync.WaitGroup // requests read and not yet answered
	inflightN atomic.Int64   // the same, counted
	// The same again, to answer them when the server stops at once
	// (endOpen); under mu.
	open     map[*openRequest]struct{}
	openSeq  int
	badWrite atomic.Bool // a write to the client failed

	// Set for a network session (serve --listen); zero for --stdio.
	hub         *hub   // admission control, metrics and drain, shared by the sessions
	token       []byte // the bearer token the first message must present; nil: none
	authed      bool   // the first message authenticated (only the reader uses it)
	refused     bool   // an authenticate had a wrong token: the session ends (only the reader uses it)
	afterAuth   func() // called once authenticated; may be nil
	maxMessage  int    // bytes in one line; 0: no limit
	maxInflight int    // requests read and not yet answered; 0: no limit
	// The largest max_output a create may ask for (no cap, negative, is
	// refused too); 0: no limit.
	maxOutputLimit int

	requireWorker bool // --require-worker: a create without "direct" needs a worker
}

func newServer(ctx context.Context, out io.Writer, logger *slog.Logger) *server {
	s := &server{
		out:       out,
		logger:    logger,
		sandboxes: map[string]*sandboxEntry{},
		pending:   map[string]*bridgeCall{},
		open:      map[*openRequest]struct{}{},
		inputDone: make(chan struct{}),
	}
	s.ctx, s.cancel = context.WithCancelCause(ctx)
	return s
}

// readLoop reads messages, one per line, until the input ends, a line is
// longer than maxMessage, or the first message of a session that needs a
// token does not authenticate (or finds the server at --max-connections),
// or a later one presents a wrong token (the errors are answered first).
// Until the session has authenticated, a line may be at most
// preAuthMaxMessage bytes.
//
// At the end of the input, a last line without its newline is a message
// too; a line cut short by a read that failed (a deadline passed, the
// connection broke) is not: what it would have said is unknown.
func (s *server) readLoop(in io.Reader) error {
	br := bufio.NewReaderSize(in, 1<<16)
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if s.mustAuthenticate() && len(line)+len(chunk) > preAuthMaxMessage+1 {
			// Not buffered further: a client without the token does not
			// get to make the server hold --max-message bytes.
			s.refuseUnauthenticated(nullID, fmt.Sprintf(
				"unauthorized: a message before authenticate may be at most %d bytes, and the first must be "+authenticateShape+"; the connection is closed",
				preAuthMaxMessage))
			return errUnauthorized
		}
		if s.maxMessage > 0 && len(line)+len(chunk) > s.maxMessage+1 {
			end, err := s.tooLong(br, line, chunk, err)
			if err != nil || end {
				return err
			}
			line = nil
			continue
		}
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read the client's messages: %w", err)
		}
		if t := bytes.TrimSpace(line); len(t) > 0 {
			if err := s.authenticateFirst(t); err != nil {
				return err
			}
			s.handleLine(t)
			if s.refused {
				return errUnauthorized
			}
		}
		line = nil
		if err != nil { // io.EOF
			return nil
		}
	}
}

// tooLong reads the rest of a line longer than maxMessage (line and chunk
// are its start) without holding it, and answers it: a request with its
// id gets a message_too_large error, an answer to a bridge call fails the
// call (BridgeError in Python), and the session goes on. Anything else (no
// id, not a JSON object, a batch) cannot be answered: the error goes with
// id null and the connection is closed (errMessageTooLarge). rerr is the
// error of the read that returned chunk; end is true when the input ended
// with that line.
func (s *server) tooLong(br *bufio.Reader, line, chunk []byte, rerr error) (end bool, err error) {
	s.hub.rejected(limitMessage)
	var sk skim
	sk.write(line)
	n := int64(len(line))
	for more := true; more; {
		sk.write(chunk)
		n += int64(len(chunk))
		switch {
		case errors.Is(rerr, bufio.ErrBufferFull):
			chunk, rerr = br.ReadSlice('\n')
		case errors.Is(rerr, io.EOF):
			end, more = true, false
		case rerr != nil:
			return true, fmt.Errorf("read the client's messages: %w", rerr)
		default:
			more = false
		}
	}
	m := sk.message()
	switch {
	case m != nil && m.HasMethod && m.ID != nil:
		s.send(errorResponse{"2.0", m.ID, newRPCError(codeInvalidRequest, "message_too_large",
			"the request is longer than the server's limit of %d bytes (--max-message); it was not read", s.maxMessage)})
		return end, nil
	case m != nil && !m.HasMethod && m.ID != nil:
		if call, id := s.answered(m.ID); call != nil {
			s.logger.Warn("a bridge answer is longer than --max-message; the call fails", "id", id, "bytes", n)
			call.answer <- bridgeAnswer{err: fmt.Errorf("the client's answer to %s is longer than the server's limit of %d bytes (--max-message)",
				call.method, s.maxMessage)}
		} else {
			s.logger.Warn("a response to no pending request (withdrawn, or answered twice)", "id", abbreviate(m.ID, 100))
		}
		return end, nil
	}
	s.send(errorResponse{"2.0", nullID, newRPCError(codeInvalidRequest, "message_too_large",
		"a message is longer than the server's limit of %d bytes; the connection is closed", s.maxMessage)})
	return true, errMessageTooLarge
}

// endOfInput fails the bridge requests no one will answer now.
func (s *server) endOfInput() {
	s.mu.Lock()
	s.inputEnded = true
	s.mu.Unlock()
	close(s.inputDone)
}

// drain waits until every request read has been answered, or the server
// must stop at once.
func (s *server) drain() {
	done := make(chan struct{})
	go func() {
		s.inflight.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-s.ctx.Done():
	}
}

// destroyAll destroys every sandbox and waits until their queues are done.
func (s *server) destroyAll() {
	s.mu.Lock()
	entries := make([]*sandboxEntry, 0, len(s.sandboxes))
	for id, e := range s.sandboxes {
		entries = append(entries, e)
		delete(s.sandboxes, id)
	}
	s.mu.Unlock()
	for _, e := range entries {
		e.destroy()
	}
	for _, e := range entries {
		<-e.q.done
	}
}

// send writes one message as a line. A failed write (the client is gone)
// stops the server. Once the server stops, only a finalResponse is
// written: anything else could wait forever for a client that does not
// read.
func (s *server) send(v any) error {
	f, final := v.(finalResponse)
	if final {
		v = f.response
	} else if s.ctx.Err() != nil {
		return context.Cause(s.ctx)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode a response: %w", err)
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if !final && s.ctx.Err() != nil {
		return context.Cause(s.ctx)
	}
	if _, err := s.out.Write(buf.Bytes()); err != nil {
		err = fmt.Errorf("write to the client: %w", err)
		s.badWrite.Store(true)
		s.cancel(err)
		return err
	}
	return nil
}

// finalResponse is a response endOpen writes while the server stops.
type finalResponse struct{ response any }

// openRequest is a request read and not answered yet.
type openRequest struct {
	seq   int // in the order read
	id    json.RawMessage
	reply replyFunc
}

// settle claims req for its response, counting it out. It reports false
// when endOpen has claimed it already, or when the server is stopping
// (endOpen then answers it).
func (s *server) settle(req *openRequest) bool {
	s.mu.Lock()
	_, ok := s.open[req]
	ok = ok && s.ctx.Err() == nil
	if ok {
		delete(s.open, req)
	}
	s.mu.Unlock()
	if ok {
		s.countOut()
	}
	return ok
}

func (s *server) countOut() {
	s.inflightN.Add(-1)
	s.inflight.Done()
}

// shutdownError answers the requests that had not finished when the
// server stopped at once.
func shutdownError() *rpcError {
	return newRPCError(codeShutdown, kindShutdown, "the server is shutting down: the request did not finish before it stopped")
}

// endOpen ends the requests read and not answered yet, when the server
// stops at once: it answers each with e (a best effort, given up after
// within: the client may have stopped reading), or nothing when e is nil
// or the client is gone.
func (s *server) endOpen(e *rpcError, within time.Duration) {
	s.mu.Lock()
	reqs := make([]*openRequest, 0, len(s.open))
	for r := range s.open {
		reqs = append(reqs, r)
	}
	clear(s.open)
	s.mu.Unlock()
	for range reqs {
		s.countOut()
	}
	if e == nil || len(reqs) == 0 || s.badWrite.Load() || errors.Is(context.Cause(s.ctx), errClientGone) {
		return
	}
	slices.SortFunc(reqs, func(a, b *openRequest) int { return a.seq - b.seq })
	if c, ok := s.out.(interface{ SetWriteDeadline(time.Time) error }); ok {
		c.SetWriteDeadline(time.Now().Add(within)) // a connection; a pipe has no deadlines
	}
	written := make(chan struct{})
	go func() {
		defer close(written)
		for _, r := range reqs {
			r.reply(finalResponse{errorResponse{"2.0", r.id, e}})
		}
	}()
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case <-written:
	case <-t.C:
		s.logger.Warn("the client does not read: requests left unanswered at shutdown", "requests", len(reqs))
	}
}

// replyFunc delivers the response to one request.
type replyFunc func(response any)

// handleLine handles one line: a message or a batch of them.
func (s *server) handleLine(line []byte) {
	if !json.Valid(line) {
		if id, hasMethod, method, ok := tooDeep(line); ok {
			s.deepMessage(id, hasMethod, method)
			return
		}
		s.send(errorResponse{"2.0", nullID, newRPCError(codeParseError, "parse_error", "not valid JSON")})
		return
	}
	if line[0] != '[' {
		s.handleMessage(line, func() replyFunc { return func(r any) { s.send(r) } })
		return
	}
	var items []json.RawMessage
	json.Unmarshal(line, &items)
	if len(items) == 0 {
		s.send(errorResponse{"2.0", nullID, newRPCError(codeInvalidRequest, "invalid_request", "empty batch")})
		return
	}
	b := &batch{s: s, left: 1}
	for _, item := range items {
		s.handleMessage(item, b.add)
	}
	b.done()
}

var nullID = json.RawMessage("null")

// deepMessage answers a message nested past what Go's JSON decoder takes
// (10,000 levels), which is valid JSON: by its id, as a request whose
// parameters nest past 200 levels is, and, for the answer to a bridge
// call, by failing that call (read as not JSON, it was answered with id
// null, and the call waited for ever).
func (s *server) deepMessage(id json.RawMessage, hasMethod bool, method string) {
	err := &jsonvalue.DepthError{Max: jsonvalue.MaxDepth}
	if method == "create" {
		s.mu.Lock()
		s.created++ // every create takes the next id, whatever becomes of it (see create)
		s.mu.Unlock()
	}
	if !hasMethod {
		if call, name := s.answered(id); call != nil {
			s.routeAnswer(call, name, &message{ID: id}, err, func() replyFunc { return func(r any) { s.send(r) } })
			return
		}
		id = nullID // a response's id is the server's
	}
	if id == nil {
		return // a notification
	}
	s.send(errorResponse{"2.0", id, newRPCError(codeInvalidParams, "invalid_params", "%v", err)})
}

// handleMessage handles one message; newReply is called once for each
// message that needs a response.
func (s *server) handleMessage(raw []byte, newReply func() replyFunc) {
	m, err := decodeMessage(raw)
	if !m.HasMethod {
		if call, id := s.answered(m.ID); call != nil {
			s.routeAnswer(call, id, m, err, newReply)
			return
		}
	}
	if err != nil {
		id := m.ID
		if id == nil || !m.HasMethod { // a response's id is the server's
			id = nullID
		}
		newReply()(errorResponse{"2.0", id, newRPCError(codeInvalidRequest, "invalid_request", "%v", err)})
		return
	}
	if !m.HasMethod {
		if m.ID != nil && (m.Result != nil || m.Error != nil) {
			s.logger.Warn("a response to no pending request (withdrawn, or answered twice)", "id", string(m.ID))
			return
		}
		newReply()(errorResponse{"2.0", m.ID, newRPCError(codeInvalidRequest, "invalid_request", "a request needs a method")})
		return
	}
	reply := func(any) {}
	if m.ID != nil {
		reply = newReply()
	}
	if m.JSONRPC != "2.0" {
		reply(errorResponse{"2.0", m.ID, newRPCError(codeInvalidRequest, "invalid_request", `"jsonrpc" must be "2.0"`)})
		return
	}
	if s.maxInflight > 0 && s.inflightN.Load() >= int64(s.maxInflight) && !answeredAtOnce(m.Method) {
		s.hub.rejected(limitInflight)
		reply(errorResponse{"2.0", m.ID, busyError(limitInflight, 0,
			"%d requests of this connection are not answered yet, the server's limit", s.maxInflight)})
		return
	}
	s.inflight.Add(1)
	s.inflightN.Add(1)
	req := &openRequest{id: m.ID, reply: reply}
	s.mu.Lock()
	s.openSeq++
	req.seq = s.openSeq
	s.open[req] = struct{}{}
	s.mu.Unlock()
	s.dispatch(m, func(result any, err error) {
		// Counted out before the reply is written: a client that sends its
		// next request as soon as it reads this reply must not find it
		// still counted.
		if !s.settle(req) {
			return
		}
		if err != nil {
			reply(errorResponse{"2.0", m.ID, toRPCError(err)})
			return
		}
		reply(resultResponse{"2.0", m.ID, result})
	})
}

// answeredAtOnce says whether a method is answered without waiting for
// the sandbox: such requests are served past --max-inflight, since
// cancelling or destroying is how a client at that limit makes room.
func answeredAtOnce(method string) bool {
	switch method {
	case "cancel", "destroy", "version", "authenticate":
		return true
	}
	return false
}

// batch collects the responses to a batch request and writes them as one
// array once all have come (nothing when it held only notifications).
type batch struct {
	s     *server
	mu    sync.Mutex
	left  int // responses still to come, plus one until done is called
	resp  []any
	final bool // a response is a finalResponse: so is the batch's
}

func (b *batch) add() replyFunc {
	b.mu.Lock()
	b.left++
	b.mu.Unlock()
	return func(r any) {
		b.mu.Lock()
		if f, ok := r.(finalResponse); ok {
			r, b.final = f.response, true
		}
		b.resp = append(b.resp, r)
		b.mu.Unlock()
		b.done()
	}
}

func (b *batch) done() {
	b.mu.Lock()
	b.left--
	last := b.left == 0
	b.mu.Unlock()
	switch {
	case !last || len(b.resp) == 0:
	case b.final:
		b.s.send(finalResponse{b.resp})
	default:
		b.s.send(b.resp)
	}
}

// bridgeCall is a bridge request awaiting the client's answer.
type bridgeCall struct {
	method string
	answer chan bridgeAnswer // buffered: routeAnswer never waits
}

// bridgeAnswer is what the bridge callback returns: the text of a string
// result, or the error Python raises as BridgeError.
type bridgeAnswer struct {
	text string
	err  error
}

// callClient sends the client a request and waits for its answer, a
// string. The request is withdrawn (a cancel_request notification) when
// ctx ends first.
func (s *server) callClient(ctx context.Context, method string, params any) (string, error) {
	s.mu.Lock()
	if s.inputEnded {
		s.mu.Unlock()
		return "", fmt.Errorf("the client closed its input, so it cannot answer %s", method)
	}
	s.bridges++
	id := fmt.Sprintf("b%d", s.bridges)
	call := &bridgeCall{method: method, answer: make(chan bridgeAnswer, 1)}
	s.pending[id] = call
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.pending, id)
		s.mu.Unlock()
	}()
	if err := s.send(outRequest{JSONRPC: "2.0", ID: id, Method: method, Params: params}); err != nil {
		return "", err
	}
	start := time.Now()
	select {
	case a := <-call.answer:
		s.hub.observeBridge(method, time.Since(start))
		return a.text, a.err
	case <-ctx.Done():
		s.send(outRequest{JSONRPC: "2.0", Method: "cancel_request", Params: map[string]string{"id": id}})
		return "", context.Cause(ctx)
	case <-s.inputDone:
		return "", fmt.Errorf("the client closed its input before answering %s", method)
	}
}

// answered returns the bridge call that id (a message's, maybe absent)
// names, taking it from the pending ones; nil when there is none.
func (s *server) answered(id json.RawMessage) (*bridgeCall, string) {
	var name string
	if id == nil || json.Unmarshal(id, &name) != nil {
		return nil, ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	call := s.pending[name]
	delete(s.pending, name)
	return call, name
}

// routeAnswer hands the client's answer m to the bridge call id waiting
// for it. A malformed answer (decodeErr, or readAnswer's verdict) fails
// the call and is reported to the client as an Invalid Request.
func (s *server) routeAnswer(call *bridgeCall, id string, m *message, decodeErr error, newReply func() replyFunc) {
	var a bridgeAnswer
	var malformed string
	if decodeErr != nil {
		malformed = decodeErr.Error()
		a.err = fmt.Errorf("the client's answer to %s was malformed: %s", call.method, malformed)
	} else {
		a.text, a.err, malformed = readAnswer(m, call.method)
	}
	if malformed != "" {
		newReply()(errorResponse{"2.0", nullID, newRPCError(codeInvalidRequest, "invalid_request",
			"the answer to bridge request %s is malformed: %s; its %s call fails with BridgeError", id, malformed, call.method)})
	}
	call.answer <- a
}

func abbreviate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "..."
}

// sandboxEntry is a sandbox of the server, from its create request on.
type sandboxEntry struct {
	id    string
	q     *jobQueue
	value any // the context, set again by restart

	ctx    context.Context // ends when the sandbox is destroyed (stops a create)
	cancel context.CancelFunc

	mu        sync.Mutex
	sb        supervisor.Sandbox // nil until created
	createErr error
	destroyed bool
	// An execute runs under the runCtx current when it was read; cancel
	// ends that context and starts another, so the executes read before
	// the cancel stop (or never start) and those read after it run.
	runCtx    context.Context
	runCancel context.CancelCauseFunc

	gone     func() // called once when the sandbox ends (admission's release); may be nil
	goneOnce sync.Once
	rss      atomic.Uint64 // the worker's RSS last measured
	measured atomic.Int64  // when, in Unix nanoseconds
}

// ended calls gone, once.
func (e *sandboxEntry) ended() {
	e.goneOnce.Do(func() {
		if e.gone != nil {
			e.gone()
		}
	})
}

// sandbox returns the sandbox for a request that needs it.
func (e *sandboxEntry) sandbox() (supervisor.Sandbox, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.destroyed:
		return nil, newRPCError(codeNoSuchSandbox, kindDestroyed, "sandbox %s was destroyed", e.id)
	case e.createErr != nil:
		return nil, newRPCError(codeNoSuchSandbox, kindNoSuchSandbox, "sandbox %s could not be created: %v", e.id, e.createErr)
	}
	return e.sb, nil
}

// errCanceledByClient ends the runCtx of the executes a cancel stops.
var errCanceledByClient = errors.New("the client sent cancel")

// runContext is the context of an execute read now.
func (e *sandboxEntry) runContext() context.Context {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.runCtx
}

// cancelRuns interrupts the code running now and fails the executes read
// so far that have not started; parent is the context of the next ones.
func (e *sandboxEntry) cancelRuns(parent context.Context) {
	e.mu.Lock()
	stop := e.runCancel
	e.runCtx, e.runCancel = context.WithCancelCause(parent)
	sb := e.sb
	e.mu.Unlock()
	if sb != nil {
		sb.Cancel() // first: the running code's error is then plain "canceled"
	}
	// An execute between its start and the interpreter's sees this.
	stop(errCanceledByClient)
}

// destroy ends the sandbox at once, including a create or an execute in
// progress; its queued requests then fail.
func (e *sandboxEntry) destroy() {
	e.mu.Lock()
	e.destroyed = true
	sb := e.sb
	stop := e.runCancel
	e.mu.Unlock()
	e.cancel()
	stop(supervisor.ErrDestroyed)
	if sb != nil {
		sb.Destroy()
	}
	e.q.close()
	e.ended()
}
