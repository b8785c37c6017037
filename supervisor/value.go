package supervisor

import (
	"bytes"
	"cmp"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/rlm-sandbox/rlm-sandbox/internal/jsonvalue"
	"github.com/rlm-sandbox/rlm-sandbox/runtime"
)

// maxValueDepth bounds the nesting of values passed to Python.
const maxValueDepth = jsonvalue.MaxDepth

// pythonValue converts a JSON-like Go value to the types the runtime
// passes to Python: strings, []byte, bools, nil, int64, *big.Int, float64,
// complex128 (complex64 widened), []any, map[string]any and the runtime's
// Set, Tuple and Dict (its list keys as tuples) stay as they are;
// json.Number becomes an int or a float; other slices, arrays and maps
// with string keys are converted element by element, and maps with number,
// bool or interface keys become a runtime.Dict with those keys (see
// keyedDict); a big.Int value is a *big.Int; anything else that
// encoding/json can marshal (structs, for example) is converted through its
// JSON form, objects (struct fields among them) keeping their order as a
// runtime.Dict.
func pythonValue(v any) (any, error) {
	return convertValue(v, 0)
}

// errTooDeep is the error of a value nested deeper than maxValueDepth; it
// names no path (a value that contains itself would name the same key a
// few hundred times).
var errTooDeep = fmt.Errorf("value nested more than %d levels deep (or one that contains itself: a cycle)", maxValueDepth)

func convertValue(v any, depth int) (any, error) {
	if depth > maxValueDepth {
		return nil, errTooDeep
	}
	switch x := v.(type) {
	case nil, string, []byte, bool, int64, float64, complex128, *big.Int, runtime.Set, runtime.Tuple:
		return v, nil
	case runtime.Dict:
		return dictKeysHashable(x), nil
	case complex64:
		return complex128(x), nil
	case big.Int:
		return &x, nil
	case int:
		return int64(x), nil
	case int8:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case uint8:
		return int64(x), nil
	case uint16:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case uint:
		return uintValue(uint64(x)), nil
	case uint64:
		return uintValue(x), nil
	case float32:
		return float64(x), nil
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, nil
		}
		if b, ok := new(big.Int).SetString(string(x), 10); ok {
			return b, nil
		}
		f, err := x.Float64()
		if err != nil {
			return nil, fmt.Errorf("bad JSON number %q", string(x))
		}
		return f, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			c, err := convertValue(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			c, err := convertValue(e, depth+1)
			if errors.Is(err, errTooDeep) {
				return nil, err
			}
			if err != nil {
				return nil, fmt.Errorf("%q: %w", k, err)
			}
			out[k] = c
		}
		return out, nil
	case json.RawMessage:
		return fromJSON(x, depth)
	case json.Marshaler, encoding.TextMarshaler:
		// A type with its own JSON form (a named string or number type
		// included) goes as that form, as encoding/json would write it.
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("a %T cannot be passed to Python: %w", v, err)
		}
		return fromJSON(b, depth)
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return nil, nil
		}
		return convertValue(rv.Elem().Interface(), depth+1)
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return []any{}, nil
		}
		out := make([]any, rv.Len())
		for i := range out {
			c, err := convertValue(rv.Index(i).Interface(), depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case reflect.Map:
		if rv.Type().Key().Kind() == reflect.String {
			out := make(map[string]any, rv.Len())
			it := rv.MapRange()
			for it.Next() {
				c, err := convertValue(it.Value().Interface(), depth+1)
				if err != nil {
					return nil, err
				}
				out[it.Key().String()] = c
			}
			return out, nil
		}
		if k := rv.Type().Key(); scalarKey(k) || k.Kind() == reflect.Interface {
			return keyedDict(rv, depth)
		}
	case reflect.String:
		return rv.String(), nil
	case reflect.Bool:
		return rv.Bool(), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return uintValue(rv.Uint()), nil
	case reflect.Float32, reflect.Float64:
		return rv.Float(), nil
	case reflect.Complex64, reflect.Complex128:
		return rv.Complex(), nil
	case reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return nil, fmt.Errorf("a %T cannot be passed to Python", v)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("a %T cannot be passed to Python: %w", v, err)
	}
	return fromJSON(b, depth)
}

// scalarKey reports whether a map with keys of type t becomes a dict with
// those keys as Python ints, floats or bools: keys of such a kind, unless
// the type writes itself as text (encoding/json then writes that, and the
// map goes through JSON as any other).
func scalarKey(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Bool:
		return !t.Implements(textMarshalerType) && !reflect.PointerTo(t).Implements(textMarshalerType)
	}
	return false
}

var textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()

// keyedDict converts a map whose keys are numbers or bools (scalarKey), or
// interfaces (map[any]any, as YAML decoders make), to a runtime.Dict with
// the keys converted, in ascending order (by kind, then value), as a map
// with string keys arrives sorted; one whose keys all turn out to be
// strings becomes a map[string]any. A key that Python could not hash (a
// list, a map) is an error.
func keyedDict(rv reflect.Value, depth int) (any, error) {
	out := make(runtime.Dict, 0, rv.Len())
	strs := true
	seen := make(map[string]any, rv.Len())
	it := rv.MapRange() // MapIndex cannot find a NaN key
	for it.Next() {
		key, err := convertValue(it.Key().Interface(), depth+1)
		if err != nil {
			return nil, err
		}
		if keyRank(key) < 0 {
			return nil, fmt.Errorf("a map key of type %T cannot be a Python dict key", it.Key().Interface())
		}
		if f, ok := key.(float64); !ok || !math.IsNaN(f) { // NaN is never equal, not even to itself
			pk := pyKey(key)
			if other, dup := seen[pk]; dup {
				return nil, fmt.Errorf("map keys %#v and %#v are one Python dict key (Python compares True, 1 and 1.0 equal)", other, it.Key().Interface())
			}
			seen[pk] = it.Key().Interface()
		}
		c, err := convertValue(it.Value().Interface(), depth+1)
		if err != nil {
			return nil, fmt.Errorf("%v: %w", key, err)
		}
		_, isStr := key.(string)
		strs = strs && isStr
		out = append(out, runtime.Item{Key: key, Value: c})
	}
	if strs {
		m := make(map[string]any, len(out))
		for _, kv := range out {
			m[kv.Key.(string)] = kv.Value
		}
		return m, nil
	}
	slices.SortStableFunc(out, func(a, b runtime.Item) int { return compareKeys(a.Key, b.Key) })
	return out, nil
}

// dictKeysHashable is d with its list keys as tuples: GetVariable gives a
// tuple as a []any, and a dict with tuple keys would otherwise not go back
// in (a list cannot be a dict key, so nothing else is meant).
func dictKeysHashable(d runtime.Dict) runtime.Dict {
	for i, it := range d {
		if _, ok := it.Key.([]any); ok {
			out := slices.Clone(d)
			for j := i; j < len(out); j++ {
				out[j].Key = tupleKey(out[j].Key)
			}
			return out
		}
	}
	return d
}

// tupleKey is k with its lists, at any depth, as tuples.
func tupleKey(k any) any {
	l, ok := k.([]any)
	if !ok {
		return k
	}
	t := make(runtime.Tuple, len(l))
	for i, e := range l {
		t[i] = tupleKey(e)
	}
	return t
}

// pyKey is a converted map key as Python compares dict keys: True, 1, 1.0
// and 1+0j are one key. Two keys with the same pyKey would be merged by
// Python, keeping one of them by chance (a Go map has no order).
func pyKey(k any) string {
	switch x := k.(type) {
	case bool:
		return "n" + strconv.Itoa(b2i(x))
	case int64:
		return "n" + strconv.FormatInt(x, 10)
	case *big.Int:
		return "n" + x.String()
	case float64:
		if !math.IsInf(x, 0) && !math.IsNaN(x) && x == math.Trunc(x) {
			b, _ := new(big.Float).SetFloat64(x).Int(nil)
			return "n" + b.String()
		}
		return "f" + strconv.FormatFloat(x, 'g', -1, 64)
	case complex128:
		if imag(x) == 0 {
			return pyKey(real(x))
		}
		return "c" + fmt.Sprint(x)
	case string:
		return "s" + x
	case []byte:
		return "b" + string(x)
	case runtime.Tuple:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = strconv.Quote(pyKey(e))
		}
		return "t(" + strings.Join(parts, ",") + ")"
	}
	return fmt.Sprintf("?%v", k)
}

// keyRank orders converted map keys by kind (-1: not hashable in Python).
func keyRank(k any) int {
	switch k.(type) {
	case nil:
		return 0
	case bool:
		return 1
	case int64, *big.Int, float64:
		return 2
	case complex128:
		return 3
	case string:
		return 4
	case []byte:
		return 5
	case runtime.Tuple:
		return 6
	}
	return -1
}

// compareKeys orders two converted map keys: by kind, then by value
// (numbers by value, tuples by their text).
func compareKeys(a, b any) int {
	if c := cmp.Compare(keyRank(a), keyRank(b)); c != 0 {
		return c
	}
	switch x := a.(type) {
	case bool:
		return cmp.Compare(b2i(x), b2i(b.(bool)))
	case string:
		return cmp.Compare(x, b.(string))
	case []byte:
		return bytes.Compare(x, b.([]byte))
	case int64, *big.Int, float64:
		return compareNumbers(a, b)
	}
	return cmp.Compare(fmt.Sprint(a), fmt.Sprint(b))
}

// compareNumbers orders int64, *big.Int and float64 values (NaN first).
func compareNumbers(a, b any) int {
	fa, aFloat := a.(float64)
	fb, bFloat := b.(float64)
	if aFloat || bFloat {
		if !aFloat {
			fa, _ = new(big.Float).SetInt(bigOf(a)).Float64()
		}
		if !bFloat {
			fb, _ = new(big.Float).SetInt(bigOf(b)).Float64()
		}
		return cmp.Compare(fa, fb)
	}
	return bigOf(a).Cmp(bigOf(b))
}

func bigOf(n any) *big.Int {
	if i, ok := n.(int64); ok {
		return big.NewInt(i)
	}
	return n.(*big.Int)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// fromJSON decodes JSON text found at the given depth; objects keep the
// order of their members (see jsonvalue.Decode).
func fromJSON(b []byte, depth int) (any, error) {
	x, err := jsonvalue.Decode(b, maxValueDepth-depth)
	if err != nil {
		return nil, fmt.Errorf("bad JSON: %w", err)
	}
	return x, nil
}

func uintValue(u uint64) any {
	if u <= math.MaxInt64 {
		return int64(u)
	}
	return new(big.Int).SetUint64(u)
}

// pythonName reports whether name may be a variable name of Python code:
// an identifier (str.isidentifier: a letter or "_", then letters, digits,
// "_" and combining marks) that is not a keyword. It is exact for ASCII.
// Go's Unicode tables are older than Python's: a character they have not
// assigned is let through, never refused, and so are the few letters that
// Python refuses because of their NFKC form.
func pythonName(name string) bool {
	if name == "" || !utf8.ValidString(name) || pythonKeywords[name] {
		return false
	}
	for i, r := range name {
		if !identifierRune(r, i == 0) {
			return false
		}
	}
	return true
}

func identifierRune(r rune, first bool) bool {
	if r < utf8.RuneSelf {
		return r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || !first && '0' <= r && r <= '9'
	}
	if unicode.In(r, unicode.L, unicode.Nl, unicode.Other_ID_Start) {
		return true
	}
	// U+200C, U+200D, U+30FB and U+FF65 continue an identifier since
	// Unicode 15.1.
	if !first && (unicode.In(r, unicode.Mn, unicode.Mc, unicode.Nd, unicode.Pc, unicode.Other_ID_Continue) ||
		r == 0x200C || r == 0x200D || r == 0x30FB || r == 0xFF65) {
		return true
	}
	// unicode.C would include the unassigned.
	return !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z,
		unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs)
}

// pythonKeywords are keyword.kwlist of Python 3.14 (soft keywords such as
// match and type are names).
var pythonKeywords = map[string]bool{
	"False": true, "None": true, "True": true, "and": true, "as": true, "assert": true, "async": true,
	"await": true, "break": true, "class": true, "continue": true, "def": true, "del": true, "elif": true,
	"else": true, "except": true, "finally": true, "for": true, "from": true, "global": true, "if": true,
	"import": true, "in": true, "is": true, "lambda": true, "nonlocal": true, "not": true, "or": true,
	"pass": true, "raise": true, "return": true, "try": true, "while": true, "with": true, "yield": true,
}
