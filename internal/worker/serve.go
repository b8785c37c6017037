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
	"unsafe"

	"github.com/rlm-sandbox/rlm-sandbox/internal/convert"
	"github.com/rlm-sandbox/rlm-sandbox/internal/harden"
	"github.com/rlm-sandbox/rlm-sandbox/internal/spin"
	"github.com/rlm-sandbox/rlm-sandbox/ipc"
	"github.com/rlm-sandbox/rlm-sandbox/runtime"
)

// Options configure Serve.
type Options struct {
	Runtime runtime.Config
	Log     *slog.Logger
	// IdleSpin is how long the worker polls its input for the next
	// request after serving one, before it blocks (see package spin). Default:
	// DefaultIdleSpin; negative: none.
	IdleSpin time.Duration
	// Attention receives a value when the supervisor has sent a request
	// that must be answered while code runs (AttentionSignal, delivered by
	// signal.Notify): while a request is served, nothing reads the input
	// unless the code makes a bridge call, or until this says to.
	Attention <-chan os.Signal
	// Ready, when set, is called once the hello is sent.
	Ready func()
	// StageFile is the staging file the supervisor shares (see
	// ipc.Stage.File), or nil.
	StageFile *os.File
	// CodeReturned, when set, is called with an Execute's id as its code
	// returns, before the output still buffered and the reply are sent
	// (ipc.Page.MarkReturned).
	CodeReturned func(id uint64)
	// Harden, when set, locks the process down once the interpreter is
	// loaded, before the hello is sent and any request read; its report
	// goes in the hello. (harden.Apply; unset in a process that must not
	// be locked down.)
	Harden func() harden.Report
}

// Serve boots an interpreter, sends the hello, and answers requests read
// from in until in ends or a Shutdown arrives. Requests are served one at a
// time, in order; while one is served, frames are read by its code's
// bridge calls waiting for their answers, or once Attention says so (a
// Stats request is waiting); see loop.
func Serve(ctx context.Context, in io.Reader, out io.Writer, opts Options) error {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	w := ipc.NewWriter(out)
	s := &server{ctx: ctx, w: w, out: &outbox{w: w}, log: log, rd: ipc.NewReader(in), poll: newPoller(in, opts.IdleSpin),
		bridges: map[uint64]chan ipc.Message{}, turn: make(chan struct{}, 1), gone: make(chan struct{}),
		quit: make(chan struct{}), done: make(chan error, 1), stageFile: opts.StageFile, codeReturned: opts.CodeReturned}
	rcfg := opts.Runtime
	rcfg.Bridge = s.bridge
	// s.bridge returns when the supervisor answers, which it does at once
	// when it interrupts the execution (see supervisor's interrupt).
	rcfg.BridgeInline = true
	rcfg.BridgeBatch = s.bridgeBatch
	interp, err := runtime.New(ctx, rcfg)
	if err != nil {
		code := ipc.CodeInternal
		if errors.Is(err, runtime.ErrDistribution) {
			code = CodeDistribution
		}
		_ = w.WriteMessage(ipc.KindError, 0, ipc.Error{Code: code, Message: err.Error()})
		_ = w.Flush()
		return err
	}
	defer interp.Close()
	s.interp = interp
	s.start = time.Now()
	hello := ipc.Hello{
		ProtocolVersion: ipc.ProtocolVersion,
		PythonVersion:   interp.PythonVersion(),
		PyodideVersion:  runtime.PyodideVersion,
		PID:             os.Getpid(),
	}
	if opts.Harden != nil {
		// What the worker reads later is opened now: no file can be
		// opened once locked down.
		openStatm()
		_ = time.Now().Local() // loads the local time zone
		rep := opts.Harden()
		hello.Hardened, hello.Refused = strings.Join(rep.Applied, ","), strings.Join(rep.Refused, "\n")
		if len(rep.Refused) > 0 {
			log.Warn("lock-down incomplete", "applied", rep.Applied, "refused", rep.Refused)
		}
		if escapeProbe != nil {
			escapeProbe(log)
		}
	}
	if err := w.WriteMessage(ipc.KindHello, 0, hello); err != nil {
		return fmt.Errorf("worker: send hello: %w", err)
	}
	if opts.Ready != nil {
		opts.Ready()
	}
	if opts.Attention != nil {
		go func() {
			for {
				select {
				case <-opts.Attention:
					s.readWhileServing()
				case <-s.quit:
					return
				}
			}
		}()
	}
	s.reading = true
	go s.loop(false)
	err = <-s.done
	close(s.quit)
	if ferr := w.Flush(); err == nil && ferr != nil {
		err = ferr
	}
	return err
}

// CodeDistribution is the code of the Error the worker sends instead of its
// Hello when Pyodide cannot be loaded (runtime.ErrDistribution).
const CodeDistribution = "distribution"

// finish ends Serve with err (the first call counts).
func (s *server) finish(err error) {
	select {
	case s.done <- err:
	default:
	}
}

func codeOf(err error) string {
	if errors.Is(err, ipc.ErrUnknownKind) {
		return ipc.CodeUnknownKind
	}
	return ipc.CodeMalformed
}

type server struct {
	ctx    context.Context
	interp *runtime.Interpreter
	w      *ipc.Writer
	out    *outbox // the frames of the Execute being served
	log    *slog.Logger
	rd     *ipc.Reader // read by the holder of the reading (see loop)
	poll   spin.Poller
	start  time.Time
	// serving is held while a request is served.
	serving sync.Mutex
	stage   []byte // what Stage frames carried so far
	// stageFree releases stage's memory, mapped apart (memory.go).
	stageFree func()
	// stageErr is why the staged value cannot be used.
	stageErr error
	// stageFile is Options.StageFile.
	stageFile *os.File
	// codeReturned is Options.CodeReturned.
	codeReturned func(id uint64)

	mu         sync.Mutex
	reading    bool // a goroutine holds the reading
	busy       bool // a request is being served
	nextBridge uint64
	bridges    map[uint64]chan ipc.Message // bridge calls waiting for their reply
	turn       chan struct{}               // signalled when the reading is left free
	goneOnce   sync.Once
	gone       chan struct{} // closed when the input ends
	quit       chan struct{} // closed when Serve returns
	done       chan error    // receives the error Serve returns
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
func (s *server) handle(m ipc.Message) error {
	ctx := s.ctx
	reply := func(kind ipc.Kind, body any) error {
		err := s.w.WriteMessage(kind, m.ID, body)
		if errors.Is(err, ipc.ErrUnsupportedValue) || errors.Is(err, ipc.ErrFrameTooLarge) || errors.Is(err, ipc.ErrTooDeep) {
			// Nothing was written: the reply cannot be encoded (a value
			// too large for a frame, say). Say so instead.
			code := ipc.CodeInternal
			if errors.Is(err, ipc.ErrFrameTooLarge) {
				code = ipc.CodeTooLarge
			}
			return s.w.WriteMessage(ipc.KindError, m.ID, ipc.Error{Code: code, Message: "the reply cannot be sent: " + err.Error()})
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
		if b.File {
			s.dropStage(nil)
			s.stage, s.stageFree, s.stageErr = mapStage(s.stageFile, b.Size)
			return nil
		}
		if s.stage == nil && s.stageErr == nil && b.Size > int64(len(b.Data)) && b.Size <= maxStage {
			s.stage, s.stageFree = stageBuffer(b.Size)
		}
		switch {
		case s.stageErr != nil:
		case int64(len(s.stage))+int64(len(b.Data)) > maxStage:
			s.dropStage(fmt.Errorf("the value is larger than %d GiB", maxStage>>30))
		case s.stageFree != nil && len(s.stage)+len(b.Data) > cap(s.stage):
			s.dropStage(fmt.Errorf("the value is larger than the %d bytes announced", cap(s.stage)))
		default:
			s.stage = append(s.stage, b.Data...)
		}
		return nil
	case ipc.Initialize:
		v, release, err := s.value(b.Context, b.Staged)
		defer release() // after the reply
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
		v, release, err := s.value(b.Value, b.Staged)
		defer release() // after the reply
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

// dropStage abandons the value being staged, for err.
func (s *server) dropStage(err error) {
	if s.stageFree != nil {
		s.stageFree()
	}
	s.stage, s.stageFree, s.stageErr = nil, nil, err
}

// maxStage bounds a staged value: the guest's memory is at most 4 GiB.
const maxStage = 4 << 30

// value is the Go value of an Initialize or SetVariable: the message's
// own, or the one the Stage frames before it carried (consuming them).
//
// release is to be called once the value is in the interpreter.
func (s *server) value(v any, staged string) (val any, release func(), err error) {
	stage, stageErr := s.stage, s.stageErr
	release = s.stageFree
	s.stage, s.stageErr, s.stageFree = nil, nil, nil
	if release == nil {
		release = func() {}
	}
	val, err = s.stagedValue(v, staged, stage, stageErr)
	return val, release, err
}

func (s *server) stagedValue(v any, staged string, stage []byte, stageErr error) (any, error) {
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

func (s *server) execute(ctx context.Context, id uint64, b ipc.Execute) error {
	s.out.begin(id)
	out := runtime.Output{Stdout: streamWriter{s.out, ipc.StreamStdout}, Stderr: streamWriter{s.out, ipc.StreamStderr}}
	var res *runtime.Result
	var err error
	if b.Interactive {
		res, err = s.interp.ExecInteractive(ctx, b.Code, out)
	} else {
		res, err = s.interp.Exec(ctx, b.Code, out)
	}
	if s.codeReturned != nil {
		s.codeReturned(id)
	}
	// The output not sent yet goes out with the reply, in one write.
	if err != nil {
		if errors.Is(err, runtime.ErrInterrupted) {
			return s.out.send(ipc.KindResult, id, ipc.Result{Error: "KeyboardInterrupt", ErrorType: "KeyboardInterrupt"})
		}
		code := ipc.CodeInternal
		if errors.Is(err, runtime.ErrDead) {
			code = "dead"
		}
		return s.out.send(ipc.KindError, id, ipc.Error{Code: code, Message: err.Error()})
	}
	r := ipc.Result{DurationNanos: int64(res.Duration)}
	if e := res.Error; e != nil {
		r.Error, r.ErrorType, r.Traceback = e.Error(), e.Type, e.Traceback
		if x := e.Exit; x != nil {
			r.SystemExit, r.ExitStatus, r.ExitStderr = true, x.Status, x.Stderr
		}
	}
	return s.out.send(ipc.KindResult, id, r)
}

// escapeProbe, set only in test builds (build tag rlmescape), tries to
// get out of the locked-down process and logs how each attempt failed.
var escapeProbe func(*slog.Logger)

// statm is /proc/self/statm, opened before the lock-down (rss).
var (
	statmOnce sync.Once
	statm     *os.File
)

func openStatm() {
	statmOnce.Do(func() { statm, _ = os.Open("/proc/self/statm") })
}

// rss reads the process's resident set size from /proc (0 elsewhere).
func rss() uint64 {
	openStatm()
	if statm == nil {
		return 0
	}
	var buf [128]byte
	n, err := statm.ReadAt(buf[:], 0)
	if n == 0 && err != nil {
		return 0
	}
	var size, res uint64
	if _, err := fmt.Sscan(strings.TrimSpace(string(buf[:n])), &size, &res); err != nil {
		return 0
	}
	return res * uint64(os.Getpagesize())
}
