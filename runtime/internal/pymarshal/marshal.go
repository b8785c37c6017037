// Package pymarshal reads and writes the subset of CPython's marshal format
// that carries plain data between Go and the guest interpreter: None, bools,
// ints of any size, floats, complex, str, bytes, tuples, lists, dicts, sets
// and frozensets. The guest side is marshal.dumps / marshal.loads, which are
// built into CPython, fast, and need no import.
package pymarshal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"unicode/utf8"
)

// Set is a Python set or frozenset.
type Set []any

// Tuple is a Python tuple when a caller must tell it from a list (Encode
// writes []any as a list).
type Tuple []any

// Item is one key/value pair of a Dict.
type Item struct{ Key, Value any }

// Dict is a Python dict whose keys are not all strings, in insertion order.
// A dict whose keys are all str decodes to map[string]any.
type Dict []Item

// ErrFormat reports bytes that are not a marshal stream this package reads.
var ErrFormat = errors.New("pymarshal: malformed data")

const maxDepth = 2000

const flagRef = 0x80

// Decode reads one value. Tuples and lists decode to []any; ints to int64, or
// *big.Int when they do not fit; str to string; bytes to []byte.
func Decode(b []byte) (any, error) {
	return decode(b, false)
}

// DecodeOrdered is Decode, but a dict whose keys are all str and not in
// ascending order decodes to a Dict, which keeps its order.
func DecodeOrdered(b []byte) (any, error) {
	return decode(b, true)
}

func decode(b []byte, ordered bool) (any, error) {
	d := &decoder{b: b, ordered: ordered}
	v := d.value(0)
	if d.err != nil {
		return nil, d.err
	}
	return v, nil
}

type decoder struct {
	ordered bool // see DecodeOrdered
	b       []byte
	pos     int
	refs    []any
	err     error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s at offset %d", ErrFormat, fmt.Sprintf(format, args...), d.pos)
	}
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b)-d.pos {
		d.fail("truncated")
		return nil
	}
	s := d.b[d.pos : d.pos+n]
	d.pos += n
	return s
}

func (d *decoder) u8() byte {
	s := d.take(1)
	if s == nil {
		return 0
	}
	return s[0]
}

func (d *decoder) i32() int32 {
	s := d.take(4)
	if s == nil {
		return 0
	}
	return int32(binary.LittleEndian.Uint32(s))
}

// count reads a non-negative length no larger than the bytes left (every
// element takes at least one byte), so hostile lengths cannot allocate.
func (d *decoder) count() int {
	n := d.i32()
	if n < 0 || int(n) > len(d.b)-d.pos {
		d.fail("bad length %d", n)
		return 0
	}
	return int(n)
}

func (d *decoder) value(depth int) any {
	if d.err != nil {
		return nil
	}
	if depth > maxDepth {
		d.fail("nested too deeply")
		return nil
	}
	code := d.u8()
	ref := code&flagRef != 0
	code &^= flagRef
	slot := -1
	if ref {
		slot = len(d.refs)
		d.refs = append(d.refs, nil)
	}
	v := d.body(code, depth)
	if slot >= 0 && d.err == nil {
		d.refs[slot] = v
	}
	return v
}

func (d *decoder) body(code byte, depth int) any {
	switch code {
	case 'N':
		return nil
	case 'F':
		return false
	case 'T':
		return true
	case 'i':
		return int64(d.i32())
	case 'l':
		return d.long()
	case 'g':
		s := d.take(8)
		if s == nil {
			return nil
		}
		return math.Float64frombits(binary.LittleEndian.Uint64(s))
	case 'y':
		s := d.take(16)
		if s == nil {
			return nil
		}
		return complex(math.Float64frombits(binary.LittleEndian.Uint64(s)), math.Float64frombits(binary.LittleEndian.Uint64(s[8:])))
	case 's':
		b := d.take(d.count())
		if b == nil {
			return nil
		}
		return append([]byte{}, b...) // b'' is an empty []byte, not nil, as from a worker
	case 'u', 't', 'a', 'A':
		return d.str(d.count())
	case 'z', 'Z':
		return d.str(int(d.u8()))
	case ')':
		return d.seq(int(d.u8()), depth)
	case '(', '[':
		return d.seq(d.count(), depth)
	case '<', '>':
		return Set(d.seq(d.count(), depth))
	case '{':
		return d.dict(depth)
	case 'r':
		i := d.i32()
		if i < 0 || int(i) >= len(d.refs) {
			d.fail("bad reference %d", i)
			return nil
		}
		return d.refs[i]
	}
	d.fail("unsupported type code %q", code)
	return nil
}

func (d *decoder) str(n int) string {
	s := d.take(n)
	if s != nil && !utf8.Valid(s) {
		// Lone surrogates are written with surrogatepass; keep the bytes.
		return string(s)
	}
	return string(s)
}

func (d *decoder) seq(n int, depth int) []any {
	out := make([]any, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		out = append(out, d.value(depth+1))
	}
	return out
}

func (d *decoder) dict(depth int) any {
	var items Dict
	allStr := true
	for d.err == nil {
		if d.pos < len(d.b) && d.b[d.pos] == '0' {
			d.pos++
			break
		}
		k := d.value(depth + 1)
		v := d.value(depth + 1)
		if _, ok := k.(string); !ok {
			allStr = false
		}
		items = append(items, Item{k, v})
	}
	if d.err != nil {
		return nil
	}
	if !allStr {
		return items
	}
	if d.ordered {
		for i := 1; i < len(items); i++ {
			if items[i-1].Key.(string) >= items[i].Key.(string) {
				return items
			}
		}
	}
	m := make(map[string]any, len(items))
	for _, it := range items {
		m[it.Key.(string)] = it.Value
	}
	return m
}

// long reads a 'l' int: a signed digit count, then 15-bit digits, least
// significant first.
func (d *decoder) long() any {
	n := d.i32()
	neg := n < 0
	if neg {
		n = -n
	}
	if n < 0 || int(n)*2 > len(d.b)-d.pos {
		d.fail("bad int length")
		return nil
	}
	digits := d.take(int(n) * 2)
	v := new(big.Int)
	for i := int(n) - 1; i >= 0; i-- {
		v.Lsh(v, 15)
		v.Or(v, big.NewInt(int64(binary.LittleEndian.Uint16(digits[2*i:])&0x7fff)))
	}
	if neg {
		v.Neg(v)
	}
	if v.IsInt64() {
		return v.Int64()
	}
	return v
}
