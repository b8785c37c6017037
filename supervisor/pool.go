package supervisor

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/runtime"
)

// Pool keeps sandboxes started ahead of use. Get hands out one whose
// worker process (or in-process interpreter) is already running, so that
// an agent that creates many sandboxes (one per rlm_query sub-task, say)
// does not wait for a process start each time. Each sandbox is handed out
// once, fresh, and the pool starts another in its place in the
// background.
//
// A Pool is safe for concurrent use.
type Pool struct {
	cfg   Config
	ready chan *managed
	// room holds a token for each place not taken by a sandbox that is
	// ready or starting: the filler takes one before each start, and Get
	// gives one back, so that at most size sandboxes are ever started
	// ahead (the filler used to start one more, waiting to hand it over).
	room chan struct{}
	ctx  context.Context // cancelled by Close
	stop context.CancelFunc
	done chan struct{} // closed when the filler has exited
	once sync.Once
}

// NewPool returns a pool that keeps size sandboxes (at least one) started
// with cfg, which it starts at once, in the background. Start failures are
// logged to cfg.Logger and retried with a growing delay; Get still works
// meanwhile, starting sandboxes itself.
func NewPool(cfg Config, size int) *Pool {
	cfg = cfg.withDefaults()
	ctx, stop := context.WithCancel(context.Background())
	size = max(size, 1)
	p := &Pool{cfg: cfg, ready: make(chan *managed, size), room: make(chan struct{}, size), ctx: ctx, stop: stop, done: make(chan struct{})}
	for range size {
		p.room <- struct{}{}
	}
	go p.fill()
	return p
}

// fill keeps the ready channel full until Close, starting a sandbox for
// each place Get frees.
func (p *Pool) fill() {
	defer close(p.done)
	for {
		select {
		case <-p.room:
		case <-p.ctx.Done():
			return
		}
		b, ok := p.start()
		if !ok {
			return
		}
		p.ready <- &managed{cfg: p.cfg, b: b} // never waits: the place was taken
	}
}

// start starts a sandbox, retrying with a growing delay while that fails;
// ok is false once the pool is closed.
func (p *Pool) start() (backend, bool) {
	delay := time.Duration(0)
	for {
		if delay > 0 {
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-p.ctx.Done():
				t.Stop()
				return nil, false
			}
		}
		b, err := start(p.ctx, p.cfg)
		if err == nil {
			if p.ctx.Err() != nil {
				b.Destroy()
				return nil, false
			}
			return b, true
		}
		if p.ctx.Err() != nil {
			return nil, false
		}
		if errors.Is(err, runtime.ErrMemoryLimit) {
			// The configuration: no retry can start one. Get says why.
			p.cfg.Logger.Warn("pool: cannot start a sandbox; not retrying", "err", err)
			return nil, false
		}
		delay = min(max(2*delay, time.Second), time.Minute)
		p.cfg.Logger.Warn("pool: could not start a sandbox; retrying", "err", err, "in", delay)
	}
}

// Get returns a started sandbox that nobody has used; call Initialize on
// it, as after New, and Destroy it when done. When none is ready, Get
// starts one itself, so it never takes longer than New. A ctx already done
// is an error (ErrCanceled), even with a sandbox ready.
func (p *Pool) Get(ctx context.Context) (Sandbox, error) {
	if err := startCanceled(ctx); err != nil {
		return nil, err
	}
	for {
		select {
		case m := <-p.ready:
			p.room <- struct{}{} // never waits: a place was taken for m
			if m.usable() {
				return m, nil
			}
			// Its worker died while it waited (killed by the OOM killer,
			// say): drop it and take the next.
			p.cfg.Logger.Warn("pool: dropping a sandbox that died while idle", "pid", m.Info().PID)
			m.Destroy()
			continue
		default:
		}
		if p.ctx.Err() != nil {
			return nil, ErrPoolClosed
		}
		b, err := start(ctx, p.cfg)
		if err != nil {
			return nil, err
		}
		return &managed{cfg: p.cfg, b: b}, nil
	}
}

// Idle is the number of started sandboxes waiting to be handed out.
func (p *Pool) Idle() int { return len(p.ready) }

// Close stops refilling and destroys the sandboxes not handed out (those
// handed out are their callers' to destroy). It waits for a start in
// progress to be abandoned, and is idempotent.
func (p *Pool) Close() error {
	p.once.Do(func() {
		p.stop()
		<-p.done
		for {
			select {
			case m := <-p.ready:
				m.Destroy()
			default:
				return
			}
		}
	})
	return nil
}
