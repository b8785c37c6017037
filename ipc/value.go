package ipc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"slices"
	"sort"

	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// MaxDepth bounds the nesting of values. The top-level value is at depth 0
// and the elements, keys and values of a container are one deeper than the
// container; EncodeValue and DecodeValue reject anything deeper than
// MaxDepth with ErrTooDeep, which keeps hostile or cyclic input from
// exhausting the stack.
const MaxDepth = 256

// Extension type numbers used inside values. All other extension types are
// rejected.
const (
	// ExtBigInt carries an integer outside [math.MinInt64,
	// math.MaxUint64]. Payload: one sign byte (0 positive, 1 negative)
	// followed by the big-endian magnitude without leading zero bytes.
	ExtBigInt int8 = 1

	// ExtSet carries a Python set or frozenset. Payload: a msgpack array
	// of the elements, each a value.
	ExtSet int8 = 2

	// ExtComplex carries a Python complex number. Payload: the real and
	// imaginary parts as big-endian IEEE 754 float64s (16 bytes).
	ExtComplex int8 = 3

	// ExtTuple carries a tuple the caller asked for (Tuple): payload, a
	// msgpack array of the elements. The worker's own values never use
	// it (tuples travel as arrays, as lists do).
	ExtTuple int8 = 4
)

// Tuple is a value that must reach Python as a tuple (runtime.Tuple on
// the wire): as a key of a Dict, say, where a list cannot be. It encodes
// as ExtTuple; a plain array decodes as []any.
type Tuple []any

// Set is a Python set or frozenset: its elements in iteration order. It is
// a slice rather than a Go map because Python set elements (tuples,
// frozensets, big integers) are often not comparable in Go. Uniqueness is
// not checked.
type Set []any

// Dict is a Python dict as ordered key/value pairs: one with a key that is
// not a string, or one whose order matters (a dict whose keys are all
// strings, in ascending order, decodes as map[string]any instead). Keys
// may be any value (ints, floats, None, tuples as []any, frozensets as
// Set, ...), which is why this is not a Go map.
type Dict []Pair

// Pair is one entry of a Dict.
type Pair struct {
	Key   any
	Value any
}

// EncodeValue encodes a Python value from its Go form into msgpack.
//
// It accepts nil (None), bool, every Go integer type, *big.Int, float32,
// complex64, complex128,
// float64, string, []byte, []any (list or tuple), map[string]any, Dict,
// Set, map[any]any, and by reflection other slices, arrays, maps and
// pointers built from those. Maps are written in a deterministic order
// (string-keyed maps sorted by key, other maps by encoded key), so equal
// values encode to equal bytes; a Dict keeps its order (a Python dict
// built from JSON keeps its members' order), and must not repeat a key.
// Anything else fails with ErrUnsupportedValue; nesting beyond MaxDepth
// (including cycles) fails with ErrTooDeep; output larger than
// MaxFrameSize fails with ErrFrameTooLarge.
func EncodeValue(v any) ([]byte, error) {
	var w writer
	if err := w.value(v, 0); err != nil {
		return nil, fmt.Errorf("ipc: encode value: %w", err)
	}
	if len(w.b) > MaxFrameSize {
		return nil, fmt.Errorf("ipc: encode value: %w", frameTooLarge(len(w.b)))
	}
	return w.b, nil
}

// EncodeStagedValue is EncodeValue without the MaxFrameSize limit, for a
// value too large for one frame, which is sent in Stage frames.
func EncodeStagedValue(v any) ([]byte, error) {
	var w writer
	if err := w.value(v, 0); err != nil {
		return nil, fmt.Errorf("ipc: encode value: %w", err)
	}
	return w.b, nil
}

// DecodeValue decodes exactly one msgpack value, as written by
// EncodeValue, into its canonical Go form:
//
//	nil                          None
//	bool                         bool
//	int64                        int fitting int64
//	*big.Int                     any other int (never one fitting int64)
//	float64                      float (msgpack float32 is widened)
//	complex128                   complex
//	string                       str
//	[]byte                       bytes, bytearray
//	[]any                        list, tuple
//	map[string]any               dict whose keys are all strings, written
//	                             in ascending order (as EncodeValue
//	                             writes a map[string]any)
//	Dict                         any other dict, in the order written
//	Set                          set, frozenset
//
// Errors wrap ErrMalformed: trailing bytes, unknown extension types,
// non-canonical big integers, duplicate keys in a string-keyed map, and
// nesting beyond MaxDepth (also ErrTooDeep). Container lengths are checked
// against the input size before anything is allocated.
func DecodeValue(b []byte) (any, error) {
	r := reader{buf: b}
	v, err := decodeValue(&r, 0)
	if err == nil && r.remaining() != 0 {
		err = malformedf("%d trailing bytes after value", r.remaining())
	}
	if err != nil {
		return nil, fmt.Errorf("ipc: decode value: %w", err)
	}
	return v, nil
}

// value appends v at the given depth.
func (w *writer) value(v any, depth int) error {
	if depth > MaxDepth {
		return tooDeepError{also: ErrUnsupportedValue}
	}
	if len(w.b) > MaxFrameSize {
		return frameTooLarge(len(w.b))
	}
	switch x := v.(type) {
	case nil:
		w.nil()
	case bool:
		w.bool(x)
	case int:
		w.int(int64(x))
	case int8:
		w.int(int64(x))
	case int16:
		w.int(int64(x))
	case int32:
		w.int(int64(x))
	case int64:
		w.int(x)
	case uint:
		w.uint(uint64(x))
	case uint8:
		w.uint(uint64(x))
	case uint16:
		w.uint(uint64(x))
	case uint32:
		w.uint(uint64(x))
	case uint64:
		w.uint(x)
	case float32:
		w.float(float64(x))
	case float64:
		w.float(x)
	case complex128:
		w.complex(x)
	case complex64:
		w.complex(complex128(x))
	case string:
		if len(x) > MaxFrameSize {
			return frameTooLarge(len(x))
		}
		w.str(x)
	case []byte:
		if len(x) > MaxFrameSize {
			return frameTooLarge(len(x))
		}
		w.bin(x)
	case *big.Int:
		return w.bigInt(x)
	case []any:
		return w.list(len(x), func(i int) any { return x[i] }, depth)
	case Set:
		return w.arrayExt(ExtSet, x, depth)
	case Tuple:
		return w.arrayExt(ExtTuple, x, depth)
	case map[string]any:
		return w.stringMap(x, depth)
	case Dict:
		return w.dict(x, depth)
	case map[any]any:
		return w.reflectMap(reflect.ValueOf(x), depth)
	default:
		return w.reflectValue(reflect.ValueOf(v), depth)
	}
	return nil
}

// bigInt appends x as a native integer when it fits one, else as ExtBigInt.
func (w *writer) bigInt(x *big.Int) error {
	switch {
	case x == nil:
		w.nil()
	case x.IsInt64():
		w.int(x.Int64())
	case x.IsUint64():
		w.uint(x.Uint64())
	default:
		n := (x.BitLen() + 7) / 8
		if n+1 > MaxFrameSize {
			return frameTooLarge(n + 1)
		}
		payload := make([]byte, 1+n)
		if x.Sign() < 0 {
			payload[0] = 1
		}
		x.FillBytes(payload[1:])
		w.ext(ExtBigInt, payload)
	}
	return nil
}

// list appends n elements produced by at as an array.
func (w *writer) list(n int, at func(int) any, depth int) error {
	w.arrayLen(n)
	for i := range n {
		if err := w.value(at(i), depth+1); err != nil {
			return err
		}
	}
	return nil
}

// complex appends c as ExtComplex.
func (w *writer) complex(c complex128) {
	var payload [16]byte
	binary.BigEndian.PutUint64(payload[:8], math.Float64bits(real(c)))
	binary.BigEndian.PutUint64(payload[8:], math.Float64bits(imag(c)))
	w.ext(ExtComplex, payload[:])
}

// arrayExt appends xs as an extension of type typ whose payload is a
// msgpack array of them (ExtSet, ExtTuple).
func (w *writer) arrayExt(typ int8, xs []any, depth int) error {
	var inner writer
	if err := inner.list(len(xs), func(i int) any { return xs[i] }, depth); err != nil {
		return err
	}
	if len(inner.b) > MaxFrameSize {
		return frameTooLarge(len(inner.b))
	}
	w.ext(typ, inner.b)
	return nil
}

// stringMap appends m with its keys in sorted order.
func (w *writer) stringMap(m map[string]any, depth int) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	w.mapLen(len(keys))
	for _, k := range keys {
		if err := w.value(k, depth+1); err != nil {
			return err
		}
		if err := w.value(m[k], depth+1); err != nil {
			return err
		}
	}
	return nil
}

// dict appends d in its own order. A Dict must not repeat a string key
// (a map[string]any, which it may decode as, cannot).
func (w *writer) dict(d Dict, depth int) error {
	seen := make(map[string]struct{}, len(d))
	for _, p := range d {
		if k, ok := p.Key.(string); ok {
			if _, dup := seen[k]; dup {
				return unsupportedf("duplicate dict key %q", k)
			}
			seen[k] = struct{}{}
		}
	}
	w.mapLen(len(d))
	for _, p := range d {
		if err := w.value(p.Key, depth+1); err != nil {
			return err
		}
		if err := w.value(p.Value, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// reflectMap appends any Go map. Keys are encoded first and the entries
// written in the order of their encoded keys, so the output does not
// depend on map iteration order; two keys with the same encoding (for
// example int(1) and int64(1)) are an error.
func (w *writer) reflectMap(m reflect.Value, depth int) error {
	type entry struct {
		key []byte
		val reflect.Value
	}
	entries := make([]entry, 0, m.Len())
	for it := m.MapRange(); it.Next(); {
		var kw writer
		if err := kw.value(it.Key().Interface(), depth+1); err != nil {
			return err
		}
		entries = append(entries, entry{kw.b, it.Value()})
	}
	sort.Slice(entries, func(i, j int) bool { return bytes.Compare(entries[i].key, entries[j].key) < 0 })
	w.mapLen(len(entries))
	for i, e := range entries {
		if i > 0 && bytes.Equal(entries[i-1].key, e.key) {
			return unsupportedf("two keys of %s encode the same", m.Type())
		}
		w.b = append(w.b, e.key...)
		if err := w.value(e.val.Interface(), depth+1); err != nil {
			return err
		}
	}
	return nil
}

// reflectValue appends values of named or composite types not matched by
// the fast path in value.
func (w *writer) reflectValue(v reflect.Value, depth int) error {
	switch v.Kind() {
	case reflect.Bool:
		w.bool(v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		w.int(v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		w.uint(v.Uint())
	case reflect.Float32, reflect.Float64:
		w.float(v.Float())
	case reflect.String:
		return w.value(v.String(), depth)
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			b := make([]byte, v.Len())
			reflect.Copy(reflect.ValueOf(b), v)
			return w.value(b, depth)
		}
		return w.list(v.Len(), func(i int) any { return v.Index(i).Interface() }, depth)
	case reflect.Map:
		return w.reflectMap(v, depth)
	case reflect.Pointer:
		if v.IsNil() {
			w.nil()
			return nil
		}
		return w.value(v.Elem().Interface(), depth+1)
	default:
		return unsupportedf("cannot encode %s", v.Type())
	}
	return nil
}

// decodeValue reads one value at the given depth.
func decodeValue(r *reader, depth int) (any, error) {
	if depth > MaxDepth {
		return nil, tooDeepError{also: ErrMalformed}
	}
	c, err := r.peek()
	if err != nil {
		return nil, err
	}
	switch {
	case c == msgpcode.Nil:
		return nil, r.readNil()
	case c == msgpcode.True || c == msgpcode.False:
		return r.readBool()
	case isInt(c):
		n, err := r.readInt()
		if err != nil {
			return nil, err
		}
		if n.big {
			return new(big.Int).SetUint64(n.u), nil
		}
		return n.i, nil
	case c == msgpcode.Float || c == msgpcode.Double:
		return r.readFloat()
	case msgpcode.IsString(c):
		return r.readString()
	case msgpcode.IsBin(c):
		return r.readBytes()
	case isArray(c):
		n, err := r.readArrayLen()
		if err != nil {
			return nil, err
		}
		return decodeElements(r, n, depth)
	case isMap(c):
		return decodeMap(r, depth)
	case msgpcode.IsExt(c):
		return decodeExt(r, depth)
	}
	return nil, malformedf("unexpected %s in value", describe(c))
}

// decodeElements reads n values one level below depth.
func decodeElements(r *reader, n, depth int) ([]any, error) {
	s := make([]any, n) // n <= r.remaining(), checked by readArrayLen
	for i := range s {
		v, err := decodeValue(r, depth+1)
		if err != nil {
			return nil, err
		}
		s[i] = v
	}
	return s, nil
}

// decodeMap reads a map: map[string]any when every key is a string and
// the keys come in ascending order (as a map[string]any is written), else
// Dict, which keeps the order written.
func decodeMap(r *reader, depth int) (any, error) {
	n, err := r.readMapLen()
	if err != nil {
		return nil, err
	}
	d := make(Dict, n) // n <= r.remaining()/2, checked by readMapLen
	allStrings, sorted := true, true
	for i := range d {
		if d[i].Key, err = decodeValue(r, depth+1); err != nil {
			return nil, err
		}
		if d[i].Value, err = decodeValue(r, depth+1); err != nil {
			return nil, err
		}
		k, ok := d[i].Key.(string)
		if !ok {
			allStrings = false
		} else if sorted && i > 0 {
			prev, _ := d[i-1].Key.(string)
			sorted = prev < k
		}
	}
	if !allStrings {
		return d, nil
	}
	m := make(map[string]any, n)
	for _, p := range d {
		k := p.Key.(string)
		if _, dup := m[k]; dup {
			return nil, malformedf("duplicate map key %q", k)
		}
		m[k] = p.Value
	}
	if !sorted {
		return d, nil
	}
	return m, nil
}

// decodeExt reads an ExtBigInt, ExtComplex, ExtSet or ExtTuple.
func decodeExt(r *reader, depth int) (any, error) {
	typ, payload, err := r.readExt()
	if err != nil {
		return nil, err
	}
	switch typ {
	case ExtBigInt:
		return decodeBigInt(payload)
	case ExtComplex:
		if len(payload) != 16 {
			return nil, malformedf("complex payload of %d bytes, want 16", len(payload))
		}
		re := math.Float64frombits(binary.BigEndian.Uint64(payload[:8]))
		im := math.Float64frombits(binary.BigEndian.Uint64(payload[8:]))
		return complex(re, im), nil
	case ExtSet, ExtTuple:
		inner := reader{buf: payload, owned: r.owned}
		n, err := inner.readArrayLen()
		if err != nil {
			return nil, err
		}
		s, err := decodeElements(&inner, n, depth)
		if err != nil {
			return nil, err
		}
		if inner.remaining() != 0 {
			return nil, malformedf("%d trailing bytes in an extension", inner.remaining())
		}
		if typ == ExtTuple {
			return Tuple(s), nil
		}
		return Set(s), nil
	}
	return nil, malformedf("unknown extension type %d", typ)
}

// decodeBigInt parses an ExtBigInt payload, accepting only the canonical
// form EncodeValue writes.
func decodeBigInt(p []byte) (*big.Int, error) {
	if len(p) < 2 || p[0] > 1 || p[1] == 0 {
		return nil, malformedf("bad big integer encoding")
	}
	x := new(big.Int).SetBytes(p[1:])
	if p[0] == 1 {
		x.Neg(x)
	}
	if x.IsInt64() || x.IsUint64() {
		return nil, malformedf("big integer %s fits a msgpack integer", x)
	}
	return x, nil
}
