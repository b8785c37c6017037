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
// Mutable describe the global's type; other kinds leave them zero.
type Import struct {
	Module, Name string
	Kind         byte
	ValType      byte
	Mutable      bool
}

// Module is what Parse extracts from a binary.
type Module struct {
	Imports []Import
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
	m := &Module{Custom: map[string][]byte{}}
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
		case 2:
			m.Imports = parseImports(sr)
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

func parseImports(r *reader) []Import {
	n := r.u32()
	var out []Import
	for i := uint32(0); i < n && r.err == nil; i++ {
		im := Import{Module: r.name(), Name: r.name(), Kind: r.byte()}
		switch im.Kind {
		case KindFunc:
			r.u32()
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
