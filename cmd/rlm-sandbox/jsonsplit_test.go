package main

import (
	"bytes"
	"encoding/json"
	"maps"
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
