package worker

import (
	"context"
	"errors"
	"fmt"

	"github.com/rlm-sandbox/rlm-sandbox/internal/convert"
	"github.com/rlm-sandbox/rlm-sandbox/ipc"
)

// errSupervisorGone fails bridge calls once the supervisor stopped talking.
var errSupervisorGone = errors.New("the supervisor is gone")

// bridge is the interpreter's runtime.BridgeFunc (a single call).
func (s *server) bridge(ctx context.Context, method string, args []any) (any, error) {
	results, errs := s.ask(ctx, method, [][]any{args}, false)
	return results[0], errs[0]
}

// bridgeBatch is the interpreter's runtime.BatchBridgeFunc: the calls of a
// batch, marked as such (the supervisor runs them concurrently).
func (s *server) bridgeBatch(ctx context.Context, method string, calls [][]any) ([]any, []error) {
	return s.ask(ctx, method, calls, true)
}

// ask sends bridge calls to the supervisor, which runs the host callbacks,
// in one write, and waits for every answer, reading the input itself when
// no other goroutine does (see read.go): the first wait reads them all
// (see readFor).
func (s *server) ask(ctx context.Context, method string, calls [][]any, batch bool) ([]any, []error) {
	results, errs := make([]any, len(calls)), make([]error, len(calls))
	ids := make([]uint64, len(calls))
	chans := make([]chan ipc.Message, len(calls))
	s.mu.Lock()
	for i := range calls {
		s.nextBridge++
		ids[i], chans[i] = s.nextBridge, make(chan ipc.Message, 1)
		s.bridges[ids[i]] = chans[i]
	}
	s.mu.Unlock()
	frames := make([]ipc.BridgeCall, len(calls))
	for i, args := range calls {
		wire := make([]any, len(args))
		for j, a := range args {
			wire[j] = convert.ToIPC(a)
		}
		frames[i] = ipc.BridgeCall{Method: method, Args: wire, Batch: batch}
	}
	if err := s.out.sendAll(ipc.KindBridgeCall, ids, frames); err != nil {
		if errors.Is(err, ipc.ErrFrameTooLarge) {
			err = fmt.Errorf("its arguments take more than the %d MiB a call sends to the host in one message (%w)", ipc.MaxFrameSize>>20, err)
		}
		for i, id := range ids {
			s.takeBridge(id)
			errs[i] = fmt.Errorf("send %s call: %w", method, err)
		}
		return results, errs
	}
	for i, id := range ids {
		m, err := s.await(ctx, id, chans[i])
		if err != nil {
			for j, id := range ids[i:] {
				s.takeBridge(id)
				errs[i+j] = err
			}
			return results, errs
		}
		results[i], errs[i] = answer(method, m)
	}
	return results, errs
}

// answer is the result of a bridge call answered by m.
func answer(method string, m ipc.Message) (any, error) {
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
}

// await returns the answer to the bridge call id, which another reader
// sends on ch, or which it reads itself when it can take the reading.
func (s *server) await(ctx context.Context, id uint64, ch chan ipc.Message) (ipc.Message, error) {
	told := false // the reading was free
	for {
		select {
		case m := <-ch:
			if told {
				s.passTurn() // to another call waiting for its answer
			}
			return m, nil
		default:
		}
		if s.takeReading() {
			return s.readFor(id, ch)
		}
		told = false
		select {
		case m := <-ch:
			return m, nil
		case <-s.turn:
			told = true
		case <-ctx.Done():
			return ipc.Message{}, ctx.Err()
		case <-s.gone:
			return ipc.Message{}, errSupervisorGone
		}
	}
}

// readFor reads frames, holding the reading, until the answer to the
// bridge call id, and on until no other call waits for one: the calls of
// a batch are answered by one reader (the interpreter waits for all of
// them anyway), not each by the next. It cannot be abandoned while it
// waits in a read: a call whose execution was interrupted meanwhile reads
// on until a frame comes, its own late answer (then it gives the reading
// up) or the next request (which a new loop serves, with the reading).
func (s *server) readFor(id uint64, ch chan ipc.Message) (ipc.Message, error) {
	var own ipc.Message
	got := false
	select {
	case own = <-ch: // sent before this call took the reading
		got = true
	default:
	}
	for !got || s.waiting() {
		// An instant answer comes back within microseconds: poll for it
		// rather than let the processor go idle (see package spin).
		s.poll.Await(s.rd)
		m, err := s.rd.ReadMessage()
		if !got && err == nil && (m.Kind == ipc.KindBridgeReply || m.Kind == ipc.KindError) && m.ID == id {
			s.takeBridge(id)
			own, got = m, true
			continue
		}
		if s.dispatch(m, err) {
			continue
		}
		if fatal(m, err) {
			// The request loop finds the same error and ends Serve.
			s.inputEnded()
			s.leaveReading()
			if got {
				return own, nil
			}
			return ipc.Message{}, errSupervisorGone
		}
		// A request: the execution that made this call is over.
		go func() {
			if s.serve(m, err) {
				s.loop(true)
			}
		}()
		if got {
			return own, nil
		}
		return ipc.Message{}, errSupervisorGone
	}
	s.leaveReading()
	return own, nil
}

// waiting reports whether a bridge call waits for its answer.
func (s *server) waiting() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bridges) > 0
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
