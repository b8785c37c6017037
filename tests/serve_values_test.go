package tests

import (
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
	c.send(`{"jsonrpc":"2.0","id":2,"method":"create","params":{"context":` + nested(200) + `}}`)
	if r, _ := c.response(2, 2*time.Minute)["result"].(map[string]any); r == nil || r["sandbox"] != "s2" {
		t.Fatalf("create with a context at the limit failed (the failed create took s1)")
	}
	c.send(`{"jsonrpc":"2.0","id":3,"method":"set_variable","params":{"sandbox":"s2","name":"v","value":` + nested(201) + `}}`)
	m = c.response(3, time.Minute)
	if code, kind, msg := rpcError(t, m); code != -32602 || kind != "invalid_params" || !strings.Contains(msg, "200") || len(msg) > 200 {
		t.Fatalf("set_variable with a value too deep: %v", m)
	}
	deepObject := strings.Repeat(`{"x":`, 201) + "1" + strings.Repeat("}", 201)
	c.send(`{"jsonrpc":"2.0","id":4,"method":"set_variable","params":{"sandbox":"s2","name":"v","value":` + deepObject + `}}`)
	m = c.response(4, time.Minute)
	if code, kind, msg := rpcError(t, m); code != -32602 || kind != "invalid_params" || len(msg) > 200 {
		t.Fatalf("set_variable with an object too deep: %v", m)
	}
	c.send(`{"jsonrpc":"2.0","id":5,"method":"set_variable","params":{"sandbox":"s2","name":"v","value":` + nested(200) + `}}`)
	if _, ok := c.response(5, time.Minute)["result"]; !ok {
		t.Fatal("set_variable with a value at the limit failed")
	}
	// A name Python code could not use is invalid params too.
	for i, name := range []string{"my var", "1x", "class", "a\xffb"} {
		c.call(10+i, "set_variable", map[string]any{"sandbox": "s2", "name": name, "value": 1})
		if code, kind, msg := rpcError(t, c.response(10+i, time.Minute)); code != -32602 || kind != "invalid_params" || !strings.Contains(msg, "not a Python variable name") {
			t.Fatalf("set_variable %q: %d %s %s", name, code, kind, msg)
		}
	}
	c.call(6, "execute", map[string]any{"sandbox": "s2", "code": "d = 0\nwhile isinstance(v, list):\n    v, d = v[0], d + 1\nprint(d, len(str(context)))"})
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
