package exnref

import (
	"errors"
	"fmt"
)

// ErrMalformed reports a binary this package cannot read.
var ErrMalformed = errors.New("exnref: malformed module")

// reader reads LEB128 numbers and bytes from a slice. The first error sticks:
// later reads return zero values, so callers check err once after a group of
// reads.
type reader struct {
	b   []byte
	pos int
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s at offset %d", ErrMalformed, fmt.Sprintf(format, args...), r.pos)
	}
}

func (r *reader) done() bool { return r.err != nil || r.pos >= len(r.b) }

func (r *reader) byte() byte {
	if r.err != nil || r.pos >= len(r.b) {
		r.fail("unexpected end")
		return 0
	}
	c := r.b[r.pos]
	r.pos++
	return c
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

func (r *reader) skip(n int) {
	if r.err != nil || r.pos+n > len(r.b) {
		r.fail("unexpected end")
		return
	}
	r.pos += n
}

// u32 reads an unsigned LEB128 number of at most 32 bits.
func (r *reader) u32() uint32 {
	// Fast path: one byte.
	if r.err == nil && r.pos < len(r.b) && r.b[r.pos] < 0x80 {
		c := r.b[r.pos]
		r.pos++
		return uint32(c)
	}
	var v uint32
	for shift := uint(0); shift < 35; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		if shift == 28 && c&0x70 != 0 {
			r.fail("u32 overflows")
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

// s33 reads a signed LEB128 number of at most 33 bits (a block type).
func (r *reader) s33() int64 {
	var v int64
	var shift uint
	for {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		v |= int64(c&0x7f) << shift
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return v
		}
		if shift >= 35 {
			r.fail("s33 too long")
			return 0
		}
	}
}

// skipLEB skips a LEB128 number of at most maxBytes bytes.
func (r *reader) skipLEB(maxBytes int) {
	for i := 0; i < maxBytes; i++ {
		if r.byte()&0x80 == 0 {
			return
		}
	}
	r.fail("LEB128 too long")
}

func (r *reader) name() string { return string(r.bytes(r.u32())) }

// valType reads a value type and returns its encoding.
func (r *reader) valType() []byte {
	start := r.pos
	switch c := r.byte(); c {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, // i32 i64 f32 f64 v128
		0x70, 0x6f, 0x69, // funcref externref exnref
		0x6e, 0x6d, 0x6c, 0x6b, 0x6a, // anyref eqref i31ref structref arrayref
		0x71, 0x72, 0x73, 0x74: // nullref nullexternref nullfuncref nullexnref
	case 0x63, 0x64: // (ref null ht), (ref ht)
		r.s33()
	default:
		r.pos--
		r.fail("unknown value type 0x%02x", c)
		return nil
	}
	if r.err != nil {
		return nil
	}
	return r.b[start:r.pos]
}

// appendU32 appends v as unsigned LEB128.
func appendU32(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// sizeU32 is the length of v as unsigned LEB128.
func sizeU32(v uint32) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

// appendS33 appends v as signed LEB128.
func appendS33(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
