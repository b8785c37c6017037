package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/rlm-sandbox/rlm-sandbox/internal/jsonvalue"
)

// Requests carry whole contexts (tens of MB in one string), and
// encoding/json reads a string a byte at a time through its scanner's
// state machine, once to check a document and once to decode it: a
// set_variable of a 10 MB string went through it eight times (the
// message's members, the params' members, the params struct, the value)
// and took 400 ms. splitObject finds an object's members in one pass that
// skips strings with bytes.IndexByte; each member is then checked by
// json.Valid, or decoded (which checks it), where it is used.

// splitObject returns the members of the JSON object b (which must be all
// of b, whitespace aside), name → raw value, as json.Unmarshal into a
// map[string]json.RawMessage does (a repeated name: the last one wins).
// Every value is checked to be JSON except those of the names in lazy,
// which the caller decodes (and so checks) itself.
func splitObject(b []byte, lazy ...string) (map[string]json.RawMessage, error) {
	i := skipSpace(b, 0)
	if i == len(b) || b[i] != '{' {
		return nil, errors.New("not a JSON object")
	}
	members := map[string]json.RawMessage{}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return members, trailing(b, i+1)
	}
	for {
		if i == len(b) || b[i] != '"' {
			return nil, fmt.Errorf("expected a member name at offset %d", i)
		}
		end, err := jsonvalue.SkipString(b, i)
		if err != nil {
			return nil, err
		}
		var name string
		if err := json.Unmarshal(b[i:end], &name); err != nil {
			return nil, err
		}
		i = skipSpace(b, end)
		if i == len(b) || b[i] != ':' {
			return nil, fmt.Errorf("expected ':' at offset %d", i)
		}
		i = skipSpace(b, i+1)
		start := i
		if i, err = skipValue(b, i, 0); err != nil {
			return nil, err
		}
		v := json.RawMessage(b[start:i])
		if !slices.Contains(lazy, name) && !json.Valid(v) {
			return nil, fmt.Errorf("member %q is not a JSON value", name)
		}
		members[name] = v
		i = skipSpace(b, i)
		switch {
		case i < len(b) && b[i] == ',':
			i = skipSpace(b, i+1)
		case i < len(b) && b[i] == '}':
			return members, trailing(b, i+1)
		default:
			return nil, fmt.Errorf("expected ',' or '}' at offset %d", i)
		}
	}
}

// trailing reports anything but whitespace after offset i.
func trailing(b []byte, i int) error {
	if i = skipSpace(b, i); i != len(b) {
		return fmt.Errorf("data after the object at offset %d", i)
	}
	return nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// maxSplitDepth bounds the arrays and objects skipValue follows into (the
// values themselves are checked for depth where they are decoded).
const maxSplitDepth = 10_000

// skipValue returns the offset just past the JSON value at b[i:], finding
// its end only: strings, arrays and objects are followed, other tokens
// run to the next delimiter.
func skipValue(b []byte, i, depth int) (int, error) {
	if i == len(b) {
		return i, errors.New("unexpected end of JSON")
	}
	switch b[i] {
	case '"':
		return jsonvalue.SkipString(b, i)
	case '{', '[':
		if depth == maxSplitDepth {
			return i, fmt.Errorf("nested more than %d levels deep", maxSplitDepth)
		}
		closing := byte('}')
		if b[i] == '[' {
			closing = ']'
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == closing {
			return i + 1, nil
		}
		for {
			var err error
			if i, err = skipValue(b, i, depth+1); err != nil {
				return i, err
			}
			i = skipSpace(b, i)
			if closing == '}' && i < len(b) && b[i] == ':' {
				i = skipSpace(b, i+1) // a member's value follows its name
				continue
			}
			switch {
			case i < len(b) && b[i] == ',':
				i = skipSpace(b, i+1)
			case i < len(b) && b[i] == closing:
				return i + 1, nil
			default:
				return i, fmt.Errorf("expected ',' or '%c' at offset %d", closing, i)
			}
		}
	}
	start := i
	for i < len(b) && !isDelimiter(b[i]) {
		i++
	}
	if i == start {
		return i, fmt.Errorf("unexpected %q at offset %d", b[i], i)
	}
	return i, nil
}

func isDelimiter(c byte) bool {
	switch c {
	case ',', '}', ']', ':', ' ', '\t', '\n', '\r', '"', '{', '[':
		return true
	}
	return false
}

// decodeMembers sets the fields of the struct v points to from members,
// by their exact JSON names (embedded structs' fields included); the
// caller has refused names v has no field for. A json.RawMessage field
// takes its member as it is (unchecked when lazy: its user decodes it).
func decodeMembers(members map[string]json.RawMessage, v any) error {
	s := reflect.ValueOf(v).Elem()
	for _, f := range jsonFields(s.Type()) {
		raw, ok := members[f.name]
		if !ok {
			continue
		}
		field := s.FieldByIndex(f.index)
		if field.Type() == rawMessageType {
			field.SetBytes(raw)
			continue
		}
		if err := json.Unmarshal(raw, field.Addr().Interface()); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return fmt.Errorf("%q: a %s cannot be a %s", f.name, te.Value, te.Type)
			}
			return fmt.Errorf("%q: %w", f.name, err)
		}
	}
	return nil
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// jsonField is a struct field encoding/json would decode: its JSON name
// and its index path (through embedded structs).
type jsonField struct {
	name  string
	index []int
}

// jsonFields lists the fields of struct type t that encoding/json
// decodes, those of embedded structs included.
func jsonFields(t reflect.Type) []jsonField {
	var fields []jsonField
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case f.Anonymous && name == "":
			for _, e := range jsonFields(f.Type) {
				fields = append(fields, jsonField{e.name, append([]int{i}, e.index...)})
			}
		case !f.IsExported() || name == "-":
		case name == "":
			fields = append(fields, jsonField{f.Name, []int{i}})
		default:
			fields = append(fields, jsonField{name, []int{i}})
		}
	}
	return fields
}

// tooDeep reports whether b is a JSON object that Go's decoder refuses
// only for its depth (json.Valid has failed on it): its members split
// without a limit on their depth (deep ones checked by skipDeep), and
// with them its "id" (nil when absent), whether it has a "method", and
// the method's name when it is a string.
func tooDeep(b []byte) (id json.RawMessage, hasMethod bool, method string, ok bool) {
	i := skipSpace(b, 0)
	if i == len(b) || b[i] != '{' {
		return nil, false, "", false
	}
	deep := false
	i = skipSpace(b, i+1)
	for i < len(b) && b[i] != '}' {
		if b[i] != '"' {
			return nil, false, "", false
		}
		end, err := jsonvalue.SkipString(b, i)
		if err != nil {
			return nil, false, "", false
		}
		var name string
		if json.Unmarshal(b[i:end], &name) != nil {
			return nil, false, "", false
		}
		if i = skipSpace(b, end); i == len(b) || b[i] != ':' {
			return nil, false, "", false
		}
		start := skipSpace(b, i+1)
		if i, err = skipDeep(b, start); err != nil {
			return nil, false, "", false
		}
		v := b[start:i]
		if !json.Valid(v) {
			deep = true
		}
		switch name {
		case "id":
			id = v
		case "method":
			hasMethod = true
			json.Unmarshal(v, &method)
		}
		switch i = skipSpace(b, i); {
		case i < len(b) && b[i] == ',':
			i = skipSpace(b, i+1)
		case i < len(b) && b[i] == '}':
		default:
			return nil, false, "", false
		}
	}
	if i == len(b) || trailing(b, i+1) != nil {
		return nil, false, "", false
	}
	return id, hasMethod, method, deep
}

// skipDeep returns the end of the JSON value at b[i], like skipValue but
// at any depth, counting brackets in a loop rather than recursing. It
// checks the value's strings and brackets, not the rest of its syntax.
func skipDeep(b []byte, i int) (int, error) {
	var open []byte
	for {
		if i == len(b) {
			return i, errors.New("unexpected end of JSON")
		}
		switch c := b[i]; c {
		case '"':
			end, err := jsonvalue.SkipString(b, i)
			if err != nil {
				return i, err
			}
			i = end
		case '{', '[':
			open = append(open, c)
			i++
		case '}', ']':
			if len(open) == 0 || (c == '}') != (open[len(open)-1] == '{') {
				return i, errors.New("unbalanced brackets")
			}
			open = open[:len(open)-1]
			i++
		default:
			if len(open) == 0 {
				return skipValue(b, i, 0) // a scalar
			}
			i++
		}
		if len(open) == 0 {
			return i, nil
		}
	}
}
