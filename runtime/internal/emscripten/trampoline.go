package emscripten

import (
	"context"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental/table"
)

// CPython's Emscripten build calls C function pointers through a trampoline
// that must know each target's parameter count. The runtime generates the
// trampoline in wasm (see runtime/internal/wasmgen); it keeps a byte per table
// slot in guest memory and calls Arity only for slots it has not seen.

var i32t = api.ValueTypeI32

// candidates are tried in the order CPython's trampoline does.
var candidates = [][]api.ValueType{
	{i32t, i32t, i32t},
	{i32t, i32t},
	{i32t},
	{},
}

// ArityUnknown is what Arity returns for a slot of no candidate type.
const ArityUnknown = 0xff

// arity(funcIndex) -> code: 1 + the number of i32 parameters of the function
// at that table slot returning i32, or ArityUnknown. The code is also stored
// in the byte cache.
func (h *Host) arity(_ context.Context, mod api.Module, stack []uint64) {
	idx := u32(stack[0])
	code := uint32(ArityUnknown)
	for _, params := range candidates {
		if lookup(mod, idx, params) {
			code = uint32(len(params)) + 1
			break
		}
	}
	if idx < h.arityLen {
		memOf(mod).put8(h.arityCache+idx, uint8(code))
	}
	stack[0] = uint64(code)
}

func lookup(mod api.Module, idx uint32, params []api.ValueType) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	table.LookupFunction(mod, 0, idx, params, []api.ValueType{i32t})
	return true
}
