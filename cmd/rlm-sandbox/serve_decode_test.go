package main

import (
	"encoding/json"
	"slices"
	"testing"
)

// FuzzDecodeMessage: any JSON line decodes without panicking; a message
// accepted as a request has a method and a valid id, and its answer to a
// bridge request is read without panicking either.
func FuzzDecodeMessage(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"version"}`,
		`{"jsonrpc":"2.0","id":"b1","result":"x"}`,
		`{"jsonrpc":"2.0","id":"b1","error":{"code":1,"message":""}}`,
		`{"jsonrpc":"2.0","id":"b1","error":"oops"}`,
		`{"jsonrpc":"2.0","ID":1,"method":"version","params":null}`,
		`{"jsonrpc":"2.0","id":true,"method":"create","params":{"Context":1}}`,
		`[1]`, `"x"`, `{}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) || len(raw) == 0 || raw[0] == ' ' || raw[0] == '\t' || raw[0] == '\n' || raw[0] == '\r' {
			return // handleLine passes on trimmed, valid JSON only
		}
		m, err := decodeMessage(raw)
		if m == nil {
			t.Fatal("no message")
		}
		if !validID(m.ID) {
			t.Fatalf("invalid id %q kept", m.ID)
		}
		if err == nil && m.HasMethod && m.Method == "" {
			t.Fatal("a request without a method accepted")
		}
		if err == nil && !m.HasMethod {
			text, aerr, malformed := readAnswer(m, "llm_query")
			if aerr == nil && (m.Result == nil || m.Error != nil || malformed != "") {
				t.Fatalf("answer %q: text %q and no error", raw, text)
			}
			if malformed != "" && aerr == nil {
				t.Fatalf("answer %q: malformed (%s) but no error", raw, malformed)
			}
		}
		if err == nil && m.Params != nil {
			decodeParams(m.Params, &createParams{})
			decodeParams(m.Params, &noParams{})
		}
	})
}

// TestCreateIndexURL: create's index_url is a list of strings or one.
func TestCreateIndexURL(t *testing.T) {
	for _, c := range []struct {
		params string
		want   []string // nil: absent
		bad    bool
	}{
		{`{"index_url": "/opt/pyodide"}`, []string{"/opt/pyodide"}, false},
		{`{"index_url": ["a", "https://b/"]}`, []string{"a", "https://b/"}, false},
		{`{"index_url": null}`, nil, false},
		{`{}`, nil, false},
		{`{"index_url": 5}`, nil, true},
		{`{"index_url": ["a", 5]}`, nil, true},
	} {
		var p createParams
		err := decodeParams(json.RawMessage(c.params), &p)
		if (err != nil) != c.bad {
			t.Errorf("%s: error %v", c.params, err)
			continue
		}
		if !c.bad && !slices.Equal([]string(p.IndexURL), c.want) {
			t.Errorf("%s: %q, want %q", c.params, p.IndexURL, c.want)
		}
	}
}
