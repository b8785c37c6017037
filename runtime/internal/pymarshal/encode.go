package pymarshal

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"sort"

	"github.com/rlm-sandbox/rlm-sandbox/internal/pytext"
)

// Encode writes v in marshal format. It accepts nil, bool, every Go integer
// and float type, *big.Int, big.Int, complex128, string (invalid UTF-8
// replaced by U+FFFD), []byte, Tuple, Set,
// Dict, and through reflection any slice or array (as a list) and any map
// (as a dict; keys sorted when they are strings, for a stable result).
func Encode(v any) ([]byte, error) {
	e := &encoder{}
	if err := e.value(reflect.ValueOf(v), v, 0); err != nil {
		return nil, err
	}
	return e.b, nil
}

type encoder struct{ b []byte }

func (e *encoder) i32(v int32) {
	e.b = binary.LittleEndian.AppendUint32(e.b, uint32(v))
}

func (e *encoder) int(v *big.Int) {
	if v.IsInt64() && v.Int64() >= math.MinInt32 && v.Int64() <= math.MaxInt32 {
		e.b = append(e.b, 'i')
		e.i32(int32(v.Int64()))
		return
	}
	a := new(big.Int).Abs(v)
	var digits []uint16
	mask := big.NewInt(0x7fff)
	for a.Sign() > 0 {
		digits = append(digits, uint16(new(big.Int).And(a, mask).Uint64()))
		a.Rsh(a, 15)
	}
	n := int32(len(digits))
	if v.Sign() < 0 {
		n = -n
	}
	e.b = append(e.b, 'l')
	e.i32(n)
	for _, dg := range digits {
		e.b = binary.LittleEndian.AppendUint16(e.b, dg)
	}
}

func (e *encoder) seq(code byte, n int, item func(i int) error) error {
	e.b = append(e.b, code)
	e.i32(int32(n))
	for i := 0; i < n; i++ {
		if err := item(i); err != nil {
			return err
		}
	}
	return nil
}

func (e *encoder) value(rv reflect.Value, v any, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("pymarshal: value nested too deeply")
	}
	switch x := v.(type) {
	case nil:
		e.b = append(e.b, 'N')
		return nil
	case bool:
		if x {
			e.b = append(e.b, 'T')
		} else {
			e.b = append(e.b, 'F')
		}
		return nil
	case *big.Int:
		if x == nil {
			e.b = append(e.b, 'N')
			return nil
		}
		e.int(x)
		return nil
	case big.Int:
		e.int(&x)
		return nil
	case string:
		x = Text(x)
		e.b = append(e.b, 'u')
		e.i32(int32(len(x)))
		e.b = append(e.b, x...)
		return nil
	case []byte:
		e.b = append(e.b, 's')
		e.i32(int32(len(x)))
		e.b = append(e.b, x...)
		return nil
	case Tuple:
		return e.seq('(', len(x), func(i int) error { return e.any(x[i], depth) })
	case Set:
		return e.seq('<', len(x), func(i int) error { return e.any(x[i], depth) })
	case Dict:
		e.b = append(e.b, '{')
		for _, it := range x {
			if err := e.any(it.Key, depth); err != nil {
				return err
			}
			if err := e.any(it.Value, depth); err != nil {
				return err
			}
		}
		e.b = append(e.b, '0')
		return nil
	case complex128:
		e.b = append(e.b, 'y')
		e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(real(x)))
		e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(imag(x)))
		return nil
	}
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		e.int(big.NewInt(rv.Int()))
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		e.int(new(big.Int).SetUint64(rv.Uint()))
		return nil
	case reflect.Float32, reflect.Float64:
		e.b = append(e.b, 'g')
		e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(rv.Float()))
		return nil
	case reflect.String:
		return e.value(reflect.Value{}, rv.String(), depth)
	case reflect.Bool:
		return e.value(reflect.Value{}, rv.Bool(), depth)
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			e.b = append(e.b, '[')
			e.i32(0)
			return nil
		}
		return e.seq('[', rv.Len(), func(i int) error { return e.any(rv.Index(i).Interface(), depth) })
	case reflect.Map:
		keys := rv.MapKeys()
		if rv.Type().Key().Kind() == reflect.String {
			sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		}
		e.b = append(e.b, '{')
		for _, k := range keys {
			if err := e.any(k.Interface(), depth); err != nil {
				return err
			}
			if err := e.any(rv.MapIndex(k).Interface(), depth); err != nil {
				return err
			}
		}
		e.b = append(e.b, '0')
		return nil
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			e.b = append(e.b, 'N')
			return nil
		}
		return e.any(rv.Elem().Interface(), depth)
	}
	return fmt.Errorf("pymarshal: cannot convert a Go %T to a Python value", v)
}

func (e *encoder) any(v any, depth int) error {
	return e.value(reflect.ValueOf(v), v, depth+1)
}

// Text returns s as a Python str holds it: text, so bytes that are not
// UTF-8 become U+FFFD, as Python's own "replace" decoding does.
func Text(s string) string { return pytext.Replace(s) }
