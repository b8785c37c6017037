package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// Messages are decoded member by member, with names matched exactly:
// encoding/json alone matches names ignoring case, so {"ID": 1} or
// {"TIMEOUT_MS": 5} would be taken for "id" and "timeout_ms".

// envelope lists the members a JSON-RPC 2.0 message may have.
var envelope = []string{"jsonrpc", "id", "method", "params", "result", "error"}

// decodeMessage reads one message object. On error m still holds what
// could be read (its ID when that is valid, so the error can answer it),
// and err says what is wrong, for a -32600 Invalid Request.
func decodeMessage(raw []byte) (m *message, err error) {
	m = &message{}
	if raw[0] != '{' {
		return m, errors.New("not a JSON-RPC 2.0 message object")
	}
	// params and result are checked where they are decoded.
	members, err := splitObject(raw, "params", "result")
	if err != nil {
		return m, errors.New("not a JSON-RPC 2.0 message object")
	}
	if id, ok := members["id"]; ok {
		if !validID(id) {
			return m, errors.New(`"id" must be a string, a number or null`)
		}
		m.ID = id
	}
	_, m.HasMethod = members["method"]
	if name := unknownMember(members, envelope); name != "" {
		return m, fmt.Errorf("unknown member %q (a message has %s, named exactly so)", name, strings.Join(envelope, ", "))
	}
	if v, ok := members["jsonrpc"]; ok && json.Unmarshal(v, &m.JSONRPC) != nil {
		return m, errors.New(`"jsonrpc" must be "2.0"`)
	}
	m.Result, m.Error = members["result"], members["error"]
	if !m.HasMethod {
		return m, nil
	}
	if json.Unmarshal(members["method"], &m.Method) != nil || m.Method == "" {
		return m, errors.New(`"method" must be a non-empty string`)
	}
	if m.Result != nil || m.Error != nil {
		return m, errors.New(`a request has no "result" or "error"`)
	}
	if p, ok := members["params"]; ok && !isNull(p) { // null: as if left out, as clients send it
		if p = bytes.TrimSpace(p); p[0] != '{' && p[0] != '[' {
			return m, errors.New(`"params" must be an object of named parameters, or left out`)
		}
		m.Params = p
	}
	return m, nil
}

// validID: an id is absent, a string, a number or null.
func validID(id json.RawMessage) bool {
	id = bytes.TrimSpace(id)
	if len(id) == 0 {
		return true
	}
	switch c := id[0]; {
	case c == '"', c == 'n', c == '-', c >= '0' && c <= '9':
		return true
	}
	return false
}

// unknownMember returns the first member name, in sorted order, that is
// not one of known; "" when there is none.
func unknownMember(members map[string]json.RawMessage, known []string) string {
	var unknown []string
	for k := range members {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return ""
	}
	slices.Sort(unknown)
	return unknown[0]
}

// decodeParams reads params (an object; absent means {}) into v, a pointer
// to a struct, refusing names that are not exactly those of v's fields,
// so that a misspelt option is an error, not ignored.
func decodeParams(raw json.RawMessage, v any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	if raw[0] != '{' {
		return invalidParams("params must be an object (named parameters)")
	}
	// A value passed to Python (set_variable's value, create's context)
	// is checked where it is decoded (parseValue).
	members, err := splitObject(raw, "value", "context")
	if err != nil {
		return invalidParams("invalid params: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	known := paramNames(reflect.TypeOf(v).Elem())
	if name := unknownMember(members, known); name != "" {
		if len(known) == 0 {
			return invalidParams("unknown parameter %q: this method takes none", name)
		}
		slices.Sort(known)
		return invalidParams("unknown parameter %q (the parameters are %s)", name, strings.Join(known, ", "))
	}
	if err := decodeMembers(members, v); err != nil {
		return invalidParams("invalid params: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

// paramNames lists the JSON names of struct type t's fields, those of
// embedded structs included.
func paramNames(t reflect.Type) []string {
	var names []string
	for _, f := range jsonFields(t) {
		names = append(names, f.name)
	}
	return names
}

// noParams are the params of a method that takes none.
type noParams struct{}

func isNull(v json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(v), []byte("null")) }

// errNoMessage is the BridgeError of an error answer without a message.
const errNoMessage = "the client answered %s with an error and no message"

// readAnswer reads the client's answer m to a bridge request for method:
// the text a string result holds, or the error Python raises (as
// BridgeError). malformed is non-empty when m is not a JSON-RPC response
// (it says why); the call fails then too.
func readAnswer(m *message, method string) (text string, err error, malformed string) {
	switch {
	case m.Result != nil && m.Error != nil:
		malformed = `it has both "result" and "error"`
	case m.Result != nil:
		if isNull(m.Result) || json.Unmarshal(m.Result, &text) != nil {
			return "", fmt.Errorf("the client answered %s with %s, not a string", method, abbreviate(m.Result, 80)), ""
		}
		return text, nil, ""
	case m.Error != nil:
		var members map[string]json.RawMessage
		if json.Unmarshal(m.Error, &members) != nil || members == nil {
			malformed = fmt.Sprintf(`"error" must be an object with "code" and "message", not %s`, abbreviate(m.Error, 40))
			break
		}
		var code float64
		var msg string
		if c, ok := members["code"]; ok && (isNull(c) || json.Unmarshal(c, &code) != nil) {
			malformed = fmt.Sprintf(`the error's "code" must be a number, not %s`, abbreviate(c, 40))
			break
		}
		if v, ok := members["message"]; ok && (isNull(v) || json.Unmarshal(v, &msg) != nil) {
			malformed = fmt.Sprintf(`the error's "message" must be a string, not %s`, abbreviate(v, 40))
			break
		}
		if strings.TrimSpace(msg) == "" {
			return "", fmt.Errorf(errNoMessage, method), ""
		}
		return "", errors.New(msg), ""
	default:
		malformed = `it has neither "result" nor "error"`
	}
	return "", fmt.Errorf("the client's answer to %s was malformed: %s", method, malformed), malformed
}
