package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

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

// readHello reads the worker's first frame, within StartTimeout.
func (s *workerSandbox) readHello(ctx context.Context) (ipc.Message, error) {
	_ = s.stdout.SetReadDeadline(time.Now().Add(s.cfg.StartTimeout))
	stop := context.AfterFunc(ctx, func() { _ = s.stdout.SetReadDeadline(time.Unix(1, 0)) })
	m, err := s.rd.ReadMessage()
	stop()
	_ = s.stdout.SetReadDeadline(time.Time{})
	switch {
	case err == nil:
		return m, nil
	case ctx.Err() != nil:
		s.kill()
		return m, fmt.Errorf("%w: %w", ErrCanceled, ctx.Err())
	case errors.Is(err, os.ErrDeadlineExceeded):
		s.kill()
		return m, fmt.Errorf("%w: rlm-worker did not start within %v", ErrWorkerUnavailable, s.cfg.StartTimeout)
	case errors.Is(err, io.EOF):
		<-s.exited
		s.page.Close()
		s.stdout.Close()
		return m, fmt.Errorf("%w: rlm-worker exited during start-up (%v); see the log for its output", ErrWorkerUnavailable, s.exit)
	}
	s.kill()
	return m, fmt.Errorf("%w: %w: first frame: %v", ErrWorkerUnavailable, ErrProtocol, err)
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
	told := false // the reading was free
	for {
		select {
		case m, ok := <-ch:
			if told {
				s.passTurn() // to another caller waiting for its reply
			}
			return m, ok, nil
		default:
		}
		if s.startReading() {
			m, ok, err = s.readFor(ctx, id, ch, streams)
			s.stopReading()
			return m, ok, err
		}
		told = false
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

func (s *workerSandbox) startReading() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
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
	for {
		m, err := s.rd.ReadMessage()
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
			s.mu.Lock()
			o := s.outputs[m.ID]
			s.mu.Unlock()
			if o != nil {
				o.write(m.Body.(ipc.Output))
			}
		case m.Kind == ipc.KindBridgeCall:
			r := s.running.Load()
			s.mu.Lock()
			s.asked[m.ID] = struct{}{}
			s.mu.Unlock()
			if r != nil && r.stopped() && s.answered(m.ID) {
				// Interrupted before the call was seen: the worker waits
				// for an answer, not for the signal.
				s.answerInterrupted(m.ID)
			}
			go s.answerBridge(r, m.ID, m.Body.(ipc.BridgeCall))
		case m.ID == id:
			return m, true, nil
		default:
			s.mu.Lock()
			c, ok := s.pending[m.ID]
			delete(s.pending, m.ID)
			s.mu.Unlock()
			if ok {
				c <- m
			}
		}
	}
}

// readFailed ends the reading when the frames end or cannot be read (a
// worker that sends a corrupt frame is killed), once the process has been
// reaped: the callers then learn how it ended.
func (s *workerSandbox) readFailed(err error) {
	if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
		s.cfg.Logger.Error("corrupt frame from worker; killing it", "err", err)
		s.markDead(fmt.Errorf("%w: %w: %v", ErrDead, ErrProtocol, err))
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
