package supervisor

import (
	"sync"
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
//
// An execution's calls have at most MaxBridgeConcurrency answerers (its
// callbacks run no more at once); the others wait in a queue of the
// execution's, and an answerer takes the next of them when it is done.
// A batch of a million calls started a goroutine each, 5 KB of the
// supervisor's memory per call, waiting for a slot. (The queue is the
// execution's own: callbacks of an earlier one that ignore their context
// hold up none of a later one's calls.)
type answerers struct {
	tasks chan answerTask // unbuffered: a send succeeds only to an idle answerer
	quit  <-chan struct{} // closed when the worker has exited
	max   int             // Config.MaxBridgeConcurrency

	mu     sync.Mutex
	busy   map[*run]int          // answerers at work on each execution's calls
	queued map[*run][]answerTask // each execution's calls waiting for one
}

type answerTask struct {
	r  *run
	id uint64
	c  ipc.BridgeCall
}

// answererIdle is how long an answerer waits for another call before it ends.
const answererIdle = 2 * time.Second

func newAnswerers(quit <-chan struct{}, max int) *answerers {
	if max <= 0 {
		max = DefaultMaxBridgeConcurrency
	}
	return &answerers{tasks: make(chan answerTask), quit: quit, max: max,
		busy: map[*run]int{}, queued: map[*run][]answerTask{}}
}

// run answers t on an idle answerer, or on a new one if none is idle, or
// queues it when its execution has all the answerers it may have.
func (a *answerers) run(s *workerSandbox, t answerTask) {
	a.mu.Lock()
	if a.busy[t.r] >= a.max {
		a.queued[t.r] = append(a.queued[t.r], t)
		a.mu.Unlock()
		return
	}
	a.busy[t.r]++
	a.mu.Unlock()
	select {
	case a.tasks <- t:
	default:
		go a.serve(s, t)
	}
}

// next returns the next queued call of r's, which the answerer done with
// one of r's takes on; or, with none, counts the answerer out of r's.
func (a *answerers) next(r *run) (answerTask, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if q := a.queued[r]; len(q) > 0 {
		t := q[0]
		q[0] = answerTask{}
		if len(q) == 1 {
			delete(a.queued, r)
		} else {
			a.queued[r] = q[1:]
		}
		return t, true
	}
	if a.busy[r]--; a.busy[r] <= 0 {
		delete(a.busy, r)
	}
	return answerTask{}, false
}

func (a *answerers) serve(s *workerSandbox, t answerTask) {
	idle := time.NewTimer(answererIdle)
	defer idle.Stop()
	for {
		s.answerBridge(t.r, t.id, t.c)
		if next, ok := a.next(t.r); ok {
			t = next
			continue
		}
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
