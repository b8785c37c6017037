package supervisor

import (
	"errors"
	"fmt"
	"sync"
)

// bridges answers the bridge calls of one sandbox's executions with the
// callbacks of its Config.
type bridges struct {
	cfg Config

	mu      sync.Mutex
	context any // the value last passed to Initialize
}

func newBridges(cfg Config) *bridges {
	return &bridges{cfg: cfg}
}

func (b *bridges) setContext(v any) {
	b.mu.Lock()
	b.context = v
	b.mu.Unlock()
}

func (b *bridges) currentContext() any {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.context
}

// errNoRun answers a bridge call that arrives when no execution runs.
var errNoRun = errors.New("no execution is running")

// call runs one host callback for the execution r. Its waiting, for a slot
// and for the callback, does not count as Python time. The slots
// (MaxBridgeConcurrency) are the execution's own: a callback that ignores
// its context and runs on after the execution ended holds none of the
// next execution's.
func (b *bridges) call(r *run, method string, args []any) (result any, err error) {
	if r == nil {
		return nil, errNoRun
	}
	r.calls.Add(1)
	// What the code wrote before the call reaches the output callbacks
	// first (Python time: the code waits for them, as for a write).
	if !r.out.catchUp() {
		return nil, errors.New("interrupted") // the execution was stopped
	}
	r.clock.enter()
	defer r.clock.leave()
	ctx := r.bridgeCtx()
	if err := ctx.Err(); err != nil {
		return nil, err // the run was stopped: no callback starts (select would pick a free slot half the time)
	}
	sem := r.bridgeSlots(b.cfg.MaxBridgeConcurrency)
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-sem }()
	if err := ctx.Err(); err != nil {
		return nil, err // stopped while it waited, as a slot came free
	}
	defer func() {
		if p := recover(); p != nil {
			b.cfg.Logger.Error("bridge callback panicked", "method", method, "panic", fmt.Sprint(p))
			err = fmt.Errorf("the host's %s callback failed (it panicked)", method)
		}
		if err != nil && err.Error() == "" {
			// Python raises BridgeError with the message: an empty one
			// would read as no error at all.
			err = fmt.Errorf("the host's %s callback returned an error with no message (%T)%w", method, err, err)
		}
	}()
	switch method {
	case "llm_query":
		prompt, ok := arg[string](args, 0)
		if !ok || len(args) != 1 {
			return nil, fmt.Errorf("llm_query takes one str argument")
		}
		if b.cfg.OnLLMQuery == nil {
			return nil, errors.New("llm_query is not available: the host set no OnLLMQuery callback")
		}
		return b.cfg.OnLLMQuery(ctx, prompt)
	case "rlm_query":
		task, ok := arg[string](args, 0)
		if !ok || len(args) > 2 {
			return nil, fmt.Errorf("rlm_query takes a str task and an optional context")
		}
		if b.cfg.OnRLMQuery == nil {
			return nil, errors.New("rlm_query is not available: the host set no OnRLMQuery callback")
		}
		ctxValue := b.currentContext()
		if len(args) == 2 {
			ctxValue = args[1]
		}
		return b.cfg.OnRLMQuery(ctx, task, ctxValue)
	}
	return nil, fmt.Errorf("unknown bridge function %q", method)
}

func arg[T any](args []any, i int) (T, bool) {
	var zero T
	if i >= len(args) {
		return zero, false
	}
	v, ok := args[i].(T)
	return v, ok
}
