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

// bridge is the interpreter's runtime.BridgeFunc: it asks the supervisor,
// which runs the host callback, and waits for the answer.
func (s *server) bridge(ctx context.Context, method string, args []any) (any, error) {
	wire := make([]any, len(args))
	for i, a := range args {
		wire[i] = convert.ToIPC(a)
	}
	s.handOff() // the reply must be read while the code waits for it
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
	if err := s.out.send(ipc.KindBridgeCall, id, ipc.BridgeCall{Method: method, Args: wire}); err != nil {
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
