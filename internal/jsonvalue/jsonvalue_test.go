package jsonvalue

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/rlm-sandbox/rlm-sandbox/runtime"
)

func dict(kv ...any) runtime.Dict {
	d := runtime.Dict{}
	for i := 0; i < len(kv); i += 2 {
		d = append(d, runtime.Item{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func TestDecode(t *testing.T) {
	big1, _ := new(big.Int).SetString("123456789012345678901234567890", 10)
	many := make([]string, 20)
	manyWant := runtime.Dict{}
	for i := range many {
		k := fmt.Sprintf("k%02d", 19-i)
		many[i] = fmt.Sprintf("%q: %d", k, i)
		manyWant = append(manyWant, runtime.Item{Key: k, Value: int64(i)})
	}
	// Repeats past the 16th key go through the index.
	many = append(many, `"k05": "last"`, `"k19": "again"`)
	manyWant[14].Value = "last"
	manyWant[0].Value = "again"
	for _, c := range []struct {
		in   string
		want any
	}{
		{`{"b": 1, "a": 2, "c": {"z": null, "y": true}}`, dict("b", int64(1), "a", int64(2), "c", dict("z", nil, "y", true))},
		{`{"a": 1, "b": 2, "a": 3}`, dict("a", int64(3), "b", int64(2))},
		{"{" + strings.Join(many, ", ") + "}", manyWant},
		{` [1, -0, 1.0, 1E5, 9223372036854775807, -9223372036854775808, 123456789012345678901234567890, []] `,
			[]any{int64(1), int64(0), 1.0, 1e5, int64(9223372036854775807), int64(-9223372036854775808), big1, []any{}}},
		{`"plain"`, "plain"},
		{`"tab\t quote\" back\\ u\u00e9 pair\ud83d\ude00 lone\ud800 end"`, "tab\t quote\" back\\ u\u00e9 pair\U0001F600 lone\uFFFD end"},
		{"\"bad \xff byte\"", "bad \uFFFD byte"},
		{`"\\"`, `\`},
		{`{}`, runtime.Dict{}},
		{`false`, false},
	} {
		got, err := Decode([]byte(c.in), 200)
		if err != nil {
			t.Errorf("Decode(%s): %v", c.in, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("Decode(%s) = %#v, want %#v", c.in, got, c.want)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, in := range []string{``, ` `, `{"a":}`, `1 2`, `[1,]`, `{"a" 1}`, `"open`, `nul`} {
		if v, err := Decode([]byte(in), 200); err == nil {
			t.Errorf("Decode(%q) = %#v, want an error", in, v)
		}
	}
	_, err := Decode([]byte(`[1e400]`), 200)
	var num *strconv.NumError
	if !errors.As(err, &num) || !errors.Is(err, strconv.ErrRange) {
		t.Errorf("Decode([1e400]): %v, want a *strconv.NumError with ErrRange", err)
	}
	for _, c := range []struct {
		in string
		ok bool
	}{
		{`[[]]`, true}, {`[[[]]]`, true}, {`[[[1]]]`, false}, {`{"a": {"b": [{}]}}`, false}, {`{"a": {"b": 1}}`, true},
	} {
		_, err := Decode([]byte(c.in), 2)
		if (err == nil) != c.ok {
			t.Errorf("Decode(%s, 2): %v, want ok %v", c.in, err, c.ok)
		}
	}
}

// plain turns a decoded value into what encoding/json would make of the
// same text with UseNumber (numbers compared as json.Number text is not
// possible: 1.0 and 1 differ there), and lists each object's keys.
func plain(v any, keys *[][]string) any {
	switch x := v.(type) {
	case runtime.Dict:
		m := map[string]any{}
		var ks []string
		for _, it := range x {
			m[it.Key.(string)] = plain(it.Value, keys)
			ks = append(ks, it.Key.(string))
		}
		*keys = append(*keys, ks)
		return m
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plain(e, keys)
		}
		return out
	case int64:
		return new(big.Float).SetInt64(x).String()
	case *big.Int:
		return new(big.Float).SetInt(x).String()
	case float64:
		return new(big.Float).SetFloat64(x).String()
	}
	return v
}

func reference(v any, keys *[][]string) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = reference(e, keys)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = reference(e, keys)
		}
		return x
	case json.Number:
		f, _ := strconv.ParseFloat(string(x), 64)
		if !strings.ContainsAny(string(x), ".eE") {
			if i, ok := new(big.Int).SetString(string(x), 10); ok {
				return new(big.Float).SetInt(i).String()
			}
		}
		return new(big.Float).SetFloat64(f).String()
	}
	return v
}

// keyOrder lists each object's keys in order of first appearance, objects
// in the order they end, as plain does; dup says a key repeats (then an
// object in the value it replaces is in the text, not in the result).
func keyOrder(data []byte) (out [][]string, dup bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // a number past float64's range is still a token
	var walk func()
	walk = func() {
		tok, err := dec.Token()
		if err != nil {
			panic(err)
		}
		switch tok {
		case json.Delim('{'):
			var ks []string
			seen := map[string]bool{}
			for dec.More() {
				k, _ := dec.Token()
				if !seen[k.(string)] {
					seen[k.(string)] = true
					ks = append(ks, k.(string))
				} else {
					dup = true
				}
				walk()
			}
			dec.Token()
			out = append(out, ks)
		case json.Delim('['):
			for dec.More() {
				walk()
			}
			dec.Token()
		}
	}
	walk()
	return out, dup
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[1,2,{"c":"\u00e9"}],"b":2}`, `[1e5, -0.5, 123456789012345678901234567890]`,
		`"x\ud800"`, `{"a":{"a":{"a":{}}}}`, `[`, `nul`, ` 7 `, `{"a":1,}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := Decode(data, 5)
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var ref any
		refErr := dec.Decode(&ref)
		if refErr == nil {
			if _, e := dec.Token(); e != io.EOF {
				refErr = errors.New("more")
			}
		}
		if (refErr != nil) != (err != nil) && !(refErr == nil && (strings.Contains(err.Error(), "nested") || errors.Is(err, strconv.ErrRange))) {
			t.Fatalf("Decode(%q): %v; encoding/json: %v", data, err, refErr)
		}
		if err != nil {
			return
		}
		var keys [][]string
		p := plain(got, &keys)
		if r := reference(ref, new([][]string)); !reflect.DeepEqual(p, r) {
			t.Fatalf("Decode(%q) = %#v, encoding/json %#v", data, p, r)
		}
		if want, dup := keyOrder(data); !dup && !reflect.DeepEqual(keys, want) && !(len(keys) == 0 && len(want) == 0) {
			t.Fatalf("Decode(%q): keys %q, want %q", data, keys, want)
		}
	})
}

func TestPlainString(t *testing.T) {
	for _, s := range []string{`"abc"`, `""`, `"é😀"`, `"a\"b"`, `"a\\b"`, `"\u00e9"`, "\"a\x01\"", "\"\xff\"", `"a"b"`, ` "x" `} {
		got, ok := plainString([]byte(s))
		var want string
		werr := json.Unmarshal([]byte(s), &want)
		if ok && (werr != nil || got != want) {
			t.Errorf("plainString(%q) = %q, json.Unmarshal: %q, %v", s, got, want, werr)
		}
	}
	if _, ok := plainString([]byte(`"plain text"`)); !ok {
		t.Error("a plain string took the slow path")
	}
}
