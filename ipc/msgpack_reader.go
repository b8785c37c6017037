package ipc

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// reader decodes msgpack primitives from an in-memory buffer. It is the
// only msgpack parser this package uses on untrusted input: every length it
// reads is checked against the bytes actually remaining before anything is
// allocated, and every error wraps ErrMalformed. The walkers over nested
// data (skip, decodeValue) stop at MaxDepth so hostile nesting cannot
// exhaust the stack.
type reader struct {
	buf []byte
	off int
	// owned says buf is never written again, so strings may share its
	// memory instead of copying it.
	owned bool
}

// remaining reports how many unread bytes are left.
func (r *reader) remaining() int { return len(r.buf) - r.off }

// peek returns the next type code without consuming it.
func (r *reader) peek() (byte, error) {
	if r.off >= len(r.buf) {
		return 0, malformedf("unexpected end of data")
	}
	return r.buf[r.off], nil
}

// take consumes n bytes and returns them without copying.
func (r *reader) take(n uint64) ([]byte, error) {
	if n > uint64(r.remaining()) {
		return nil, malformedf("need %d bytes, only %d left", n, r.remaining())
	}
	b := r.buf[r.off : r.off+int(n) : r.off+int(n)]
	r.off += int(n)
	return b, nil
}

// length reads the 8-, 16- or 32-bit length that follows a type code of
// the given width in bytes.
func (r *reader) length(width int) (uint64, error) {
	switch width {
	case 1:
		v, err := r.byte()
		return uint64(v), err
	case 2:
		v, err := r.uint16()
		return uint64(v), err
	default:
		v, err := r.uint32()
		return uint64(v), err
	}
}

func (r *reader) byte() (byte, error) {
	b, err := r.take(1)
	if err != nil {
		return 0, err
	}
	return b[0], nil
}

func (r *reader) uint16() (uint16, error) {
	b, err := r.take(2)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint16(b), nil
}

func (r *reader) uint32() (uint32, error) {
	b, err := r.take(4)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint32(b), nil
}

func (r *reader) uint64() (uint64, error) {
	b, err := r.take(8)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint64(b), nil
}

// describe names the msgpack type a code starts, for error messages.
func describe(c byte) string {
	switch {
	case c == msgpcode.Nil:
		return "nil"
	case c == msgpcode.True || c == msgpcode.False:
		return "bool"
	case isInt(c):
		return "integer"
	case c == msgpcode.Float || c == msgpcode.Double:
		return "float"
	case msgpcode.IsString(c):
		return "string"
	case msgpcode.IsBin(c):
		return "bytes"
	case isArray(c):
		return "array"
	case isMap(c):
		return "map"
	case msgpcode.IsExt(c):
		return "extension"
	}
	return fmt.Sprintf("reserved code 0x%02x", c)
}

func isInt(c byte) bool {
	return msgpcode.IsFixedNum(c) || (c >= msgpcode.Uint8 && c <= msgpcode.Int64)
}

func isArray(c byte) bool {
	return msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32
}

func isMap(c byte) bool {
	return msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32
}

// readNil consumes a nil.
func (r *reader) readNil() error {
	c, err := r.byte()
	if err != nil {
		return err
	}
	if c != msgpcode.Nil {
		return malformedf("expected nil, got %s", describe(c))
	}
	return nil
}

// readBool consumes a bool.
func (r *reader) readBool() (bool, error) {
	c, err := r.byte()
	if err != nil {
		return false, err
	}
	switch c {
	case msgpcode.True:
		return true, nil
	case msgpcode.False:
		return false, nil
	}
	return false, malformedf("expected bool, got %s", describe(c))
}

// integer is a decoded msgpack integer: either a value that fits int64, or
// (big set) an unsigned value above math.MaxInt64 held in u.
type integer struct {
	i   int64
	u   uint64
	big bool
}

// readInt consumes an integer of any msgpack width. Floats are rejected.
func (r *reader) readInt() (integer, error) {
	c, err := r.byte()
	if err != nil {
		return integer{}, err
	}
	if msgpcode.IsFixedNum(c) {
		return integer{i: int64(int8(c))}, nil
	}
	switch c {
	case msgpcode.Uint8:
		v, err := r.byte()
		return integer{i: int64(v)}, err
	case msgpcode.Uint16:
		v, err := r.uint16()
		return integer{i: int64(v)}, err
	case msgpcode.Uint32:
		v, err := r.uint32()
		return integer{i: int64(v)}, err
	case msgpcode.Uint64:
		v, err := r.uint64()
		if v > math.MaxInt64 {
			return integer{u: v, big: true}, err
		}
		return integer{i: int64(v)}, err
	case msgpcode.Int8:
		v, err := r.byte()
		return integer{i: int64(int8(v))}, err
	case msgpcode.Int16:
		v, err := r.uint16()
		return integer{i: int64(int16(v))}, err
	case msgpcode.Int32:
		v, err := r.uint32()
		return integer{i: int64(int32(v))}, err
	case msgpcode.Int64:
		v, err := r.uint64()
		return integer{i: int64(v)}, err
	}
	return integer{}, malformedf("expected integer, got %s", describe(c))
}

// readUint consumes a non-negative integer that fits uint64.
func (r *reader) readUint() (uint64, error) {
	n, err := r.readInt()
	switch {
	case err != nil:
		return 0, err
	case n.big:
		return n.u, nil
	case n.i < 0:
		return 0, malformedf("expected unsigned integer, got %d", n.i)
	}
	return uint64(n.i), nil
}

// readFloat consumes a float32 or float64 as a float64.
func (r *reader) readFloat() (float64, error) {
	c, err := r.byte()
	if err != nil {
		return 0, err
	}
	switch c {
	case msgpcode.Float:
		v, err := r.uint32()
		return float64(math.Float32frombits(v)), err
	case msgpcode.Double:
		v, err := r.uint64()
		return math.Float64frombits(v), err
	}
	return 0, malformedf("expected float, got %s", describe(c))
}

// readString consumes a msgpack str (not bin).
func (r *reader) readString() (string, error) {
	c, err := r.byte()
	if err != nil {
		return "", err
	}
	var n uint64
	switch {
	case msgpcode.IsFixedString(c):
		n = uint64(c & msgpcode.FixedStrMask)
	case c == msgpcode.Str8:
		n, err = r.length(1)
	case c == msgpcode.Str16:
		n, err = r.length(2)
	case c == msgpcode.Str32:
		n, err = r.length(4)
	default:
		return "", malformedf("expected string, got %s", describe(c))
	}
	if err != nil {
		return "", err
	}
	b, err := r.take(n)
	if err != nil || len(b) == 0 {
		return "", err
	}
	if r.owned {
		return unsafe.String(&b[0], len(b)), nil
	}
	return string(b), nil
}

// readBytes consumes a msgpack bin (not str) and returns a copy.
func (r *reader) readBytes() ([]byte, error) {
	c, err := r.byte()
	if err != nil {
		return nil, err
	}
	var n uint64
	switch c {
	case msgpcode.Bin8:
		n, err = r.length(1)
	case msgpcode.Bin16:
		n, err = r.length(2)
	case msgpcode.Bin32:
		n, err = r.length(4)
	default:
		return nil, malformedf("expected bytes, got %s", describe(c))
	}
	if err != nil {
		return nil, err
	}
	b, err := r.take(n)
	if err != nil {
		return nil, err
	}
	return append([]byte{}, b...), nil
}

// readArrayLen consumes an array header. The count is checked against the
// remaining bytes (every element takes at least one byte), so callers may
// size allocations by it.
func (r *reader) readArrayLen() (int, error) {
	c, err := r.byte()
	if err != nil {
		return 0, err
	}
	var n uint64
	switch {
	case msgpcode.IsFixedArray(c):
		n = uint64(c & msgpcode.FixedArrayMask)
	case c == msgpcode.Array16:
		n, err = r.length(2)
	case c == msgpcode.Array32:
		n, err = r.length(4)
	default:
		return 0, malformedf("expected array, got %s", describe(c))
	}
	if err != nil {
		return 0, err
	}
	if n > uint64(r.remaining()) {
		return 0, malformedf("array of %d elements in %d bytes", n, r.remaining())
	}
	return int(n), nil
}

// readMapLen consumes a map header. The count is checked against the
// remaining bytes (every entry takes at least two bytes).
func (r *reader) readMapLen() (int, error) {
	c, err := r.byte()
	if err != nil {
		return 0, err
	}
	var n uint64
	switch {
	case msgpcode.IsFixedMap(c):
		n = uint64(c & msgpcode.FixedMapMask)
	case c == msgpcode.Map16:
		n, err = r.length(2)
	case c == msgpcode.Map32:
		n, err = r.length(4)
	default:
		return 0, malformedf("expected map, got %s", describe(c))
	}
	if err != nil {
		return 0, err
	}
	if n > uint64(r.remaining()/2) {
		return 0, malformedf("map of %d entries in %d bytes", n, r.remaining())
	}
	return int(n), nil
}

// readExt consumes an extension and returns its type and payload (not
// copied).
func (r *reader) readExt() (int8, []byte, error) {
	c, err := r.byte()
	if err != nil {
		return 0, nil, err
	}
	var n uint64
	switch c {
	case msgpcode.FixExt1:
		n = 1
	case msgpcode.FixExt2:
		n = 2
	case msgpcode.FixExt4:
		n = 4
	case msgpcode.FixExt8:
		n = 8
	case msgpcode.FixExt16:
		n = 16
	case msgpcode.Ext8:
		n, err = r.length(1)
	case msgpcode.Ext16:
		n, err = r.length(2)
	case msgpcode.Ext32:
		n, err = r.length(4)
	default:
		return 0, nil, malformedf("expected extension, got %s", describe(c))
	}
	if err != nil {
		return 0, nil, err
	}
	t, err := r.byte()
	if err != nil {
		return 0, nil, err
	}
	payload, err := r.take(n)
	return int8(t), payload, err
}

// skip consumes one complete value of any msgpack type, nested at most
// MaxDepth levels below depth.
func (r *reader) skip(depth int) error {
	if depth > MaxDepth {
		return tooDeepError{also: ErrMalformed}
	}
	c, err := r.peek()
	if err != nil {
		return err
	}
	switch {
	case c == msgpcode.Nil:
		return r.readNil()
	case c == msgpcode.True || c == msgpcode.False:
		_, err = r.readBool()
	case isInt(c):
		_, err = r.readInt()
	case c == msgpcode.Float || c == msgpcode.Double:
		_, err = r.readFloat()
	case msgpcode.IsString(c):
		_, err = r.readString()
	case msgpcode.IsBin(c):
		_, err = r.readBytes()
	case msgpcode.IsExt(c):
		_, _, err = r.readExt()
	case isArray(c):
		var n int
		if n, err = r.readArrayLen(); err != nil {
			return err
		}
		for range n {
			if err := r.skip(depth + 1); err != nil {
				return err
			}
		}
	case isMap(c):
		var n int
		if n, err = r.readMapLen(); err != nil {
			return err
		}
		for range 2 * n {
			if err := r.skip(depth + 1); err != nil {
				return err
			}
		}
	default:
		return malformedf("unexpected %s", describe(c))
	}
	return err
}
