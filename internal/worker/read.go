package worker

import (
	"errors"
	"fmt"
	"io"

	"github.com/rlm-sandbox/rlm-sandbox/ipc"
)

// The input is read by one goroutine at a time, the holder of the reading
// (s.reading): the request loop between requests; while a request is
// served, a bridge call waiting for its answer, or a loop started because
// Attention fired. So a request is served by the goroutine that read it,
// and a bridge call reads its own answer: neither costs a hand-off between
// goroutines. Nothing reads while a request is served otherwise, because
// anything that wakes a thread while code runs slows the code (a timer
// per request to start a reader after a while cost 10 µs of the 130 µs of
// a short Execute, and 100 µs of its 99th percentile).

// loop reads frames and serves the requests among them, holding the
// reading. It leaves the reading while it serves a request, and ends when
// it cannot take it back (another goroutine reads on and serves what
// follows). Requests are served one at a time and in order: one goroutine
// reads at a time, and it takes s.serving before serving.
//
// warm says the loop has just served a request: it polls for the next one
// (see package spin) before it blocks.
func (s *server) loop(warm bool) {
	for {
		if warm {
			s.poll.Await(s.rd)
		}
		m, err := s.rd.ReadMessage()
		if s.dispatch(m, err) {
			// Answered at once (Ping, Stats): the supervisor's next
			// frame is as near as after a request.
			warm = m.Kind == ipc.KindPing || m.Kind == ipc.KindStats
			continue
		}
		if !s.serve(m, err) {
			return
		}
		warm = true
	}
}

// dispatch deals at once with a frame that is not a request: a bridge
// call's answer, Ping, Stats. It reports whether m was one.
func (s *server) dispatch(m ipc.Message, err error) bool {
	if err != nil {
		return false
	}
	switch m.Kind {
	case ipc.KindPing, ipc.KindStats:
		s.answerNow(m)
		return true
	case ipc.KindBridgeReply, ipc.KindError:
		if ch := s.takeBridge(m.ID); ch != nil {
			ch <- m
			return true
		}
		// A BridgeReply nobody waits for answers a call abandoned on an
		// interrupt; an Error is a request's.
		return m.Kind == ipc.KindBridgeReply
	}
	return false
}

// fatal reports whether err ends the input: it ended, or cannot be read.
func fatal(m ipc.Message, err error) bool { return err != nil && m.ID == 0 && m.Kind == 0 }

// serve serves the request m (err is why it could not be decoded), for a
// caller that holds the reading, and reports whether the caller holds it
// again: false when Serve ends, or another goroutine reads on.
func (s *server) serve(m ipc.Message, err error) bool {
	if fatal(m, err) {
		// Fail the bridge calls waiting for answers, and end once the
		// request in progress has.
		s.inputEnded()
		s.serving.Lock()
		defer s.serving.Unlock()
		if errors.Is(err, io.EOF) {
			s.finish(nil)
		} else {
			s.finish(fmt.Errorf("worker: read request: %w", err))
		}
		return false
	}
	s.serving.Lock()
	select {
	case <-s.quit:
		s.serving.Unlock()
		return false
	default:
	}
	if err != nil {
		// A bad body of a known frame: answer it, keep serving.
		_ = s.w.WriteMessage(ipc.KindError, m.ID, ipc.Error{Code: codeOf(err), Message: err.Error()})
		s.serving.Unlock()
		return true
	}
	if m.Kind == ipc.KindShutdown {
		s.finish(nil)
		s.serving.Unlock()
		return false
	}
	s.mu.Lock()
	s.busy, s.reading = true, false
	s.mu.Unlock()
	herr := s.handle(m)
	s.mu.Lock()
	s.busy = false
	again := !s.reading
	s.reading = true
	s.mu.Unlock()
	s.serving.Unlock()
	if herr != nil {
		s.finish(herr)
		return false
	}
	return again
}

// readWhileServing starts a loop to read while a request is served, unless
// a goroutine reads already.
func (s *server) readWhileServing() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.reading {
		s.reading = true
		go s.loop(false)
	}
}

// takeReading takes the reading if nobody holds it.
func (s *server) takeReading() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reading {
		return false
	}
	s.reading = true
	return true
}

// leaveReading gives up the reading: to a new loop when no request is
// being served (nobody else would read the next one), else to whichever
// goroutine takes it (one waiting for it is told on s.turn).
func (s *server) leaveReading() {
	s.mu.Lock()
	if !s.busy {
		s.mu.Unlock()
		go s.loop(false)
		return
	}
	s.reading = false
	s.mu.Unlock()
	s.passTurn()
}

// passTurn tells a goroutine waiting for the reading that it is free: a
// waiter that was told so but needs it no more passes it on.
func (s *server) passTurn() {
	select {
	case s.turn <- struct{}{}:
	default:
	}
}

// inputEnded fails the bridge calls waiting for answers.
func (s *server) inputEnded() { s.goneOnce.Do(func() { close(s.gone) }) }
