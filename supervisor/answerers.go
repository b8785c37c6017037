package supervisor

import (
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/ipc"
)

// answerers runs the calls of a batch (llm_query_batched, rlm_query_batched),
// each on a goroutine of its own, since their callbacks must run
// concurrently. A goroutine that has answered a call waits a while for the
// next one rather than end: a new goroutine starts with a small stack, and
// answering a call (the callback, then encoding and writing the answer)
// grew it, which in 100-call batches cost a fifth of the supervisor's
// processor time (runtime.copystack and the stack maps it reads).
type answerers struct {
	tasks chan answerTask // unbuffered: a send succeeds only to an idle answerer
	quit  <-chan struct{} // closed when the worker has exited
}

type answerTask struct {
	r  *run
	id uint64
	c  ipc.BridgeCall
}

// answererIdle is how long an answerer waits for another call before it ends.
const answererIdle = 2 * time.Second

func newAnswerers(quit <-chan struct{}) *answerers {
	return &answerers{tasks: make(chan answerTask), quit: quit}
}

// run answers t on an idle answerer, or on a new one if none is idle.
func (a *answerers) run(s *workerSandbox, t answerTask) {
	select {
	case a.tasks <- t:
	default:
		go a.serve(s, t)
	}
}

func (a *answerers) serve(s *workerSandbox, t answerTask) {
	idle := time.NewTimer(answererIdle)
	defer idle.Stop()
	for {
		s.answerBridge(t.r, t.id, t.c)
		idle.Reset(answererIdle)
		select {
		case t = <-a.tasks:
		case <-idle.C:
			return
		case <-a.quit:
			return
		}
	}
}
