package wasmbin

// A minimal encoder for the helper modules the runtime generates. It writes
// only what those modules use.

// Value types.
const (
	I32       byte = 0x7f
	I64       byte = 0x7e
	F64       byte = 0x7c
	FuncRef   byte = 0x70
	ExternRef byte = 0x6f
)

// Builder accumulates the sections of a module.
type Builder struct {
	types   [][]byte
	imports []byte
	nImport int
	funcs   []uint32
	globals []byte
	nGlobal int
	exports []byte
	nExport int
	elems   []byte
	nElem   int
	code    [][]byte
}

// Type adds a function type and returns its index.
func (b *Builder) Type(params, results []byte) uint32 {
	t := []byte{0x60}
	t = appendVec(t, params)
	t = appendVec(t, results)
	for i, old := range b.types {
		if string(old) == string(t) {
			return uint32(i)
		}
	}
	b.types = append(b.types, t)
	return uint32(len(b.types) - 1)
}

// ImportFunc adds a function import (imports come before defined functions).
func (b *Builder) ImportFunc(module, name string, typ uint32) {
	b.imports = appendName(appendName(b.imports, module), name)
	b.imports = append(b.imports, KindFunc)
	b.imports = AppendU32(b.imports, typ)
	b.nImport++
}

// ImportMemory adds a memory import with minimum 0 pages and no maximum.
func (b *Builder) ImportMemory(module, name string) {
	b.imports = appendName(appendName(b.imports, module), name)
	b.imports = append(b.imports, KindMemory, 0x00, 0x00)
	b.nImport++
}

// ImportTable adds a funcref table import with minimum size 0.
func (b *Builder) ImportTable(module, name string) {
	b.imports = appendName(appendName(b.imports, module), name)
	b.imports = append(b.imports, KindTable, FuncRef, 0x00, 0x00)
	b.nImport++
}

// Func adds a function with the given type, locals (one entry per local of
// type I32 etc.) and body (without the final end) and returns its index in
// the function index space, given nFuncImports function imports.
func (b *Builder) Func(typ uint32, locals []byte, body []byte, nFuncImports uint32) uint32 {
	b.funcs = append(b.funcs, typ)
	c := AppendU32(nil, uint32(len(locals)))
	for _, l := range locals {
		c = append(c, 1, l)
	}
	c = append(c, body...)
	c = append(c, 0x0b)
	b.code = append(b.code, c)
	return nFuncImports + uint32(len(b.funcs)-1)
}

// GlobalI32 adds a global of type i32 initialised to v and returns its index.
func (b *Builder) GlobalI32(mutable bool, v int32) uint32 {
	mut := byte(0)
	if mutable {
		mut = 1
	}
	b.globals = append(b.globals, I32, mut, 0x41)
	b.globals = AppendS32(b.globals, v)
	b.globals = append(b.globals, 0x0b)
	b.nGlobal++
	return uint32(b.nGlobal - 1)
}

// Export exports the item of the given kind and index under name.
func (b *Builder) Export(name string, kind byte, index uint32) {
	b.exports = appendName(b.exports, name)
	b.exports = append(b.exports, kind)
	b.exports = AppendU32(b.exports, index)
	b.nExport++
}

// DeclareFuncs adds a declarative element segment so ref.func may name funcs.
func (b *Builder) DeclareFuncs(funcs ...uint32) {
	b.elems = append(b.elems, 0x03, 0x00)
	b.elems = AppendU32(b.elems, uint32(len(funcs)))
	for _, f := range funcs {
		b.elems = AppendU32(b.elems, f)
	}
	b.nElem++
}

// Bytes encodes the module.
func (b *Builder) Bytes() []byte {
	out := []byte("\x00asm\x01\x00\x00\x00")
	if len(b.types) > 0 {
		s := AppendU32(nil, uint32(len(b.types)))
		for _, t := range b.types {
			s = append(s, t...)
		}
		out = section(out, 1, s)
	}
	if b.nImport > 0 {
		out = section(out, 2, append(AppendU32(nil, uint32(b.nImport)), b.imports...))
	}
	if len(b.funcs) > 0 {
		s := AppendU32(nil, uint32(len(b.funcs)))
		for _, f := range b.funcs {
			s = AppendU32(s, f)
		}
		out = section(out, 3, s)
	}
	if b.nGlobal > 0 {
		out = section(out, 6, append(AppendU32(nil, uint32(b.nGlobal)), b.globals...))
	}
	if b.nExport > 0 {
		out = section(out, 7, append(AppendU32(nil, uint32(b.nExport)), b.exports...))
	}
	if b.nElem > 0 {
		out = section(out, 9, append(AppendU32(nil, uint32(b.nElem)), b.elems...))
	}
	if len(b.code) > 0 {
		s := AppendU32(nil, uint32(len(b.code)))
		for _, c := range b.code {
			s = AppendU32(s, uint32(len(c)))
			s = append(s, c...)
		}
		out = section(out, 10, s)
	}
	return out
}

func section(out []byte, id byte, body []byte) []byte {
	out = append(out, id)
	out = AppendU32(out, uint32(len(body)))
	return append(out, body...)
}

func appendVec(b []byte, items []byte) []byte {
	b = AppendU32(b, uint32(len(items)))
	return append(b, items...)
}

func appendName(b []byte, s string) []byte {
	b = AppendU32(b, uint32(len(s)))
	return append(b, s...)
}

// AppendU32 appends v as unsigned LEB128.
func AppendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}

// AppendS32 appends v as signed LEB128.
func AppendS32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
