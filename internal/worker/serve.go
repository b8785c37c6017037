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
	"time"

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
// from in until in ends or a Shutdown arrives.
func Serve(ctx context.Context, in io.Reader, out io.Writer, opts Options) error {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	w := ipc.NewWriter(out)
	interp, err := runtime.New(ctx, opts.Runtime)
	if err != nil {
		_ = w.WriteMessage(ipc.KindError, 0, ipc.Error{Code: ipc.CodeInternal, Message: err.Error()})
		return err
	}
	defer interp.Close()
	start := time.Now()
	if err := w.WriteMessage(ipc.KindHello, 0, ipc.Hello{
		ProtocolVersion: ipc.ProtocolVersion,
		PythonVersion:   interp.PythonVersion(),
		PyodideVersion:  runtime.PyodideVersion,
		PID:             os.Getpid(),
	}); err != nil {
		return fmt.Errorf("worker: send hello: %w", err)
	}
	s := &server{interp: interp, w: w, log: log, start: start}
	r := ipc.NewReader(in)
	for {
		m, err := r.ReadMessage()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if m.ID != 0 || m.Kind != 0 {
				// A bad body of a known frame: answer it, keep serving.
				_ = w.WriteMessage(ipc.KindError, m.ID, ipc.Error{Code: codeOf(err), Message: err.Error()})
				continue
			}
			return fmt.Errorf("worker: read request: %w", err)
		}
		if m.Kind == ipc.KindShutdown {
			return nil
		}
		if err := s.handle(ctx, m); err != nil {
			return err
		}
	}
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
	execs  uint64
}

// handle answers one request. It returns an error only when the reply
// cannot be written (the supervisor is gone).
func (s *server) handle(ctx context.Context, m ipc.Message) error {
	reply := func(kind ipc.Kind, body any) error { return s.w.WriteMessage(kind, m.ID, body) }
	fail := func(err error) error {
		code := ipc.CodeInternal
		if errors.Is(err, runtime.ErrDead) || errors.Is(err, runtime.ErrClosed) {
			code = "dead"
		}
		return reply(ipc.KindError, ipc.Error{Code: code, Message: err.Error()})
	}
	switch b := m.Body.(type) {
	case ipc.Initialize:
		if err := s.interp.Set(ctx, "context", b.Context); err != nil {
			return fail(err)
		}
		return reply(ipc.KindInitializeReply, ipc.InitializeReply{})
	case ipc.Execute:
		return s.execute(ctx, m.ID, b.Code)
	case ipc.GetVariable:
		v, found, err := s.interp.Get(ctx, b.Name)
		if err != nil {
			return fail(err)
		}
		return reply(ipc.KindGetVariableReply, ipc.GetVariableReply{Found: found, Value: convert.ToIPC(v)})
	case ipc.SetVariable:
		if err := s.interp.Set(ctx, b.Name, convert.FromIPC(b.Value)); err != nil {
			return fail(err)
		}
		return reply(ipc.KindSetVariableReply, ipc.SetVariableReply{})
	case ipc.Ping:
		return reply(ipc.KindPong, ipc.Pong{})
	case ipc.Stats:
		return reply(ipc.KindStatsReply, ipc.StatsReply{
			RSSBytes:          rss(),
			LinearMemoryBytes: s.interp.MemorySize(),
			Executions:        s.execs,
			UptimeNanos:       int64(time.Since(s.start)),
		})
	}
	return reply(ipc.KindError, ipc.Error{Code: ipc.CodeUnexpected, Message: fmt.Sprintf("the worker does not accept %v requests", m.Kind)})
}

// streamWriter sends what Python writes as Output frames, as it is written.
type streamWriter struct {
	w      *ipc.Writer
	id     uint64
	stream string
	err    error
}

func (sw *streamWriter) Write(p []byte) (int, error) {
	if sw.err == nil {
		sw.err = sw.w.WriteMessage(ipc.KindOutput, sw.id, ipc.Output{Stream: sw.stream, Data: string(p)})
	}
	return len(p), nil
}

func (s *server) execute(ctx context.Context, id uint64, code string) error {
	stdout := &streamWriter{w: s.w, id: id, stream: ipc.StreamStdout}
	stderr := &streamWriter{w: s.w, id: id, stream: ipc.StreamStderr}
	res, err := s.interp.Exec(ctx, code, runtime.Output{Stdout: stdout, Stderr: stderr})
	s.execs++
	if stdout.err != nil {
		return stdout.err
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
