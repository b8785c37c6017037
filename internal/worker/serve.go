// Package worker is the body of the rlm-worker command: it serves the ipc
// protocol on a pair of streams with one runtime interpreter.
package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/rlm-sandbox/rlm-sandbox/internal/convert"
	"github.com/rlm-sandbox/rlm-sandbox/ipc"
	"github.com/rlm-sandbox/rlm-sandbox/runtime"
)

// Options configure Serve.
type Options struct {
	Runtime runtime.Config
	Log     *slog.Logger
}

// Serve boots an interpreter, sends the hello, and answers requests read
// from in until in ends or a Shutdown arrives. Requests are served one at a
// time; while one runs, a reader goroutine keeps reading so that the
// answers to the running code's bridge calls can arrive.
func Serve(ctx context.Context, in io.Reader, out io.Writer, opts Options) error {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	w := ipc.NewWriter(out)
	s := &server{w: w, log: log, bridges: map[uint64]chan ipc.Message{}, gone: make(chan struct{})}
	rcfg := opts.Runtime
	rcfg.Bridge = s.bridge
	interp, err := runtime.New(ctx, rcfg)
	if err != nil {
		code := ipc.CodeInternal
		if errors.Is(err, runtime.ErrDistribution) {
			code = CodeDistribution
		}
		_ = w.WriteMessage(ipc.KindError, 0, ipc.Error{Code: code, Message: err.Error()})
		return err
	}
	defer interp.Close()
	s.interp = interp
	s.start = time.Now()
	if err := w.WriteMessage(ipc.KindHello, 0, ipc.Hello{
		ProtocolVersion: ipc.ProtocolVersion,
		PythonVersion:   interp.PythonVersion(),
		PyodideVersion:  runtime.PyodideVersion,
		PID:             os.Getpid(),
	}); err != nil {
		return fmt.Errorf("worker: send hello: %w", err)
	}
	reqs := make(chan request)
	s.quit = make(chan struct{})
	defer close(s.quit)
	go s.read(ipc.NewReader(in), reqs)
	for r := range reqs {
		if r.err != nil {
			if r.m.ID != 0 || r.m.Kind != 0 {
				// A bad body of a known frame: answer it, keep serving.
				_ = w.WriteMessage(ipc.KindError, r.m.ID, ipc.Error{Code: codeOf(r.err), Message: r.err.Error()})
				continue
			}
			return fmt.Errorf("worker: read request: %w", r.err)
		}
		if r.m.Kind == ipc.KindShutdown {
			return nil
		}
		if err := s.handle(ctx, r.m); err != nil {
			return err
		}
	}
	return nil
}

// CodeDistribution is the code of the Error the worker sends instead of its
// Hello when Pyodide cannot be loaded (runtime.ErrDistribution).
const CodeDistribution = "distribution"

// request is a frame read from the supervisor, or the error reading it.
type request struct {
	m   ipc.Message
	err error
}

// read reads frames until the input ends: bridge replies go to the bridge
// calls waiting for them, everything else to reqs, in order.
func (s *server) read(r *ipc.Reader, reqs chan<- request) {
	defer close(reqs)
	defer close(s.gone)
	for {
		m, err := r.ReadMessage()
		if errors.Is(err, io.EOF) {
			return
		}
		if err == nil && (m.Kind == ipc.KindPing || m.Kind == ipc.KindStats) {
			// Answered at once, even while code runs.
			s.answerNow(m)
			continue
		}
		if err == nil && (m.Kind == ipc.KindBridgeReply || m.Kind == ipc.KindError) {
			if ch := s.takeBridge(m.ID); ch != nil {
				ch <- m
				continue
			}
			if m.Kind == ipc.KindBridgeReply {
				continue // the answer to a call abandoned on an interrupt
			}
		}
		select {
		case reqs <- request{m, err}:
		case <-s.quit:
			return
		}
		if err != nil && m.ID == 0 && m.Kind == 0 {
			return // the stream is unusable
		}
	}
}

// takeBridge removes and returns the channel of the bridge call id waits
// on, or nil when no call waits for it.
func (s *server) takeBridge(id uint64) chan ipc.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.bridges[id]
	delete(s.bridges, id)
	return ch
}

func codeOf(err error) string {
	if errors.Is(err, ipc.ErrUnknownKind) {
		return ipc.CodeUnknownKind
	}
	return ipc.CodeMalformed
}

type server struct {
	interp *runtime.Interpreter
	w      *ipc.Writer
	log    *slog.Logger
	start  time.Time
	stage  []byte // what Stage frames carried so far
	// stageErr is why the staged value cannot be used.
	stageErr error

	mu         sync.Mutex
	nextBridge uint64
	bridges    map[uint64]chan ipc.Message // bridge calls waiting for their reply
	gone       chan struct{}               // closed when the input ends
	quit       chan struct{}               // closed when Serve returns
}

// errSupervisorGone fails bridge calls once the supervisor stopped talking.
var errSupervisorGone = errors.New("the supervisor is gone")

// bridge is the interpreter's runtime.BridgeFunc: it asks the supervisor,
// which runs the host callback, and waits for the answer.
func (s *server) bridge(ctx context.Context, method string, args []any) (any, error) {
	wire := make([]any, len(args))
	for i, a := range args {
		wire[i] = convert.ToIPC(a)
	}
	ch := make(chan ipc.Message, 1)
	s.mu.Lock()
	s.nextBridge++
	id := s.nextBridge
	s.bridges[id] = ch
	s.mu.Unlock()
	forget := func() {
		s.mu.Lock()
		delete(s.bridges, id)
		s.mu.Unlock()
	}
	if err := s.w.WriteMessage(ipc.KindBridgeCall, id, ipc.BridgeCall{Method: method, Args: wire}); err != nil {
		forget()
		return nil, fmt.Errorf("send %s call: %w", method, err)
	}
	select {
	case m := <-ch:
		switch b := m.Body.(type) {
		case ipc.BridgeReply:
			if b.Error != "" {
				return nil, errors.New(b.Error)
			}
			return convert.FromIPC(b.Result), nil
		case ipc.Error:
			return nil, fmt.Errorf("the supervisor could not answer %s: %s", method, b.Message)
		}
		return nil, fmt.Errorf("unexpected %v in reply to %s", m.Kind, method)
	case <-ctx.Done():
		forget()
		return nil, ctx.Err()
	case <-s.gone:
		forget()
		return nil, errSupervisorGone
	}
}

// answerNow answers a Ping or Stats from the reading goroutine, without
// waiting for the request being served.
func (s *server) answerNow(m ipc.Message) {
	var err error
	if m.Kind == ipc.KindPing {
		err = s.w.WriteMessage(ipc.KindPong, m.ID, ipc.Pong{})
	} else {
		err = s.w.WriteMessage(ipc.KindStatsReply, m.ID, ipc.StatsReply{
			RSSBytes:          rss(),
			LinearMemoryBytes: s.interp.MemorySize(),
			Executions:        uint64(s.interp.Executions()),
			UptimeNanos:       int64(time.Since(s.start)),
		})
	}
	if err != nil {
		s.log.Warn("answer", "kind", m.Kind.String(), "err", err)
	}
}

// handle answers one request. It returns an error only when the reply
// cannot be written (the supervisor is gone).
func (s *server) handle(ctx context.Context, m ipc.Message) error {
	reply := func(kind ipc.Kind, body any) error {
		err := s.w.WriteMessage(kind, m.ID, body)
		if errors.Is(err, ipc.ErrUnsupportedValue) || errors.Is(err, ipc.ErrFrameTooLarge) || errors.Is(err, ipc.ErrTooDeep) {
			// Nothing was written: the reply cannot be encoded (a value
			// too large for a frame, say). Say so instead.
			return s.w.WriteMessage(ipc.KindError, m.ID, ipc.Error{Code: ipc.CodeInternal, Message: "the reply cannot be sent: " + err.Error()})
		}
		return err
	}
	fail := func(err error) error {
		code := ipc.CodeInternal
		if errors.Is(err, runtime.ErrDead) || errors.Is(err, runtime.ErrClosed) {
			code = "dead"
		}
		return reply(ipc.KindError, ipc.Error{Code: code, Message: err.Error()})
	}
	switch b := m.Body.(type) {
	case ipc.Stage:
		if s.stage == nil && b.Size > int64(len(b.Data)) && b.Size <= maxStage {
			s.stage = make([]byte, 0, b.Size)
		}
		if s.stageErr == nil && int64(len(s.stage))+int64(len(b.Data)) > maxStage {
			s.stage, s.stageErr = nil, fmt.Errorf("the value is larger than %d GiB", maxStage>>30)
		}
		if s.stageErr == nil {
			s.stage = append(s.stage, b.Data...)
		}
		return nil
	case ipc.Initialize:
		v, err := s.value(b.Context, b.Staged)
		if err != nil {
			return reply(ipc.KindError, ipc.Error{Code: ipc.CodeMalformed, Message: err.Error()})
		}
		if err := s.interp.SetContext(ctx, v); err != nil {
			return fail(err)
		}
		return reply(ipc.KindInitializeReply, ipc.InitializeReply{})
	case ipc.Execute:
		return s.execute(ctx, m.ID, b)
	case ipc.Complete:
		ok, err := s.interp.IsComplete(ctx, b.Source)
		if err != nil {
			return fail(err)
		}
		return reply(ipc.KindCompleteReply, ipc.CompleteReply{Complete: ok})
	case ipc.GetVariable:
		v, found, err := s.interp.Get(ctx, b.Name)
		if err != nil {
			return fail(err)
		}
		return reply(ipc.KindGetVariableReply, ipc.GetVariableReply{Found: found, Value: convert.ToIPC(v)})
	case ipc.SetVariable:
		v, err := s.value(b.Value, b.Staged)
		if err != nil {
			return reply(ipc.KindError, ipc.Error{Code: ipc.CodeMalformed, Message: err.Error()})
		}
		if err := s.interp.Set(ctx, b.Name, v); err != nil {
			return fail(err)
		}
		return reply(ipc.KindSetVariableReply, ipc.SetVariableReply{})
	}
	return reply(ipc.KindError, ipc.Error{Code: ipc.CodeUnexpected, Message: fmt.Sprintf("the worker does not accept %v requests", m.Kind)})
}

// maxStage bounds a staged value: the guest's memory is at most 4 GiB.
const maxStage = 4 << 30

// value is the Go value of an Initialize or SetVariable: the message's
// own, or the one the Stage frames before it carried (consuming them).
func (s *server) value(v any, staged string) (any, error) {
	stage, stageErr := s.stage, s.stageErr
	s.stage, s.stageErr = nil, nil
	if stageErr != nil && staged != "" {
		return nil, stageErr
	}
	switch staged {
	case "":
		return convert.FromIPC(v), nil
	case ipc.StagedText:
		if len(stage) == 0 {
			return "", nil
		}
		// The staging buffer is not used again: view it as the string
		// instead of copying hundreds of megabytes.
		return unsafe.String(&stage[0], len(stage)), nil
	case ipc.StagedValue:
		v, err := ipc.DecodeValue(stage)
		if err != nil {
			return nil, err
		}
		return convert.FromIPC(v), nil
	}
	return nil, fmt.Errorf("unknown staging format %q", staged)
}

// maxOutputFrame bounds the data of one Output frame.
const maxOutputFrame = 1 << 20

// streamWriter sends what Python writes as Output frames, as it is written.
type streamWriter struct {
	w      *ipc.Writer
	id     uint64
	stream string
	err    error
}

func (sw *streamWriter) Write(p []byte) (int, error) {
	for rest := p; sw.err == nil && len(rest) > 0; {
		n := min(len(rest), maxOutputFrame)
		for n < len(rest) && n > 0 && !utf8.RuneStart(rest[n]) {
			n-- // keep characters whole
		}
		if n == 0 {
			n = min(len(rest), maxOutputFrame)
		}
		sw.err = sw.w.WriteMessage(ipc.KindOutput, sw.id, ipc.Output{Stream: sw.stream, Data: string(rest[:n])})
		rest = rest[n:]
	}
	return len(p), nil
}

func (s *server) execute(ctx context.Context, id uint64, b ipc.Execute) error {
	stdout := &streamWriter{w: s.w, id: id, stream: ipc.StreamStdout}
	stderr := &streamWriter{w: s.w, id: id, stream: ipc.StreamStderr}
	out := runtime.Output{Stdout: stdout, Stderr: stderr}
	var res *runtime.Result
	var err error
	if b.Interactive {
		res, err = s.interp.ExecInteractive(ctx, b.Code, out)
	} else {
		res, err = s.interp.Exec(ctx, b.Code, out)
	}
	if stdout.err != nil {
		return stdout.err
	}
	if stderr.err != nil {
		return stderr.err
	}
	if err != nil {
		if errors.Is(err, runtime.ErrInterrupted) {
			return s.w.WriteMessage(ipc.KindResult, id, ipc.Result{Error: "KeyboardInterrupt", ErrorType: "KeyboardInterrupt"})
		}
		code := ipc.CodeInternal
		if errors.Is(err, runtime.ErrDead) {
			code = "dead"
		}
		return s.w.WriteMessage(ipc.KindError, id, ipc.Error{Code: code, Message: err.Error()})
	}
	r := ipc.Result{DurationNanos: int64(res.Duration)}
	if e := res.Error; e != nil {
		r.Error, r.ErrorType, r.Traceback = e.Error(), e.Type, e.Traceback
	}
	return s.w.WriteMessage(ipc.KindResult, id, r)
}

// rss reads the process's resident set size from /proc (0 elsewhere).
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	var size, res uint64
	if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &size, &res); err != nil {
		return 0
	}
	return res * uint64(os.Getpagesize())
}
