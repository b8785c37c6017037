package supervisor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// pumpLimit is how many bytes of output the code may write ahead of the
// output callbacks before its writes wait for them. Each call counts its
// text and pumpItemCost, so that a flood of empty lines is held too.
const pumpLimit = 1 << 20

// pumpItemCost is what a queued call costs beyond its text: the item, the
// string's allocation, the newline the line had.
const pumpItemCost = 48

// pump runs an execution's output callbacks (OnStdout, OnStderr, Stdout,
// Stderr) on a goroutine of their own, in the order the code wrote, so
// that Execute can stop waiting for a callback that does not return: the
// callbacks are the caller's code, which nothing can preempt. The code may
// run up to pumpLimit bytes ahead of them; past that its writes wait, so
// a slow callback slows the code as it did when the callbacks ran on the
// code's own path.
//
// When the execution is stopped, writes no longer wait (the code must be
// free to take its interrupt): what fits under the limit is still queued,
// and the rest of the output is dropped. The callbacks get GracePeriod to
// catch up, as the code gets it to return; then, or when the sandbox is
// destroyed, the pump is abandoned: what it holds is dropped, and nobody
// waits for the callback in progress, which runs on, on its goroutine,
// and gets nothing more. A nil *pump (no callbacks) does nothing.
type pump struct {
	mu       sync.Mutex
	more     sync.Cond // signalled when items come or the pump is abandoned
	room     sync.Cond // broadcast when items are delivered, or writes are to wait no more
	queue    []pumpItem
	bytes    int         // of the items queued or being delivered
	busy     bool        // the goroutine is delivering a batch
	started  bool        // the goroutine runs
	idle     bool        // the goroutine waits for items
	stopping bool        // the execution was stopped: writes do not wait
	cut      bool        // stopping, the output past the limit was dropped
	expiry   *time.Timer // abandons the pump GracePeriod after the stop
	gone     error       // why the pump was abandoned, or nil
	dropped  atomic.Bool // gone is set: read by the goroutine between calls
}

// pumpItem is one call of a callback.
type pumpItem struct {
	f func(string)
	s string
}

func newPump() *pump {
	p := &pump{}
	p.more.L = &p.mu
	p.room.L = &p.mu
	return p
}

// wantsPump reports whether cfg has output callbacks, for which an execution
// needs a pump.
func wantsPump(cfg Config) bool {
	return cfg.OnStdout != nil || cfg.OnStderr != nil || cfg.Stdout != nil || cfg.Stderr != nil
}

// via returns f made to run on the pump: a call queues s for f. s must be
// the caller's to give (a collector's lines are); see viaCopy. With a nil
// pump or f, it returns f.
func (p *pump) via(f func(string)) func(string) {
	if p == nil || f == nil {
		return f
	}
	return func(s string) { p.put(f, s) }
}

// viaCopy is via for a callback whose argument may be a view of a buffer
// its caller reuses (a collector's chunks): the pump queues a copy.
func (p *pump) viaCopy(f func(string)) func(string) {
	if p == nil || f == nil {
		return f
	}
	return func(s string) { p.put(f, strings.Clone(s)) }
}

// put queues a call of f with s, and waits while the pump holds more than
// pumpLimit bytes, unless the execution was stopped.
func (p *pump) put(f func(string), s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gone != nil || p.cut {
		return
	}
	if p.stopping && p.bytes > pumpLimit {
		p.cut = true // the callbacks get a prefix of the output, without gaps
		return
	}
	p.queue = append(p.queue, pumpItem{f, s})
	p.bytes += len(s) + pumpItemCost
	switch {
	case !p.started:
		p.started = true
		go p.deliver()
	case p.idle:
		p.more.Signal()
	}
	for p.bytes > pumpLimit && p.gone == nil && !p.stopping {
		p.room.Wait()
	}
}

// deliver is the pump's goroutine: it runs the queued calls in batches,
// and returns when the pump is abandoned. It waits for items without a
// timeout: abandon, which every execution's end calls, wakes it.
func (p *pump) deliver() {
	p.mu.Lock()
	for {
		for len(p.queue) == 0 && p.gone == nil {
			p.idle = true
			p.more.Wait()
			p.idle = false
		}
		if p.gone != nil {
			p.mu.Unlock()
			return
		}
		batch := p.queue
		p.queue = nil
		p.busy = true
		p.mu.Unlock()
		n := 0
		for _, it := range batch {
			if p.dropped.Load() {
				break
			}
			it.f(it.s)
			n += len(it.s) + pumpItemCost
		}
		p.mu.Lock()
		p.busy = false
		if p.gone == nil {
			p.bytes -= n
		}
		p.room.Broadcast()
	}
}

// flush waits until the callbacks have had every call queued so far, or
// the pump is abandoned, and returns why it was (nil: flushed).
func (p *pump) flush() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waitDrained(false)
	return p.gone
}

// catchUp is flush for a bridge call of the execution, which first lets
// the callbacks have what the code wrote before it (the host sees it
// before it answers); it reports false when the execution was stopped, or
// the pump abandoned, before they had.
func (p *pump) catchUp() bool {
	if p == nil {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waitDrained(true)
	return p.gone == nil && !p.stopping
}

// waitDrained waits, under p.mu, until nothing is queued or being
// delivered, or the pump is abandoned, or, with orStopped, the execution
// is stopped.
func (p *pump) waitDrained(orStopped bool) {
	for (len(p.queue) > 0 || p.busy) && p.gone == nil && !(orStopped && p.stopping) {
		p.room.Wait()
	}
}

// stop says the execution was stopped for why: writes wait no more, and
// the pump is abandoned grace later if its callbacks have not caught up.
func (p *pump) stop(why error, grace time.Duration) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gone != nil || p.stopping {
		return
	}
	p.stopping = true
	p.room.Broadcast() // writes and catchUp
	p.expiry = time.AfterFunc(grace, func() { p.abandon(why) })
}

// abandon drops what the pump holds and ends its goroutine once the call
// in progress returns (at once if there is none), for why (the first
// reason counts). Writes and flushes waiting for it return.
func (p *pump) abandon(why error) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gone != nil {
		return
	}
	p.gone = why
	p.dropped.Store(true)
	if p.expiry != nil {
		p.expiry.Stop()
	}
	p.queue = nil
	p.bytes = 0
	p.more.Broadcast()
	p.room.Broadcast()
}

// finish waits until the callbacks have had every call queued, or the
// pump is abandoned (GracePeriod after a stop, or by the caller: see
// awaitOutput), then ends the pump's goroutine. It returns nil when every
// call was made, else an error that says the callbacks missed output,
// wrapping why the pump was abandoned.
func (p *pump) finish() error {
	if p == nil {
		return nil
	}
	err := p.flush()
	p.abandon(errPumpDone)
	if err != nil {
		return fmt.Errorf("%w (the output callbacks had not had every line)", err)
	}
	return nil
}

// errPumpDone ends a pump that delivered everything.
var errPumpDone = errors.New("supervisor: output delivered")

// execStreams are the collectors of an execution's two output streams.
type execStreams struct{ stdout, stderr *outputCollector }

// newStreams returns the collectors of an execution's output, whose
// callbacks run on the returned pump (nil when cfg sets none).
func newStreams(cfg Config) (*execStreams, *pump) {
	var p *pump
	if wantsPump(cfg) {
		p = newPump()
	}
	return &execStreams{
		stdout: newCollector(cfg.MaxOutputLength, p.via(guardLine(cfg.Logger, "OnStdout", cfg.OnStdout)), p.viaCopy(guardWriter(cfg.Logger, "Stdout", cfg.Stdout))),
		stderr: newCollector(cfg.MaxOutputLength, p.via(guardLine(cfg.Logger, "OnStderr", cfg.OnStderr)), p.viaCopy(guardWriter(cfg.Logger, "Stderr", cfg.Stderr))),
	}, p
}

// awaitOutput waits, once the code of the run r has returned and its
// streams are flushed (outputCollector.String), for the output callbacks
// to have had every line. A stopped run's callbacks (by Timeout,
// WallTimeout, Cancel or its context) have GracePeriod from the stop
// (pump.stop), or until Destroy. Otherwise the wait ends when ctx ends,
// the run's time is up, or Cancel or Destroy abandons the pump (see
// pump.finish). The time: the wait counts against Timeout, as the code's
// writes that wait for the callbacks do, and the callbacks then get
// GracePeriod, as after a stop; WallTimeout bounds it too.
func awaitOutput(ctx context.Context, r *run) error {
	p := r.out
	if p == nil {
		return nil
	}
	if r.stopped() {
		// Its context included: a caller that ends its context (a
		// Ctrl-C) still gets what the code printed as it took the
		// interrupt, as after Cancel.
		return p.finish()
	}
	stop := context.AfterFunc(ctx, func() {
		p.abandon(fmt.Errorf("%w: %w", ErrCanceled, context.Cause(ctx)))
	})
	defer stop()
	if limit, used := r.clock.budget(); limit > 0 {
		t := time.AfterFunc(max(limit-used, 0)+r.grace, func() {
			p.abandon(fmt.Errorf("%w (ran Python for %v, the wait for the output callbacks included)", ErrTimeout, limit))
		})
		defer t.Stop()
	}
	if r.wallTimeout > 0 {
		t := time.AfterFunc(time.Until(r.start.Add(r.wallTimeout)), func() { p.abandon(r.wallErr()) })
		defer t.Stop()
	}
	return p.finish()
}
