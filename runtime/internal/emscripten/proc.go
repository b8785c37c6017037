package emscripten

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"

	"github.com/tetratelabs/wazero/api"
)

// ExitError is the panic value with which the guest's exit() and proc_exit()
// unwind the interpreter; the runtime turns it into an error and considers
// the interpreter finished.
type ExitError struct{ Code int32 }

func (e *ExitError) Error() string {
	return fmt.Sprintf("the Python process exited with status %d (os._exit or a fatal error)", e.Code)
}

// AbortError is the panic value with which abort() and failed C assertions
// unwind the interpreter.
type AbortError struct{ Reason string }

func (e *AbortError) Error() string { return "the Python runtime aborted: " + e.Reason }

func cryptoRand(p []byte) { _, _ = rand.Read(p) }

func (h *Host) environSizesGet(_ context.Context, mod api.Module, stack []uint64) {
	m := memOf(mod)
	size := 0
	for _, kv := range h.cfg.Env {
		size += len(kv) + 1
	}
	if !m.put32(u32(stack[0]), uint32(len(h.cfg.Env))) || !m.put32(u32(stack[1]), uint32(size)) {
		stack[0] = wasiErr(EFAULT)
		return
	}
	stack[0] = 0
}

func (h *Host) environGet(_ context.Context, mod api.Module, stack []uint64) {
	m := memOf(mod)
	ptrs, buf := u32(stack[0]), u32(stack[1])
	for i, kv := range h.cfg.Env {
		if !m.put32(ptrs+4*uint32(i), buf) || m.putCString(buf, kv, uint32(len(kv))+1) != uint32(len(kv)) {
			stack[0] = wasiErr(EFAULT)
			return
		}
		buf += uint32(len(kv)) + 1
	}
	stack[0] = 0
}

func (h *Host) randomGet(_ context.Context, mod api.Module, stack []uint64) {
	b, ok := memOf(mod).bytes(u32(stack[0]), u32(stack[1]))
	if !ok {
		stack[0] = wasiErr(EFAULT)
		return
	}
	h.cfg.Rand(b)
	stack[0] = 0
}

func (h *Host) procExit(_ context.Context, _ api.Module, stack []uint64) {
	panic(&ExitError{Code: i32(stack[0])})
}

func (h *Host) abort(_ context.Context, _ api.Module, _ []uint64) {
	panic(&AbortError{Reason: "abort() called"})
}

func (h *Host) assertFail(_ context.Context, mod api.Module, stack []uint64) {
	m := memOf(mod)
	cond, _ := m.cstring(u32(stack[0]), 1024)
	file, _ := m.cstring(u32(stack[1]), 1024)
	fn, _ := m.cstring(u32(stack[3]), 1024)
	panic(&AbortError{Reason: fmt.Sprintf("assertion failed: %s, at %s:%d in %s", cond, file, i32(stack[2]), fn)})
}

// _emscripten_system(command): there are no processes to run in the sandbox.
// system(NULL) asks whether a shell exists: no.
func (h *Host) system(_ context.Context, _ api.Module, stack []uint64) {
	if u32(stack[0]) == 0 {
		stack[0] = 0
		return
	}
	stack[0] = neg(ENOSYS)
}

func (h *Host) getProgname(_ context.Context, mod api.Module, stack []uint64) {
	memOf(mod).putCString(u32(stack[0]), h.cfg.Args0, u32(stack[1]))
}

// _Py_emscripten_runtime() returns a malloc'ed string in the glue; a host
// function cannot call malloc, so it returns NULL (sys._emscripten_info
// then reports no runtime name).
func (h *Host) pyEmscriptenRuntime(_ context.Context, _ api.Module, stack []uint64) {
	stack[0] = 0
}

func (h *Host) logFormatted(_ context.Context, mod api.Module, stack []uint64) {
	s, _ := memOf(mod).cstring(u32(stack[1]), 1<<16)
	fmt.Fprintln(h.cfg.Log, strings.TrimRight(s, "\n"))
}

func (h *Host) logImpl(_ context.Context, mod api.Module, stack []uint64) {
	s, _ := memOf(mod).cstring(u32(stack[0]), 1<<16)
	fmt.Fprintln(h.cfg.Log, strings.TrimRight(s, "\n"))
}

func nop(_ context.Context, _ api.Module, _ []uint64) {}

func zero(_ context.Context, _ api.Module, stack []uint64) {
	if len(stack) > 0 {
		stack[0] = 0
	}
}
