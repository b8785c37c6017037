package exnref

import (
	"fmt"
)

// Section ids this package reads.
const (
	secType     = 1
	secImport   = 2
	secFunction = 3
	secCode     = 10
	secTag      = 13
)

// funcType is a function type; each value type is kept as its encoding.
type funcType struct {
	params, results []string
}

// encode appends the type section encoding of t.
func (t funcType) encode(b []byte) []byte {
	b = append(b, 0x60)
	b = appendU32(b, uint32(len(t.params)))
	for _, p := range t.params {
		b = append(b, p...)
	}
	b = appendU32(b, uint32(len(t.results)))
	for _, r := range t.results {
		b = append(b, r...)
	}
	return b
}

// section is one section of the binary: its id and where its header and
// payload sit.
type section struct {
	id           byte
	start        int // offset of the id byte
	payloadStart int
	end          int
}

// module is what the translation needs to know about a binary.
type module struct {
	b        []byte
	sections []section

	types        []funcType
	nFuncImports uint32
	funcTypes    []uint32 // type index of each defined function
	tagTypes     []uint32 // type index of each tag, imports first

	codeSection int      // index into sections, -1 when absent
	bodies      [][]byte // function bodies (locals and code), slices of b
}

// parseModule reads the sections the translation needs.
func parseModule(b []byte) (*module, error) {
	if len(b) < 8 || string(b[:4]) != "\x00asm" {
		return nil, fmt.Errorf("%w: not a WebAssembly binary", ErrMalformed)
	}
	if string(b[4:8]) != "\x01\x00\x00\x00" {
		return nil, fmt.Errorf("%w: unsupported binary version % x", ErrMalformed, b[4:8])
	}
	m := &module{b: b, codeSection: -1}
	r := &reader{b: b, pos: 8}
	for !r.done() {
		s := section{start: r.pos}
		s.id = r.byte()
		size := r.u32()
		s.payloadStart = r.pos
		payload := r.bytes(size)
		if r.err != nil {
			return nil, r.err
		}
		s.end = r.pos
		sr := &reader{b: payload}
		switch s.id {
		case secType:
			m.parseTypes(sr)
		case secImport:
			m.parseImports(sr)
		case secFunction:
			for n := sr.u32(); n > 0 && sr.err == nil; n-- {
				m.funcTypes = append(m.funcTypes, sr.u32())
			}
		case secTag:
			for n := sr.u32(); n > 0 && sr.err == nil; n-- {
				sr.byte() // attribute: exception
				m.tagTypes = append(m.tagTypes, sr.u32())
			}
		case secCode:
			m.codeSection = len(m.sections)
			n := sr.u32()
			m.bodies = make([][]byte, 0, n)
			for ; n > 0 && sr.err == nil; n-- {
				m.bodies = append(m.bodies, sr.bytes(sr.u32()))
			}
		}
		if sr.err != nil {
			return nil, fmt.Errorf("section %d: %w", s.id, sr.err)
		}
		m.sections = append(m.sections, s)
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(m.bodies) != len(m.funcTypes) {
		return nil, fmt.Errorf("%w: %d function bodies for %d functions", ErrMalformed, len(m.bodies), len(m.funcTypes))
	}
	for _, t := range m.funcTypes {
		if int(t) >= len(m.types) {
			return nil, fmt.Errorf("%w: function type index %d out of range", ErrMalformed, t)
		}
	}
	for _, t := range m.tagTypes {
		if int(t) >= len(m.types) {
			return nil, fmt.Errorf("%w: tag type index %d out of range", ErrMalformed, t)
		}
	}
	return m, nil
}

func (m *module) parseTypes(r *reader) {
	n := r.u32()
	m.types = make([]funcType, 0, n)
	for ; n > 0 && r.err == nil; n-- {
		if form := r.byte(); form != 0x60 {
			// Recursion groups and subtypes belong to the GC proposal.
			r.fail("unsupported type form 0x%02x", form)
			return
		}
		var t funcType
		for k := r.u32(); k > 0 && r.err == nil; k-- {
			t.params = append(t.params, string(r.valType()))
		}
		for k := r.u32(); k > 0 && r.err == nil; k-- {
			t.results = append(t.results, string(r.valType()))
		}
		m.types = append(m.types, t)
	}
}

func (m *module) parseImports(r *reader) {
	for n := r.u32(); n > 0 && r.err == nil; n-- {
		r.name()
		r.name()
		switch kind := r.byte(); kind {
		case 0: // func
			r.u32()
			m.nFuncImports++
		case 1: // table
			r.valType()
			r.limits()
		case 2: // memory
			r.limits()
		case 3: // global
			r.valType()
			r.byte()
		case 4: // tag
			r.byte()
			m.tagTypes = append(m.tagTypes, r.u32())
		default:
			r.fail("unknown import kind 0x%02x", kind)
		}
	}
}

// limits skips a limits structure; flag bit 0 announces a maximum, bit 2
// (memory64) 64-bit numbers.
func (r *reader) limits() {
	flags := r.byte()
	r.skipLEB(10)
	if flags&1 != 0 {
		r.skipLEB(10)
	}
}

// localDecls reads the local declarations at the start of body and returns
// their count of entries, the number of locals they declare, and the
// offset where the code starts.
func localDecls(body []byte) (entries, locals uint32, code int, err error) {
	r := &reader{b: body}
	entries = r.u32()
	var total uint64
	for i := uint32(0); i < entries && r.err == nil; i++ {
		total += uint64(r.u32())
		r.valType()
	}
	if r.err != nil {
		return 0, 0, 0, r.err
	}
	if total > 50000 {
		return 0, 0, 0, fmt.Errorf("%w: %d locals", ErrMalformed, total)
	}
	return entries, uint32(total), r.pos, nil
}
