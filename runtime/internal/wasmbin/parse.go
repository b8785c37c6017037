// Package wasmbin reads the few sections of a WebAssembly binary the runtime
// needs to inspect (imports, custom sections) and encodes the tiny helper
// modules the runtime generates at start-up.
package wasmbin

import (
	"errors"
	"fmt"
)

// External kinds of an import or export.
const (
	KindFunc   byte = 0
	KindTable  byte = 1
	KindMemory byte = 2
	KindGlobal byte = 3
	KindTag    byte = 4
)

// Import is one entry of a module's import section. For globals, ValType and
// Mutable describe the global's type; for functions, Type is the index of
// their type in Module.Types; other kinds leave them zero.
type Import struct {
	Module, Name string
	Kind         byte
	ValType      byte
	Mutable      bool
	Type         uint32
}

// FuncType is a function type: its parameter and result value types, as
// their binary encodings (0x7f for i32, and so on).
type FuncType struct {
	Params, Results []byte
}

// Module is what Parse extracts from a binary.
type Module struct {
	// Types is the type section; nil if it holds anything but function
	// types (which this package does not decode).
	Types   []FuncType
	Imports []Import
	// Exports maps each export's name to its kind.
	Exports map[string]byte
	Custom  map[string][]byte
	// TableMin is the initial size of the first table the module defines
	// (0 when it defines none).
	TableMin uint32
}

// ErrMalformed reports a binary this package cannot read.
var ErrMalformed = errors.New("wasmbin: malformed module")

type reader struct {
	b   []byte
	pos int
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s at offset %d", ErrMalformed, what, r.pos)
	}
}

func (r *reader) byte() byte {
	if r.err != nil || r.pos >= len(r.b) {
		r.fail("unexpected end")
		return 0
	}
	c := r.b[r.pos]
	r.pos++
	return c
}

func (r *reader) u32() uint32 {
	var v uint32
	for shift := uint(0); shift < 35; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			return v
		}
	}
	r.fail("LEB128 too long")
	return 0
}

func (r *reader) bytes(n uint32) []byte {
	if r.err != nil || uint64(r.pos)+uint64(n) > uint64(len(r.b)) {
		r.fail("unexpected end")
		return nil
	}
	s := r.b[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return s
}

func (r *reader) name() string { return string(r.bytes(r.u32())) }

// skipLimits skips a limits structure (flags, min, optional max).
func (r *reader) skipLimits() {
	flags := r.byte()
	r.u32()
	if flags&1 != 0 {
		r.u32()
	}
}

// Parse reads the import section and the custom sections of a module.
func Parse(b []byte) (*Module, error) {
	if len(b) < 8 || string(b[:4]) != "\x00asm" {
		return nil, fmt.Errorf("%w: not a WebAssembly binary", ErrMalformed)
	}
	r := &reader{b: b, pos: 8}
	m := &Module{Custom: map[string][]byte{}, Exports: map[string]byte{}}
	for r.err == nil && r.pos < len(b) {
		id := r.byte()
		size := r.u32()
		body := r.bytes(size)
		if r.err != nil {
			break
		}
		sr := &reader{b: body}
		switch id {
		case 0:
			n := sr.name()
			if sr.err == nil {
				m.Custom[n] = body[sr.pos:]
			}
		case 1:
			m.Types = parseTypes(sr)
		case 2:
			m.Imports = parseImports(sr)
		case 7:
			n := sr.u32()
			for i := uint32(0); i < n && sr.err == nil; i++ {
				name := sr.name()
				kind := sr.byte()
				sr.u32()
				m.Exports[name] = kind
			}
		case 4:
			if sr.u32() > 0 {
				sr.byte() // reftype
				if flags := sr.byte(); flags&1 != 0 || flags == 0 {
					m.TableMin = sr.u32()
				}
			}
		}
		if sr.err != nil {
			return nil, sr.err
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	return m, nil
}

// parseTypes reads a type section of function types; any other form (the
// GC proposal's) makes it return nil.
func parseTypes(r *reader) []FuncType {
	n := r.u32()
	out := make([]FuncType, 0, min(n, 1<<16))
	for i := uint32(0); i < n && r.err == nil; i++ {
		if r.byte() != 0x60 {
			return nil
		}
		var ft FuncType
		var ok1, ok2 bool
		ft.Params, ok1 = valTypes(r)
		ft.Results, ok2 = valTypes(r)
		if !ok1 || !ok2 {
			return nil
		}
		out = append(out, ft)
	}
	return out
}

// valTypes reads a vector of value types, reporting false for a type that
// is not a single byte (a typed reference).
func valTypes(r *reader) ([]byte, bool) {
	n := r.u32()
	if r.err != nil || uint64(n) > uint64(len(r.b)-r.pos) {
		r.fail("value types")
		return nil, false
	}
	out := make([]byte, n)
	for i := range out {
		out[i] = r.byte()
		if out[i] == 0x63 || out[i] == 0x64 {
			return nil, false
		}
	}
	return out, r.err == nil
}

func parseImports(r *reader) []Import {
	n := r.u32()
	var out []Import
	for i := uint32(0); i < n && r.err == nil; i++ {
		im := Import{Module: r.name(), Name: r.name(), Kind: r.byte()}
		switch im.Kind {
		case KindFunc:
			im.Type = r.u32()
		case KindTable:
			r.byte()
			r.skipLimits()
		case KindMemory:
			r.skipLimits()
		case KindGlobal:
			im.ValType = r.byte()
			im.Mutable = r.byte() == 1
		case KindTag:
			r.byte()
			r.u32()
		default:
			r.fail("unknown import kind")
		}
		out = append(out, im)
	}
	return out
}
