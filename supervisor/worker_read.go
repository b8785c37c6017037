package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/internal/spin"
	"github.com/rlm-sandbox/rlm-sandbox/ipc"
)

// The worker's frames are read by the callers that wait for a reply, one
// at a time: the others wait for the reader to hand them theirs, or to
// leave the reading to them (s.turn). A caller thus reads its own reply,
// and deals with the frames before it (an execution's output and bridge
// calls), without a hand-off to another goroutine, which costs tens of
// microseconds when the processor it wakes is idle. Nothing reads while
// nobody waits: every frame the worker sends is awaited by some caller,
// and the reaper notices when the process ends.

// compileStartTimeout is how long a worker has to start once it says it
// compiles Pyodide (the first run on a machine, or after an upgrade):
// about 10 s on an idle machine of two cores, over a minute on a busy one,
// and a compile cut short leaves nothing in the cache, so that every
// later start would compile again, and fail again.
const compileStartTimeout = 10 * time.Minute

// helloWait is the read deadline of the worker's first frame, which
// pumpLogs pushes back when the worker says it compiles.
type helloWait struct {
	mu       sync.Mutex
	waiting  bool // readHello is reading
	stopped  bool // canceled: the deadline is in the past for good
	compiled bool // the deadline was pushed back
}

// readHello reads the worker's first frame, within StartTimeout (or
// compileStartTimeout from when the worker says it compiles Pyodide).
func (s *workerSandbox) readHello(ctx context.Context) (ipc.Message, error) {
	hw := &s.hello
	hw.mu.Lock()
	hw.waiting = true
	_ = s.stdout.SetReadDeadline(time.Now().Add(s.cfg.StartTimeout))
	hw.mu.Unlock()
	stop := context.AfterFunc(ctx, func() {
		hw.mu.Lock()
		hw.stopped = true
		_ = s.stdout.SetReadDeadline(time.Unix(1, 0))
		hw.mu.Unlock()
	})
	m, err := s.rd.ReadMessage()
	stop()
	hw.mu.Lock()
	hw.waiting = false
	_ = s.stdout.SetReadDeadline(time.Time{})
	compiled := hw.compiled
	hw.mu.Unlock()
	switch {
	case err == nil:
		return m, nil
	case ctx.Err() != nil:
		s.kill()
		return m, canceledStart{context.Cause(ctx)}
	case errors.Is(err, os.ErrDeadlineExceeded) && compiled:
		s.kill()
		return m, fmt.Errorf("%w: rlm-worker did not compile Pyodide within %v", ErrWorkerUnavailable, max(compileStartTimeout, s.cfg.StartTimeout))
	case errors.Is(err, os.ErrDeadlineExceeded):
		s.kill()
		return m, fmt.Errorf("%w: rlm-worker did not start within %v", ErrWorkerUnavailable, s.cfg.StartTimeout)
	case errors.Is(err, io.EOF):
		<-s.exited
		s.page.Close()
		s.stdout.Close()
		output := "its output went to Config.Logger"
		if tail := s.logTail.String(); tail != "" {
			output = "it wrote " + tail + " (all of it went to Config.Logger)"
		}
		if s.exit == nil {
			return m, fmt.Errorf("%w: rlm-worker exited during start-up with status 0; %s", ErrWorkerUnavailable, output)
		}
		return m, fmt.Errorf("%w: rlm-worker exited during start-up (%w); %s", ErrWorkerUnavailable, s.exit, output)
	}
	s.kill()
	return m, fmt.Errorf("%w: %w: first frame: %v (a worker writes only the protocol on its stdout: "+
		"is it an rlm-worker of this build, and does no init function of the program print?)", ErrWorkerUnavailable, ErrProtocol, err)
}

// await returns the reply to request id, reading the frames itself when
// no other caller does; another reader sends it on ch. ok is false when
// the worker is gone. A non-nil ctx can end the wait early, with its
// error. streams receives the output of id when the request is an
// Execute.
func (s *workerSandbox) await(ctx context.Context, id uint64, ch chan ipc.Message, streams *execStreams) (m ipc.Message, ok bool, err error) {
	var done <-chan struct{}
	if ctx != nil {
		done = ctx.Done()
	}
	told := false   // the reading was free
	handed := false // this caller handed the reading to a bridge reader
	for {
		select {
		case m, ok := <-ch:
			if told {
				s.passTurn() // to another caller waiting for its reply
			}
			return m, ok, nil
		default:
		}
		// A caller that has just handed the reading to a bridge reader
		// leaves it the reading: the bridge reader answers the call and
		// reads on, to the next call or to this caller's reply, on one
		// goroutine (see bridgeReader). It comes back when told the
		// reading is free again: when the bridge reader gives it up, or
		// interrupt takes it from a callback. (When the worker dies, the
		// reaper fails the pending requests: ch is closed.)
		if !handed && s.startReading() {
			m, ok, err = s.readFor(ctx, id, ch, streams)
			if err == errHandedOff {
				handed = true
				continue
			}
			s.stopReading()
			return m, ok, err
		}
		told, handed = false, false
		select {
		case m, ok := <-ch:
			return m, ok, nil
		case <-s.turn:
			told = true
		case <-done:
			return ipc.Message{}, false, ctx.Err()
		}
	}
}

// startReading takes the reading if nobody holds it, or if a bridge reader
// holds it while it runs a callback (which may take seconds: the others'
// replies must not wait for it).
func (s *workerSandbox) startReading() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inCallback {
		s.readerGen++
		s.inCallback = false
		return true
	}
	if s.reading {
		return false
	}
	s.reading = true
	return true
}

func (s *workerSandbox) stopReading() {
	s.mu.Lock()
	s.reading = false
	s.mu.Unlock()
	s.passTurn()
}

// passTurn tells a caller waiting for the reading that it is free: a
// caller that was told so but needs it no more passes it on.
func (s *workerSandbox) passTurn() {
	select {
	case s.turn <- struct{}{}:
	default:
	}
}

// readFor reads frames, routing those of other requests, until the reply
// to id.
func (s *workerSandbox) readFor(ctx context.Context, id uint64, ch chan ipc.Message, streams *execStreams) (ipc.Message, bool, error) {
	select {
	case m, ok := <-ch: // routed before this caller took the reading
		return m, ok, nil
	default:
	}
	if ctx != nil && ctx.Done() != nil {
		// A read in progress ends at its deadline, and the frame it was
		// reading is kept for the next reader.
		stop := context.AfterFunc(ctx, func() { _ = s.stdout.SetReadDeadline(time.Unix(1, 0)) })
		defer stop()
	}
	for m, err := s.readFirst(&s.replyEst); ; m, err = s.rd.ReadMessage() {
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				if ctx != nil && ctx.Err() != nil {
					return ipc.Message{}, false, ctx.Err()
				}
				// Left by a reader whose context ended: not this one's.
				_ = s.stdout.SetReadDeadline(time.Time{})
				continue
			}
			s.readFailed(err)
			return ipc.Message{}, false, nil
		}
		switch {
		case m.Kind == ipc.KindOutput && streams != nil && m.ID == id:
			streams.write(m.Body.(ipc.Output))
		case m.Kind == ipc.KindOutput:
			s.routeOutput(m)
		case m.Kind == ipc.KindBridgeCall:
			if s.bridgeCall(m) {
				return ipc.Message{}, false, errHandedOff
			}
		case m.ID == id:
			return m, true, nil
		default:
			s.routeReply(m)
		}
	}
}

// replySpin is how long a caller that has just written to the worker
// polls for the worker's next frame before it blocks in a read: the reply
// to a short request, or the next llm_query of a loop that has just had
// its answer, comes within tens of microseconds. A blocked reader is woken
// by a processor that was idle: on a quiet virtual machine that doubled an
// llm_query round trip.
//
// The poll lasts longer, up to maxReplySpin, for frames that have lately
// come later than replySpin but within half maxReplySpin (an Execute of a
// short cell: 120–150 µs on the 2-core Zen 1 VM), and no longer for frames
// that come later still (a long execution, or a loaded machine, where the
// poll would only hold a processor others need): see spin.Estimate. The
// caller of a request and the bridge reader waiting for the next call
// keep an estimate each (replyEst, callEst).
const (
	replySpin    = 100 * time.Microsecond
	maxReplySpin = 500 * time.Microsecond
)

// readFirst reads the worker's next frame, polling for it as long as est
// says, and records in est how long it took to come.
func (s *workerSandbox) readFirst(est *spin.Estimate) (ipc.Message, error) {
	start := time.Now()
	s.poll.AwaitFor(s.rd, est.Poll(replySpin, maxReplySpin))
	m, err := s.rd.ReadMessage()
	if err == nil {
		est.Observe(time.Since(start))
	}
	return m, err
}

// routeOutput adds output to the streams of its request, if it has some.
func (s *workerSandbox) routeOutput(m ipc.Message) {
	s.mu.Lock()
	o := s.outputs[m.ID]
	s.mu.Unlock()
	if o != nil {
		o.write(m.Body.(ipc.Output))
	}
}

// routeReply hands a reply to the caller waiting for it, and reports
// whether one was.
func (s *workerSandbox) routeReply(m ipc.Message) bool {
	s.mu.Lock()
	c, ok := s.pending[m.ID]
	delete(s.pending, m.ID)
	s.mu.Unlock()
	if ok {
		c <- m
	}
	return ok
}

// errHandedOff says that readFor gave the reading to a bridge reader.
var errHandedOff = errors.New("the reading went to a bridge reader")

// A bridge call runs on a goroutine other than the reader's: the reader
// may be the caller of Execute, which must return when the execution is
// stopped, whatever the callback does. The calls of a batch each get a
// goroutine (they run concurrently). A single call goes to a bridge
// reader: a goroutine that takes the reading over, runs the call, and
// reads on, running the next single call itself, until it hands a reply
// to its caller. An instant answer thus costs no hand-off between
// goroutines (the reader's wake-up of another thread cost about half of a
// worker's llm_query round trip). When the execution is stopped while the
// bridge reader runs a callback, interrupt takes the reading from it (see
// takeReadingBack): a callback that ignores its context cannot keep the
// execution's result from being read.

// bridgeCall deals with the bridge call m for the reader, and reports
// whether it handed the reading to a bridge reader.
func (s *workerSandbox) bridgeCall(m ipc.Message) bool {
	c := m.Body.(ipc.BridgeCall)
	r := s.running.Load()
	single := !c.Batch && r != nil
	gen := s.ask(m.ID, single)
	if !single {
		s.spawnAnswer(r, m.ID, c)
		return false
	}
	go s.bridgeReader(r, gen, m.ID, c)
	return true
}

// ask records the bridge call id as asked (see interrupt) and, for a call
// a bridge reader runs, that the reading is in a callback; it returns the
// generation of the reading.
func (s *workerSandbox) ask(id uint64, single bool) (gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked[id] = struct{}{}
	if single {
		s.inCallback = true
	}
	return s.readerGen
}

// spawnAnswer runs the bridge call id (asked already) of the run r on a
// goroutine of its own (see answerers).
func (s *workerSandbox) spawnAnswer(r *run, id uint64, c ipc.BridgeCall) {
	if r != nil && r.stopped() && s.answered(id) {
		// Interrupted before the call was seen: the worker waits for an
		// answer, not for the signal.
		s.answerInterrupted(id)
	}
	s.answerers.run(s, answerTask{r: r, id: id, c: c})
}

// bridgeReader runs the single bridge call id of the run r, holding the
// reading (generation gen), and reads on (see bridgeCall).
func (s *workerSandbox) bridgeReader(r *run, gen, id uint64, c ipc.BridgeCall) {
	for {
		if r.stopped() {
			// Stopped before interrupt could see the call: answer it,
			// and give the reading back before the callback runs.
			if s.answered(id) {
				s.answerInterrupted(id)
			}
			s.takeReadingBack(gen)
			s.answerBridge(r, id, c)
			return
		}
		s.answerBridge(r, id, c)
		s.mu.Lock()
		if s.readerGen != gen {
			s.mu.Unlock()
			return // interrupt took the reading back meanwhile
		}
		s.inCallback = false
		s.mu.Unlock()
		var ok bool
		if id, c, ok = s.readOn(r); !ok {
			return
		}
	}
}

// readOn reads frames for a bridge reader until the next single bridge
// call of r, which it returns holding the reading, or until it has routed
// a reply (or the frames end): it then gives the reading up.
func (s *workerSandbox) readOn(r *run) (uint64, ipc.BridgeCall, bool) {
	for m, err := s.readFirst(&s.callEst); ; m, err = s.rd.ReadMessage() {
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				// Left by a reader whose context ended.
				_ = s.stdout.SetReadDeadline(time.Time{})
				continue
			}
			s.readFailed(err)
			s.stopReading()
			return 0, ipc.BridgeCall{}, false
		}
		switch m.Kind {
		case ipc.KindOutput:
			s.routeOutput(m)
		case ipc.KindBridgeCall:
			c := m.Body.(ipc.BridgeCall)
			r2 := s.running.Load()
			single := !c.Batch && r2 == r
			s.ask(m.ID, single)
			if !single {
				s.spawnAnswer(r2, m.ID, c)
				continue
			}
			return m.ID, c, true
		default:
			s.routeReply(m)
			s.stopReading()
			return 0, ipc.BridgeCall{}, false
		}
	}
}

// takeReadingBack ends a bridge reader's hold on the reading while it runs
// a callback, if it holds it still (generation gen), and lets a waiting
// caller read.
func (s *workerSandbox) takeReadingBack(gen uint64) {
	s.mu.Lock()
	if s.readerGen != gen || !s.inCallback {
		s.mu.Unlock()
		return
	}
	s.readerGen++
	s.inCallback = false
	s.reading = false
	s.mu.Unlock()
	s.passTurn()
}

// readFailed ends the reading when the frames end or cannot be read (a
// worker that sends a corrupt frame is killed), once the process has been
// reaped: the callers then learn how it ended.
func (s *workerSandbox) readFailed(err error) {
	// The output ended, between frames or inside one (a worker killed
	// while it wrote a large reply: that was taken for a corrupt frame,
	// ErrProtocol, and the exit status lost): the worker's exit says why.
	ended := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, os.ErrClosed)
	if !ended {
		s.cfg.Logger.Error("corrupt frame from worker; killing it", "err", err)
		s.markDead(fmt.Errorf("%w: %w: %v", ErrDead, ErrProtocol, err))
		s.killing.Store(true)
		_ = s.cmd.Process.Kill()
	}
	<-s.exited
}

// write adds a chunk of output to its stream.
func (st *execStreams) write(o ipc.Output) {
	if o.Stream == ipc.StreamStderr {
		st.stderr.WriteString(o.Data)
	} else {
		st.stdout.WriteString(o.Data)
	}
}

// compiling pushes the first frame's deadline back: the worker compiles
// Pyodide.
func (s *workerSandbox) compiling() {
	hw := &s.hello
	hw.mu.Lock()
	defer hw.mu.Unlock()
	if hw.waiting && !hw.stopped && !hw.compiled {
		hw.compiled = true
		_ = s.stdout.SetReadDeadline(time.Now().Add(max(compileStartTimeout, s.cfg.StartTimeout)))
	}
}
