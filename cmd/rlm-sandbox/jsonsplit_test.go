package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"strings"
	"testing"
)

var splitSeeds = []string{
	`{}`, ` { } `, `{"a":1}`, `{"a" : [1, {"b": "}"}], "c": "x\"y\\", "d": null}`,
	`{"id":"\u0069d","id":2}`, `{"s":"\\\\\"","t":"\\"}`, `{"n":-1.5e3,"t":true,"f":false}`,
	`{"deep":[[[[{"x":[1,2,{"y":"]"}]}]]]]}`, `{"é":"ü","😀":"\ud83d\ude00"}`,
	`{"a":1,}`, `{"a":1} x`, `{"a"}`, `{"a":}`, `{"a":1:2}`, `{"a":"unterminated}`, `[1]`, `"s"`, ``,
	`{"v":"` + "\x01" + `"}`, `{"a":[1,2}`, `{"a":{"b":1,"c"}}`,
}

// splitObject finds what json.Unmarshal into a map of raw members finds,
// for every JSON object, and refuses what it refuses at the top level
// (a member's own validity is checked by json.Valid, or where the caller
// decodes the lazy ones).
func FuzzSplitObject(f *testing.F) {
	for _, s := range splitSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := splitObject(b)
		var want map[string]json.RawMessage
		werr := json.Unmarshal(b, &want)
		if werr != nil && !(len(bytes.TrimSpace(b)) > 0 && bytes.TrimSpace(b)[0] == '{') {
			if err == nil {
				t.Fatalf("%q: accepted what is not an object", b)
			}
			return
		}
		if (err == nil) != (werr == nil) {
			t.Fatalf("%q: splitObject err %v, json.Unmarshal err %v", b, err, werr)
		}
		if err == nil && !maps.EqualFunc(got, want, func(a, b json.RawMessage) bool { return bytes.Equal(a, b) }) {
			t.Fatalf("%q: got %q, want %q", b, got, want)
		}
	})
}

func TestTooDeep(t *testing.T) {
	deep := strings.Repeat("[", 10_001) + strings.Repeat("]", 10_001)
	for _, c := range []struct {
		line      string
		id        string
		hasMethod bool
		ok        bool
	}{
		{`{"jsonrpc":"2.0","id":7,"method":"create","params":{"context":` + deep + `}}`, "7", true, true},
		{`{"jsonrpc":"2.0","id":"b1","error":{"code":1,"message":"m","data":` + deep + `}}`, `"b1"`, false, true},
		{`{"method":"x","params":` + deep + `}`, "", true, true},
		{`{"id":7,"method":"create","params":{"context":[1]}}`, "", false, false},            // not too deep
		{`{"id":7,"method":"create","params":` + deep[:len(deep)-1] + `}`, "", false, false}, // not JSON
		{`{"id":7 "method":"create","params":` + deep + `}`, "", false, false},
		{`[` + deep + `]`, "", false, false},
	} {
		id, hasMethod, _, ok := tooDeep([]byte(c.line))
		if ok != c.ok || (ok && (string(id) != c.id || hasMethod != c.hasMethod)) {
			t.Errorf("%.60s: id %s, method %v, ok %v; want %s %v %v", c.line, id, hasMethod, ok, c.id, c.hasMethod, c.ok)
		}
	}
}
