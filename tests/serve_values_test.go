package tests

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// nested is n arrays around 1: "[[1]]" for 2.
func nested(n int) string {
	return strings.Repeat("[", n) + "1" + strings.Repeat("]", n)
}

// TestServeValueDepth: values nest at most 200 arrays or objects deep;
// deeper ones are invalid params with a short message naming the limit.
func TestServeValueDepth(t *testing.T) {
	c := startServer(t)
	c.send(`{"jsonrpc":"2.0","id":1,"method":"create","params":{"context":` + nested(201) + `}}`)
	m := c.response(1, time.Minute)
	if code, kind, msg := rpcError(t, m); code != -32602 || kind != "invalid_params" || !strings.Contains(msg, "200") || len(msg) > 200 {
		t.Fatalf("create with a context too deep: %v", m)
	}
	// Past Go's decoder (10,000 levels) too: it was a parse error with id
	// null, which no client waits for.
	c.send(`{"jsonrpc":"2.0","id":7,"method":"create","params":{"context":` + nested(10_001) + `}}`)
	m = c.response(7, time.Minute)
	if code, kind, msg := rpcError(t, m); code != -32602 || kind != "invalid_params" || !strings.Contains(msg, "200") {
		t.Fatalf("create with a context 10,001 levels deep: %v", m)
	}
	c.send(`{"jsonrpc":"2.0","id":2,"method":"create","params":{"context":` + nested(200) + `}}`)
	if r, _ := c.response(2, 2*time.Minute)["result"].(map[string]any); r == nil || r["sandbox"] != "s3" {
		t.Fatalf("create with a context at the limit failed (the failed creates took s1 and s2)")
	}
	c.send(`{"jsonrpc":"2.0","id":3,"method":"set_variable","params":{"sandbox":"s3","name":"v","value":` + nested(201) + `}}`)
	m = c.response(3, time.Minute)
	if code, kind, msg := rpcError(t, m); code != -32602 || kind != "invalid_params" || !strings.Contains(msg, "200") || len(msg) > 200 {
		t.Fatalf("set_variable with a value too deep: %v", m)
	}
	deepObject := strings.Repeat(`{"x":`, 201) + "1" + strings.Repeat("}", 201)
	c.send(`{"jsonrpc":"2.0","id":4,"method":"set_variable","params":{"sandbox":"s3","name":"v","value":` + deepObject + `}}`)
	m = c.response(4, time.Minute)
	if code, kind, msg := rpcError(t, m); code != -32602 || kind != "invalid_params" || len(msg) > 200 {
		t.Fatalf("set_variable with an object too deep: %v", m)
	}
	c.send(`{"jsonrpc":"2.0","id":5,"method":"set_variable","params":{"sandbox":"s3","name":"v","value":` + nested(200) + `}}`)
	if _, ok := c.response(5, time.Minute)["result"]; !ok {
		t.Fatal("set_variable with a value at the limit failed")
	}
	// A name Python code could not use is invalid params too.
	for i, name := range []string{"my var", "1x", "class", "a\xffb"} {
		c.call(10+i, "set_variable", map[string]any{"sandbox": "s3", "name": name, "value": 1})
		if code, kind, msg := rpcError(t, c.response(10+i, time.Minute)); code != -32602 || kind != "invalid_params" || !strings.Contains(msg, "not a Python variable name") {
			t.Fatalf("set_variable %q: %d %s %s", name, code, kind, msg)
		}
	}
	c.call(6, "execute", map[string]any{"sandbox": "s3", "code": "d = 0\nwhile isinstance(v, list):\n    v, d = v[0], d + 1\nprint(d, len(str(context)))"})
	if r, _ := c.response(6, time.Minute)["result"].(map[string]any); r == nil || r["stdout"] != "200 401\n" {
		t.Fatalf("execute: %v", r)
	}
	if code := c.wait(time.Minute); code != 0 {
		t.Fatalf("exit status %d", code)
	}
}

// TestServeJSONOrder: objects in create's context and set_variable's value
// reach Python with their members in order, as json.loads gives them.
func TestServeJSONOrder(t *testing.T) {
	c := startServer(t)
	c.send(`{"jsonrpc":"2.0","id":1,"method":"create","params":{"context":{"query":"q","docs":[{"z":1,"a":2}],"query":"last"}}}`)
	if r, _ := c.response(1, 2*time.Minute)["result"].(map[string]any); r == nil || r["sandbox"] != "s1" {
		t.Fatal("create failed")
	}
	c.send(`{"jsonrpc":"2.0","id":2,"method":"set_variable","params":{"sandbox":"s1","name":"v","value":{"b":1,"a":{"d":1,"c":2}}}}`)
	if _, ok := c.response(2, time.Minute)["result"]; !ok {
		t.Fatal("set_variable failed")
	}
	c.call(3, "execute", map[string]any{"sandbox": "s1", "code": "print(context)\nprint(v)"})
	want := "{'query': 'last', 'docs': [{'z': 1, 'a': 2}]}\n{'b': 1, 'a': {'d': 1, 'c': 2}}\n"
	if r, _ := c.response(3, time.Minute)["result"].(map[string]any); r == nil || r["stdout"] != want {
		t.Fatalf("execute: %v, want stdout %q", r, want)
	}
	// And back: get_variable writes a dict's members in its order.
	c.send(`{"jsonrpc":"2.0","id":4,"method":"get_variable","params":{"sandbox":"s1","name":"v"}}`)
	if line, m := c.next(time.Minute); m["id"] != 4.0 || !strings.Contains(line, `"value":{"b":1,"a":{"d":1,"c":2}}`) {
		t.Fatalf("get_variable: %s", line)
	}
	if code := c.wait(time.Minute); code != 0 {
		t.Fatalf("exit status %d", code)
	}
}

// TestServeCreateRanges: create's limits are checked as the CLI's flags
// are (a memory_limit outside 32 MiB–4 GiB, a negative timeout are
// invalid params); they used to be taken as they came.
func TestServeCreateRanges(t *testing.T) {
	c := startServer(t)
	for i, params := range []map[string]any{
		{"memory_limit": 1},
		{"memory_limit": 5_000_000_000},
		{"timeout_ms": -5},
		{"wall_timeout_ms": -1},
	} {
		c.call(i+1, "create", params)
		if code, kind, msg := rpcError(t, c.response(i+1, time.Minute)); code != -32602 || kind != "invalid_params" {
			t.Errorf("create %v: %d %s %s, want -32602 invalid_params", params, code, kind, msg)
		}
	}
	c.call(9, "create", map[string]any{"memory_limit": 32 << 20, "timeout_ms": 0})
	if r, _ := c.response(9, 2*time.Minute)["result"].(map[string]any); r == nil || r["sandbox"] == nil {
		t.Fatal("create at the lower memory limit failed")
	}
	if code := c.wait(time.Minute); code != 0 {
		t.Fatalf("exit status %d", code)
	}
}

// TestServeFloats: a float comes back as json.dumps writes it (Python's
// repr: 1.0 stays "1.0", -0.0 keeps its sign, 1e16 is "1e+16"), as a
// value and as a dict key, compared with the sandbox's own json.dumps
// over edge cases and random bit patterns.
func TestServeFloats(t *testing.T) {
	c := startServer(t)
	c.call(1, "create", map[string]any{})
	c.response(1, 2*time.Minute)
	code := `import json, random, struct, math
r = random.Random(7)
v = [1.0, -0.0, 0.0, 1e16, 1e15, 1234567890123456.0, 12345678901234567.0, 0.0001, 0.00001, 1.5, 0.1, -2.5e-7,
     1e22, 1e-300, 5e-324, 1.7976931348623157e308, 100.0, 123456789.0]
while len(v) < 400:
    f = struct.unpack('<d', struct.pack('<Q', r.getrandbits(64)))[0]
    if math.isfinite(f):
        v.append(f)
v += [r.uniform(-1e6, 1e6) for _ in range(100)] + [float(r.randrange(-10**17, 10**17)) for _ in range(100)]
d = {1.0: 'a', 1e16: 'b', -0.0: 'c', 2.5: 'd'}
print(json.dumps([v, d]))`
	c.call(2, "execute", map[string]any{"sandbox": "s1", "code": code})
	r, _ := c.response(2, time.Minute)["result"].(map[string]any)
	if r == nil {
		t.Fatal("execute failed")
	}
	numbers := func(s string) []any {
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		var x []any
		if err := dec.Decode(&x); err != nil {
			t.Fatalf("%v: %.200s", err, s)
		}
		return x
	}
	want := numbers(r["stdout"].(string))
	for i, name := range []string{"v", "d"} {
		c.call(3+i, "get_variable", map[string]any{"sandbox": "s1", "name": name})
		line := c.nextLine(time.Minute)
		dec := json.NewDecoder(strings.NewReader(line))
		dec.UseNumber()
		var m struct {
			Result struct {
				Value any `json:"value"`
			} `json:"result"`
		}
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("%v: %.200s", err, line)
		}
		got, _ := json.Marshal(m.Result.Value)
		exp, _ := json.Marshal(want[i])
		if string(got) != string(exp) {
			t.Errorf("get_variable %s:\n got %.600s\nwant %.600s", name, got, exp)
		}
	}
}

// TestServeGetVariableTooLarge: a value over one frame (64 MiB) comes back
// from get_variable as -32000 with kind too_large (it was "internal"),
// and the sandbox goes on.
func TestServeGetVariableTooLarge(t *testing.T) {
	c := startServer(t)
	c.call(1, "create", map[string]any{})
	c.response(1, 2*time.Minute)
	c.call(2, "execute", map[string]any{"sandbox": "s1", "code": "big = 'x' * (70 << 20)"})
	if r, _ := c.response(2, time.Minute)["result"].(map[string]any); r == nil {
		t.Fatal("execute failed")
	}
	c.call(3, "get_variable", map[string]any{"sandbox": "s1", "name": "big"})
	if code, kind, msg := rpcError(t, c.response(3, time.Minute)); code != -32000 || kind != "too_large" || !strings.Contains(msg, "too large") {
		t.Fatalf("get_variable of 70 MiB: %d %s %s, want -32000 too_large", code, kind, msg)
	}
	c.call(4, "execute", map[string]any{"sandbox": "s1", "code": "print(len(big))"})
	if r, _ := c.response(4, time.Minute)["result"].(map[string]any); r == nil || r["stdout"] != "73400320\n" {
		t.Fatalf("execute after the refused get_variable: %v", r)
	}
	if code := c.wait(time.Minute); code != 0 {
		t.Fatalf("exit status %d", code)
	}
}
