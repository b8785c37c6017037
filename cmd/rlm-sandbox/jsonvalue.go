package main

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unsafe"

	"github.com/rlm-sandbox/rlm-sandbox/internal/jsonvalue"
	"github.com/rlm-sandbox/rlm-sandbox/internal/pytext"
	"github.com/rlm-sandbox/rlm-sandbox/runtime"
)

// parseValue decodes a JSON value passed to Python (a context, a
// variable) into the values Python's own types come from (see
// jsonvalue.Decode): one nested deeper than jsonvalue.MaxDepth is an error.
func parseValue(data []byte) (any, error) {
	return jsonvalue.Decode(data, jsonvalue.MaxDepth)
}

// toJSON converts a value that came from Python (see
// supervisor.Sandbox.GetVariable) to one encoding/json can write, the way
// Python's json.dumps would where it can: tuples and sets become arrays,
// dict keys strings ("1", "true", "null"); bytes become a string (invalid
// UTF-8 replaced), complex numbers and non-finite floats their Python repr
// ("(1+2j)", "nan", "inf", "-inf").
func toJSON(v any) any {
	switch x := v.(type) {
	case string:
		return pytext.Replace(x) // a lone surrogate's bytes: one U+FFFD
	case nil, bool, int64, *big.Int:
		return x
	case float64:
		switch {
		case math.IsNaN(x):
			return "nan"
		case math.IsInf(x, 1):
			return "inf"
		case math.IsInf(x, -1):
			return "-inf"
		}
		return jsonFloat(x)
	case complex128:
		return pyComplexRepr(x)
	case []byte:
		return pytext.Replace(string(x))
	case []any:
		return toJSONList(x)
	case runtime.Tuple:
		return toJSONList(x)
	case runtime.Set:
		return toJSONList(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = toJSON(e)
		}
		return out
	case runtime.Dict:
		// A JSON object with the dict's members in its order (a key that
		// two Python keys share, 1 and "1", keeps its first place and
		// takes the last value, as json.dumps would write it twice).
		out := make(jsonObject, 0, len(x))
		at := make(map[string]int, len(x))
		for _, it := range x {
			k, v := jsonKey(it.Key), toJSON(it.Value)
			if i, ok := at[k]; ok {
				out[i].value = v
				continue
			}
			at[k] = len(out)
			out = append(out, jsonMember{k, v})
		}
		return out
	case int:
		return int64(x)
	case float32:
		return toJSON(float64(x))
	}
	return fmt.Sprint(v)
}

func toJSONList(x []any) []any {
	out := make([]any, len(x))
	for i, e := range x {
		out[i] = toJSON(e)
	}
	return out
}

// jsonKey is the object key json.dumps gives a dict key.
func jsonKey(k any) string {
	switch x := k.(type) {
	case string:
		return pytext.Replace(x)
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(x)
	case float64:
		if s, ok := toJSON(x).(string); ok {
			return s
		}
		return pyFloatRepr(x)
	}
	b, err := json.Marshal(toJSON(k))
	if err != nil {
		return fmt.Sprint(k)
	}
	var s string
	if json.Unmarshal(b, &s) == nil {
		return s
	}
	return string(b)
}

func pyComplexRepr(c complex128) string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	if real(c) == 0 && !math.Signbit(real(c)) {
		return f(imag(c)) + "j"
	}
	sign := "+"
	if imag(c) < 0 || math.Signbit(imag(c)) {
		sign = ""
	}
	return "(" + f(real(c)) + sign + f(imag(c)) + "j)"
}

// jsonFloat is a finite float written as json.dumps writes it: Python's
// repr, so that 1.0 stays a float ("1.0", not encoding/json's "1") and
// -0.0 keeps its sign.
type jsonFloat float64

// MarshalJSON writes f's Python repr.
func (f jsonFloat) MarshalJSON() ([]byte, error) { return []byte(pyFloatRepr(float64(f))), nil }

// pyFloatRepr is repr(x) of a finite float: the shortest digits that read
// back as x, in positional notation when the exponent is from -4 to 15
// (with ".0" when x is integral), else as d.ddde±XX.
func pyFloatRepr(x float64) string {
	e := strconv.FormatFloat(math.Abs(x), 'e', -1, 64) // d.ddde±XX
	mant, exp, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	n, _ := strconv.Atoi(exp)
	sign := ""
	if math.Signbit(x) {
		sign = "-"
	}
	if n < -4 || n >= 16 {
		es := strconv.Itoa(max(n, -n))
		if len(es) < 2 {
			es = "0" + es
		}
		if n < 0 {
			es = "-" + es
		} else {
			es = "+" + es
		}
		return sign + mant + "e" + es
	}
	point := n + 1 // digits before the decimal point
	switch {
	case point <= 0:
		return sign + "0." + strings.Repeat("0", -point) + digits
	case point >= len(digits):
		return sign + digits + strings.Repeat("0", point-len(digits)) + ".0"
	}
	return sign + digits[:point] + "." + digits[point:]
}

// text makes file contents a Python str: invalid UTF-8 is replaced with
// U+FFFD rather than refused, so any file can be a context, as Python's
// decode("utf-8", "replace") would (the same character offsets).
func text(b []byte) string { return pytext.Replace(string(b)) }

// fileText is text for a file's contents as os.ReadFile or readExact
// return them, which the caller gives up: the string is made of b's
// bytes, not of a copy (both allocate the contents' length, so nothing is
// held for nothing; io.ReadAll's buffer may be twice its length, so text
// copies it). A 150 MB --context-file took the command to 306 MB with the
// copy, 161 MB without.
func fileText(b []byte) string { return pytext.Replace(unsafe.String(unsafe.SliceData(b), len(b))) }

// jsonObject is a JSON object whose members keep their order.
type jsonObject []jsonMember

type jsonMember struct {
	key   string
	value any
}

// MarshalJSON writes the members in order.
func (o jsonObject) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, m := range o {
		if i > 0 {
			b = append(b, ',')
		}
		k, err := json.Marshal(m.key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(m.value)
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}
