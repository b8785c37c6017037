package ipc

import (
	"fmt"
	"reflect"
	"strings"
	"unsafe"
)

// fieldKind is how one body field is carried on the wire.
type fieldKind uint8

const (
	fieldString fieldKind = iota + 1 // msgpack str
	fieldBool                        // msgpack bool
	fieldInt                         // any msgpack integer fitting the Go type
	fieldUint                        // any non-negative msgpack integer fitting the Go type
	fieldValue                       // any: a value (see EncodeValue)
	fieldList                        // []any: nil, or a value that decodes to []any
	fieldMap                         // map[string]any: nil, or a value that decodes to map[string]any
)

// field describes one exported struct field.
type field struct {
	name   string // wire name, from the msgpack struct tag
	index  int
	kind   fieldKind
	offset uintptr      // of the field in the struct, for decode
	typ    reflect.Type // the field's type
}

// structCodec encodes a body struct as a msgpack map from wire names to
// field values, in declaration order, and decodes it strictly: keys must
// be strings, each field's value must have the field's type (nil is not a
// string, a float is not an int, ...), no key may repeat, and unknown keys
// are errors unless the codec is lenient.
type structCodec struct {
	typ     reflect.Type
	fields  []field
	lenient bool
}

// newStructCodec builds the codec for a struct type. It fails only for
// programming errors in this package (untagged or unsupported fields).
func newStructCodec(t reflect.Type, lenient bool) (*structCodec, error) {
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("ipc: %s is not a struct", t)
	}
	c := &structCodec{typ: t, lenient: lenient}
	anyType := reflect.TypeFor[any]()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("msgpack"), ",")
		if name == "" || !f.IsExported() {
			return nil, fmt.Errorf("ipc: %s.%s needs a msgpack tag", t, f.Name)
		}
		var k fieldKind
		switch {
		case f.Type == anyType:
			k = fieldValue
		case f.Type == reflect.TypeFor[[]any]():
			k = fieldList
		case f.Type == reflect.TypeFor[map[string]any]():
			k = fieldMap
		case f.Type.Kind() == reflect.String:
			k = fieldString
		case f.Type.Kind() == reflect.Bool:
			k = fieldBool
		case f.Type.Kind() >= reflect.Int && f.Type.Kind() <= reflect.Int64:
			k = fieldInt
		case f.Type.Kind() >= reflect.Uint && f.Type.Kind() <= reflect.Uint64:
			k = fieldUint
		default:
			return nil, fmt.Errorf("ipc: %s.%s has unsupported type %s", t, f.Name, f.Type)
		}
		c.fields = append(c.fields, field{name: name, index: i, kind: k, offset: f.Offset, typ: f.Type})
	}
	if len(c.fields) > 64 {
		return nil, fmt.Errorf("ipc: %s has more than 64 fields", t)
	}
	return c, nil
}

// encode appends v, a value of c.typ, as a map.
func (c *structCodec) encode(w *writer, v reflect.Value) error {
	w.mapLen(len(c.fields))
	for _, f := range c.fields {
		w.str(f.name)
		fv := v.Field(f.index)
		switch f.kind {
		case fieldString:
			if fv.Len() > MaxFrameSize {
				return frameTooLarge(fv.Len())
			}
			w.str(fv.String())
		case fieldBool:
			w.bool(fv.Bool())
		case fieldInt:
			w.int(fv.Int())
		case fieldUint:
			w.uint(fv.Uint())
		case fieldList, fieldMap:
			if fv.IsNil() {
				w.nil()
				continue
			}
			fallthrough
		case fieldValue:
			if err := w.value(fv.Interface(), 0); err != nil {
				return fmt.Errorf("field %q: %w", f.name, err)
			}
		}
	}
	return nil
}

// decode reads a map into the struct of type c.typ at p. Fields missing
// from the map keep their zero value.
//
// It writes the fields through their offsets rather than through
// reflect.Value: decoding is on the path of every frame (see
// BenchmarkDecodeBridge and RATIONALE.md).
func (c *structCodec) decode(r *reader, p unsafe.Pointer) error {
	n, err := r.readMapLen()
	if err != nil {
		return err
	}
	var seen uint64
	for range n {
		key, err := r.readString()
		if err != nil {
			return fmt.Errorf("%w (in map key)", err)
		}
		i := c.lookup(key)
		if i < 0 {
			if !c.lenient {
				return malformedf("unknown field %q", key)
			}
			if err := r.skip(0); err != nil {
				return fmt.Errorf("field %q: %w", key, err)
			}
			continue
		}
		if seen&(1<<i) != 0 {
			return malformedf("duplicate field %q", key)
		}
		seen |= 1 << i
		if err := decodeField(r, &c.fields[i], unsafe.Add(p, c.fields[i].offset)); err != nil {
			return fmt.Errorf("field %q: %w", key, err)
		}
	}
	return nil
}

// decodeBody decodes a body of type T, whose codec is c, from r and
// returns r advanced past it. It takes and returns the reader by value: a
// reader passed by pointer to a function called through a variable moves
// to the heap.
func decodeBody[T any](c *structCodec, r reader) (any, reader, error) {
	var body T
	if err := c.decode(&r, unsafe.Pointer(&body)); err != nil {
		return nil, r, err
	}
	return body, r, nil
}

// lookup returns the position in c.fields of the field named name, or -1.
func (c *structCodec) lookup(name string) int {
	for i, f := range c.fields {
		if f.name == name {
			return i
		}
	}
	return -1
}

// decodeField reads one value of the field f into the field at p.
func decodeField(r *reader, f *field, p unsafe.Pointer) error {
	switch f.kind {
	case fieldString:
		s, err := r.readString()
		if err != nil {
			return err
		}
		*(*string)(p) = s
	case fieldBool:
		b, err := r.readBool()
		if err != nil {
			return err
		}
		*(*bool)(p) = b
	case fieldInt:
		n, err := r.readInt()
		if err != nil {
			return err
		}
		bits := f.typ.Bits()
		if n.big || (bits < 64 && n.i<<(64-bits)>>(64-bits) != n.i) {
			return malformedf("integer out of range for %s", f.typ)
		}
		storeBits(p, bits, uint64(n.i)) // two's complement: the low bits are the value
	case fieldUint:
		u, err := r.readUint()
		if err != nil {
			return err
		}
		bits := f.typ.Bits()
		if bits < 64 && u>>bits != 0 {
			return malformedf("integer out of range for %s", f.typ)
		}
		storeBits(p, bits, u)
	case fieldValue:
		x, err := decodeValue(r, 0)
		if err != nil {
			return err
		}
		*(*any)(p) = x
	case fieldList:
		if c, err := r.peek(); err == nil && isArray(c) {
			// The elements straight into the field: no []any boxed
			// in an interface on the way.
			n, err := r.readArrayLen()
			if err != nil {
				return err
			}
			l, err := decodeElements(r, n, 0)
			if err != nil {
				return err
			}
			*(*[]any)(p) = l
			return nil
		}
		x, err := decodeValue(r, 0)
		if err != nil || x == nil {
			return err
		}
		return malformedf("expected %s, got %T", f.typ, x)
	case fieldMap:
		x, err := decodeValue(r, 0)
		if err != nil || x == nil {
			return err
		}
		m, ok := x.(map[string]any)
		if !ok {
			return malformedf("expected %s, got %T", f.typ, x)
		}
		*(*map[string]any)(p) = m
	}
	return nil
}

// storeBits stores the low bits (8, 16, 32 or 64) of v in the integer at p.
func storeBits(p unsafe.Pointer, bits int, v uint64) {
	switch bits {
	case 8:
		*(*uint8)(p) = uint8(v)
	case 16:
		*(*uint16)(p) = uint16(v)
	case 32:
		*(*uint32)(p) = uint32(v)
	default:
		*(*uint64)(p) = v
	}
}
