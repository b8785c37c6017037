// Package jsonvalue decodes JSON text into the Go values the runtime
// passes to Python, keeping the order of each object's members, as
// Python's json.loads does (encoding/json's map[string]any cannot).
package jsonvalue

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"unicode/utf8"

	"github.com/rlm-sandbox/rlm-sandbox/runtime"
)

// Decode decodes exactly one JSON value (surrounding white space
// allowed):
//
//   - an object becomes a runtime.Dict of string keys, in the order of
//     their first appearance; a repeated key keeps its first place and
//     takes its last value, as in a dict that json.loads builds;
//   - an array becomes []any;
//   - an integer becomes int64, or *big.Int beyond int64's range; any
//     other number float64 (one beyond float64's range fails with a
//     *strconv.NumError wrapping strconv.ErrRange);
//   - a string becomes a string (invalid escapes of surrogates become
//     U+FFFD, as encoding/json makes them); true, false and null become
//     true, false and nil.
//
// Text that is not one valid JSON value fails with encoding/json's error.
// So does a value nested more than maxDepth levels deep: the top-level
// value is at level 0, the members and elements of a container at level
// n at level n+1 (checked first, so that encoding/json's own limit of
// 10,000 levels is never the one met). A top-level string with no escape
// is taken as it is, without a scan of its text (a context, often large).
func Decode(data []byte, maxDepth int) (any, error) {
	if s, ok := plainString(data); ok {
		return s, nil
	}
	if err := checkDepth(data, maxDepth); err != nil {
		return nil, err
	}
	if !json.Valid(data) {
		// encoding/json says what is wrong, and where.
		var v any
		err := json.Unmarshal(data, &v)
		if err == nil {
			err = errors.New("invalid JSON")
		}
		return nil, err
	}
	d := decoder{b: data}
	return d.value()
}

// MaxDepth is how many levels below the top-level value the values passed
// to Python may nest (see Decode).
const MaxDepth = 200

// DepthError is the error of a value nested more than Max levels deep.
type DepthError struct{ Max int }

func (e *DepthError) Error() string {
	return fmt.Sprintf("the value is nested more than %d levels deep, the limit", e.Max)
}

// checkDepth fails when data nests values more than max levels deep. It
// looks at the brackets only (strings skipped), and leaves other errors to
// the decoder.
func checkDepth(data []byte, max int) error {
	open := 0 // containers open around the current position
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch c {
		case ' ', '\t', '\n', '\r', ',', ':':
			continue
		case ']', '}':
			open--
			continue
		}
		if open > max { // a value, or a key, inside a container at level max
			return &DepthError{Max: max}
		}
		switch c {
		case '[', '{':
			open++
		case '"':
			end, err := SkipString(data, i)
			if err != nil {
				return nil // unterminated: the decoder says so
			}
			i = end - 1
		}
	}
	return nil
}

// SkipString returns the offset just past the JSON string that starts at
// b[i] (a '"'), jumping from one quote to the next.
func SkipString(b []byte, i int) (int, error) {
	i++
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return len(b), errors.New("unterminated string")
		}
		// The quote ends the string unless an odd run of backslashes
		// escapes it.
		q := i + j
		n := 0
		for k := q - 1; k >= i && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return q + 1, nil
		}
		i = q + 1
	}
}

// plainString returns the text of the JSON string b when it needs no
// decoding: no escape, no control character, valid UTF-8.
func plainString(b []byte) (string, bool) {
	b = bytes.Trim(b, " \t\r\n") // JSON's white space, not bytes.TrimSpace's (\f, \v, U+0085)
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return "", false
	}
	inner := b[1 : len(b)-1]
	if bytes.IndexByte(inner, '"') >= 0 || bytes.IndexByte(inner, '\\') >= 0 {
		return "", false
	}
	for _, c := range inner {
		if c < 0x20 {
			return "", false
		}
	}
	if !utf8.Valid(inner) {
		return "", false
	}
	return string(inner), true
}

type decoder struct {
	b []byte
	i int
}

func (d *decoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// value decodes the value at d.i. The text has been validated (and its
// depth checked): what follows relies on it only for where tokens end,
// and fails rather than reading out of bounds if it was not.
func (d *decoder) value() (any, error) {
	d.space()
	if d.i >= len(d.b) {
		return nil, errors.New("unexpected end of JSON input")
	}
	switch c := d.b[d.i]; {
	case c == '{':
		return d.object()
	case c == '[':
		return d.array()
	case c == '"':
		return d.str()
	case c == 't':
		d.i += len("true")
		return true, nil
	case c == 'f':
		d.i += len("false")
		return false, nil
	case c == 'n':
		d.i += len("null")
		return nil, nil
	default:
		return d.number()
	}
}

func (d *decoder) object() (any, error) {
	d.i++ // {
	out := runtime.Dict{}
	var index map[string]int // key → its place in out, once out is long
	for {
		d.space()
		if d.i >= len(d.b) {
			return nil, errors.New("unexpected end of JSON input")
		}
		if d.b[d.i] == '}' {
			d.i++
			return out, nil
		}
		if d.b[d.i] == ',' {
			d.i++
			d.space()
		}
		k, err := d.str()
		if err != nil {
			return nil, err
		}
		d.space()
		d.i++ // :
		v, err := d.value()
		if err != nil {
			return nil, err
		}
		key := k.(string)
		at := -1
		if index != nil {
			if j, ok := index[key]; ok {
				at = j
			}
		} else {
			for j := range out {
				if out[j].Key == key {
					at = j
					break
				}
			}
		}
		if at >= 0 {
			out[at].Value = v
			continue
		}
		out = append(out, runtime.Item{Key: key, Value: v})
		switch {
		case index != nil:
			index[key] = len(out) - 1
		case len(out) == 16: // past this, a map finds repeats faster than a scan
			index = make(map[string]int, 32)
			for j, it := range out {
				index[it.Key.(string)] = j
			}
		}
	}
}

func (d *decoder) array() (any, error) {
	d.i++ // [
	out := []any{}
	for {
		d.space()
		if d.i >= len(d.b) {
			return nil, errors.New("unexpected end of JSON input")
		}
		if d.b[d.i] == ']' {
			d.i++
			return out, nil
		}
		if d.b[d.i] == ',' {
			d.i++
		}
		v, err := d.value()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
}

// str decodes the string at d.i: as it is when it has no escapes and is
// valid UTF-8, else through encoding/json (escapes, invalid bytes).
func (d *decoder) str() (any, error) {
	start := d.i
	if start >= len(d.b) || d.b[start] != '"' {
		return nil, errors.New("invalid JSON: expected a string")
	}
	end, err := SkipString(d.b, start)
	if err != nil {
		return nil, err
	}
	d.i = end
	raw := d.b[start+1 : end-1]
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw), nil
	}
	var s string
	if err := json.Unmarshal(d.b[start:end], &s); err != nil {
		return nil, err
	}
	return s, nil
}

// number decodes the number at d.i as Python's json module does: an
// integer literal becomes an int, anything else a float.
func (d *decoder) number() (any, error) {
	start := d.i
	isInt := true
	for d.i < len(d.b) {
		c := d.b[d.i]
		if c == '.' || c == 'e' || c == 'E' {
			isInt = false
		} else if !(c == '-' || c == '+' || c >= '0' && c <= '9') {
			break
		}
		d.i++
	}
	s := string(d.b[start:d.i])
	if isInt {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
		if b, ok := new(big.Int).SetString(s, 10); ok {
			return b, nil
		}
	}
	return strconv.ParseFloat(s, 64)
}
