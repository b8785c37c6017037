package emscripten

import (
	"context"
	"time"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental/table"
)

// _Py_CheckEmscriptenSignals_Helper() is called by CPython about every 50
// bytecodes (less often in long runs: see SetSignalCheck). It returns the
// pending signal number and clears it in one atomic swap: a load followed
// by a store could lose a signal stored in between.
func (h *Host) checkSignals(_ context.Context, _ api.Module, stack []uint64) {
	if h.killed.Load() {
		panic(ErrKilled)
	}
	if h.cfg.Interrupt.Load() == 0 {
		if h.checked != nil {
			h.checked()
		}
		stack[0] = 0
		return
	}
	sig := h.cfg.Interrupt.Swap(0)
	if sig != 0 {
		h.delivered.Store(time.Now().UnixNano())
	}
	stack[0] = ret32(sig)
}

// LastDelivery is when the guest last took a pending signal (Unix ns).
func (h *Host) LastDelivery() int64 { return h.delivered.Load() }

// _setitimer_js(which, timeoutMillis): timers that deliver SIGALRM would need
// the host to call back into the guest; they are refused.
func (h *Host) setitimer(_ context.Context, _ api.Module, stack []uint64) {
	if stack[1] == 0 {
		stack[0] = 0
		return
	}
	stack[0] = neg(ENOSYS)
}

// __call_sighandler(fp, sig) runs the guest's handler of sig, the function
// at table slot fp: libc's raise() calls it for a signal whose handler is a
// function (CPython's, after signal.raise_signal or os.kill of its own
// process), as Emscripten's JavaScript library does.
func (h *Host) callSighandler(ctx context.Context, mod api.Module, stack []uint64) {
	fn := table.LookupFunction(mod, 0, u32(stack[0]), []api.ValueType{i32t}, nil)
	if _, err := fn.Call(ctx, uint64(u32(stack[1]))); err != nil {
		panic(err)
	}
}
