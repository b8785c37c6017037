// Package wasmgen generates the small WebAssembly modules the runtime links
// with Pyodide: one that provides the GOT.func globals, and CPython's
// function-pointer trampoline.
package wasmgen

import (
	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/wasmbin"
)

// MainModule is the name under which the generated modules import from the
// Pyodide module (resolved per instance by the runtime).
const MainModule = "pyodide"

// GOT returns a module exporting a mutable i32 global, initialised to 0, for
// each name. Pyodide imports such globals (module "GOT.func") for
// JavaScript-library functions whose addresses C code may take; none of them
// exist here, so their addresses are null.
func GOT(names []string) []byte {
	var b wasmbin.Builder
	for _, n := range names {
		g := b.GlobalI32(true, 0)
		b.Export(n, wasmbin.KindGlobal, g)
	}
	return b.Bytes()
}

// Trampoline returns the module that implements CPython's
// trampoline_call(success_ptr, func, a1, a2, a3) -> i32.
//
// It calls the function at table slot func with as many of a1..a3 as the
// function takes (0 to 3 i32 parameters, i32 result), storing 1 at
// success_ptr, or stores 0 and returns 0 when the slot has no such type. The
// parameter count is cached as 1+count in a byte per slot at guest address
// cache_base (cache_len slots); on a miss it asks the host import rlm.arity,
// which fills the cache. Exports: trampoline_call, install (appends
// trampoline_call to the table and returns its slot), cache_base, cache_len.
func Trampoline() []byte {
	const i32 = wasmbin.I32
	var b wasmbin.Builder
	tTramp := b.Type([]byte{i32, i32, i32, i32, i32}, []byte{i32})
	t1 := b.Type([]byte{i32}, []byte{i32})
	t0 := b.Type(nil, []byte{i32})
	t2 := b.Type([]byte{i32, i32}, []byte{i32})
	t3 := b.Type([]byte{i32, i32, i32}, []byte{i32})

	b.ImportFunc("rlm", "arity", t1) // func 0
	b.ImportMemory(MainModule, "memory")
	b.ImportTable(MainModule, "__indirect_function_table")
	gBase := b.GlobalI32(true, 0)
	gLen := b.GlobalI32(true, 0)

	const (
		ok, fn, a1, a2, a3, code = 0, 1, 2, 3, 4, 5
		localGet, localSet       = 0x20, 0x21
		globalGet                = 0x23
	)
	u := wasmbin.AppendU32
	var body []byte
	// code = fn < len ? load8_u(base + fn) : 0
	body = append(body, localGet, fn, globalGet)
	body = u(body, gLen)
	body = append(body, 0x49, 0x04, 0x40) // i32.lt_u; if
	body = append(body, globalGet)
	body = u(body, gBase)
	body = append(body, localGet, fn, 0x6a, 0x2d, 0x00, 0x00, localSet, code) // i32.add; i32.load8_u
	body = append(body, 0x0b)
	// if code == 0: code = arity(fn)
	body = append(body, localGet, code, 0x45, 0x04, 0x40, localGet, fn, 0x10, 0x00, localSet, code, 0x0b)
	// *ok = 1
	body = append(body, localGet, ok, 0x41, 0x01, 0x36, 0x02, 0x00)
	// five nested blocks, br_table on code-1
	body = append(body, 0x02, 0x40, 0x02, 0x40, 0x02, 0x40, 0x02, 0x40, 0x02, 0x40)
	body = append(body, localGet, code, 0x41, 0x01, 0x6b) // code - 1
	body = append(body, 0x0e, 0x04, 0x04, 0x03, 0x02, 0x01, 0x00)
	body = append(body, 0x0b)
	// unknown type: *ok = 0; return 0
	body = append(body, localGet, ok, 0x41, 0x00, 0x36, 0x02, 0x00, 0x41, 0x00, 0x0f, 0x0b)
	callIndirect := func(t uint32) {
		body = append(body, localGet, fn, 0x11)
		body = u(body, t)
		body = append(body, 0x00)
	}
	// three arguments
	body = append(body, localGet, a1, localGet, a2, localGet, a3)
	callIndirect(t3)
	body = append(body, 0x0f, 0x0b)
	// two
	body = append(body, localGet, a1, localGet, a2)
	callIndirect(t2)
	body = append(body, 0x0f, 0x0b)
	// one
	body = append(body, localGet, a1)
	callIndirect(t1)
	body = append(body, 0x0f, 0x0b)
	// none: falls off the end with the result on the stack
	callIndirect(t0)
	tramp := b.Func(tTramp, []byte{i32}, body, 1)

	// install: table.grow(ref.func trampoline_call, 1)
	install := []byte{0xd2}
	install = u(install, tramp)
	install = append(install, 0x41, 0x01, 0xfc)
	install = u(install, 15)
	install = append(install, 0x00)
	fInstall := b.Func(t0, nil, install, 1)

	b.DeclareFuncs(tramp)
	b.Export("trampoline_call", wasmbin.KindFunc, tramp)
	b.Export("install", wasmbin.KindFunc, fInstall)
	b.Export("cache_base", wasmbin.KindGlobal, gBase)
	b.Export("cache_len", wasmbin.KindGlobal, gLen)
	return b.Bytes()
}
