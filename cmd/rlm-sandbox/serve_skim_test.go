package main

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

// skimOf skims text in pieces of n bytes.
func skimOf(text string, n int) *message {
	var s skim
	for len(text) > 0 {
		k := min(n, len(text))
		s.write([]byte(text[:k]))
		text = text[k:]
	}
	return s.message()
}

func TestSkim(t *testing.T) {
	big := strings.Repeat(`x\"}]{[,:`, 1000)
	for _, c := range []struct {
		text, id, method string // id "" and method "": absent; "-": not a message
	}{
		{`{"jsonrpc":"2.0","id":7,"method":"create","params":{"context":"` + big + `"}}`, "7", "create"},
		{`{"jsonrpc":"2.0","result":"` + big + `","id":"b3"}` + "\n", `"b3"`, ""},
		{` { "result" : [1, {"a": [true, null, "` + big + `"]}, -2.5e3] , "id" : 12 } `, "12", ""},
		{`{"result":1,"id":12}`, "12", ""},
		{`{"id":null,"method":"version"}`, "", "version"},
		{`{"error":{"code":1,"message":"` + big + `"},"id":"b9"}`, `"b9"`, ""},
		{`{"me\u0074hod":"x","id":1}`, "1", ""}, // an escaped key is not looked at
		{`{}`, "", ""},
		{`[{"id":1,"method":"version"}]`, "-", ""},
		{`{"id":1,"method":"version"`, "-", ""},
		{`{"id":1,"method":"version"} x`, "-", ""},
		{`{"id":` + strings.Repeat("1", 2000) + `,"method":"version"}`, "-", ""},
		{`{"id":1,"method":` + `"` + strings.Repeat("v", 2000) + `"}`, "-", ""},
		{`{"id":1,"method":5}`, "-", ""},
		{`{"id":1,,"method":"x"}`, "-", ""},
		{`{"id":tru e}`, "-", ""},
	} {
		for _, n := range []int{1, 3, 64, len(c.text)} {
			m := skimOf(c.text, n)
			name := fmt.Sprintf("%.60s (pieces of %d)", c.text, n)
			if c.id == "-" {
				if m != nil {
					t.Errorf("%s: got %+v, want nothing", name, m)
				}
				continue
			}
			if m == nil {
				t.Errorf("%s: got nothing", name)
				continue
			}
			if string(m.ID) != c.id || m.Method != c.method || m.HasMethod != (c.method != "") {
				t.Errorf("%s: id %q method %q (%v), want %q %q", name, m.ID, m.Method, m.HasMethod, c.id, c.method)
			}
		}
	}
}

// TestSkimAgrees skims random JSON objects and compares with a decoder.
func TestSkimAgrees(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	var value func(depth int) any
	value = func(depth int) any {
		switch k := r.Intn(8); {
		case k == 0 && depth < 4:
			m := map[string]any{}
			for range r.Intn(4) {
				m[fmt.Sprint("k", r.Intn(5), `"}`)] = value(depth + 1)
			}
			return m
		case k == 1 && depth < 4:
			a := []any{}
			for range r.Intn(4) {
				a = append(a, value(depth+1))
			}
			return a
		case k == 2 && r.Intn(8) == 0: // past skimKeep: skipped quickly
			return strings.Repeat(`a"\{}[]`+strings.Repeat("x", r.Intn(100)), 50+r.Intn(200)) + `\`
		case k == 2:
			return strings.Repeat(`a"\{}[]`, r.Intn(5)) + "é\u2028"
		case k == 3:
			return r.NormFloat64() * 1e6
		case k == 4:
			return nil
		case k == 5:
			return r.Intn(2) == 0
		default:
			return r.Intn(1000)
		}
	}
	for i := range 3000 {
		m := map[string]any{}
		for _, k := range []string{"jsonrpc", "id", "method", "params", "result", "error"} {
			if r.Intn(2) == 0 {
				m[k] = value(0)
			}
		}
		if r.Intn(2) == 0 {
			m["method"] = fmt.Sprint("m", i)
		}
		b, err := json.MarshalIndent(m, "", strings.Repeat(" ", r.Intn(2)))
		if err != nil {
			t.Fatal(err)
		}
		got := skimOf(string(b), 1+r.Intn(50))
		var want struct {
			ID     json.RawMessage `json:"id"`
			Method *string         `json:"method"`
		}
		_ = json.Unmarshal(b, &want)
		_, hasMethod := m["method"]
		_, methodStr := m["method"].(string)
		rawMethod, _ := json.Marshal(m["method"])
		if hasMethod && (!methodStr || len(rawMethod) > skimKeep) || len(want.ID) > skimKeep {
			if got != nil {
				t.Fatalf("%s: got %+v, want nothing", b, got)
			}
			continue
		}
		if got == nil {
			t.Fatalf("%s: got nothing", b)
		}
		wantID := string(want.ID)
		if wantID == "null" {
			wantID = ""
		}
		if compact(got.ID) != compact(json.RawMessage(wantID)) || got.HasMethod != hasMethod || (want.Method != nil && got.Method != *want.Method) {
			t.Fatalf("%s: id %s method %q, want %s %v", b, got.ID, got.Method, wantID, want.Method)
		}
	}
}

// compact is b without white space ("" when empty).
func compact(b json.RawMessage) string {
	if len(b) == 0 {
		return ""
	}
	out, err := json.Marshal(b)
	if err != nil {
		return "invalid " + string(b)
	}
	return string(out)
}

// BenchmarkSkim skims an answer of 8 MiB of text, read in 64 KiB pieces as
// the server reads a line.
func BenchmarkSkim(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","result":"` + strings.Repeat(`abc def\"ghi `, 8<<20/13) + `","id":"b1"}`)
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		var s skim
		for p := msg; len(p) > 0; {
			k := min(64<<10, len(p))
			s.write(p[:k])
			p = p[k:]
		}
		if m := s.message(); m == nil || string(m.ID) != `"b1"` {
			b.Fatal(m)
		}
	}
}
