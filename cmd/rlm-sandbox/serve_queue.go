package main

import "sync"

// jobQueue runs jobs one at a time in the order they were pushed, on its
// own goroutine; push never blocks, so the reader of standard input never
// waits for a sandbox.
type jobQueue struct {
	mu     sync.Mutex
	jobs   []func()
	closed bool
	wake   chan struct{}
	done   chan struct{}
}

func newJobQueue() *jobQueue {
	q := &jobQueue{wake: make(chan struct{}, 1), done: make(chan struct{})}
	go q.loop()
	return q
}

// push queues f; it reports false when the queue is closed.
func (q *jobQueue) push(f func()) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	q.jobs = append(q.jobs, f)
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true
}

// close refuses new jobs; the queued ones still run, then the goroutine
// ends (done is closed).
func (q *jobQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *jobQueue) loop() {
	defer close(q.done)
	for {
		q.mu.Lock()
		if len(q.jobs) == 0 {
			closed := q.closed
			q.mu.Unlock()
			if closed {
				return
			}
			<-q.wake
			continue
		}
		f := q.jobs[0]
		q.jobs[0] = nil
		q.jobs = q.jobs[1:]
		q.mu.Unlock()
		f()
	}
}
