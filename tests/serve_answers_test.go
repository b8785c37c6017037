package tests

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestServeBridgeAnswers checks how the client's answers to llm_query
// reach Python: every answer that is not a string result raises
// BridgeError, and a malformed one is also reported to the client. The
// sandbox has no timeout, so a call left pending fails the test (no
// response within the minute) instead of ending by a timeout.
func TestServeBridgeAnswers(t *testing.T) {
	c := startServer(t)
	c.call(1, "create", map[string]any{"bridges": []string{"llm_query"}, "timeout_ms": 0})
	if _, ok := c.response(1, 2*time.Minute)["result"]; !ok {
		t.Fatal("create failed")
	}
	const code = "try:\n    print('returned', repr(llm_query('x')))\nexcept BridgeError as e:\n    print('BridgeError:', e)"
	cases := []struct {
		answer string // the members after "id"
		stdout string // what Python prints, a prefix
		report bool   // answered -32600 (id null) too
	}{
		{`"result":"fine"`, "returned 'fine'", false},
		{`"error":{"code":1,"message":"rate limited"}`, "BridgeError: rate limited", false},
		{`"error":{"code":1,"message":""}`, "BridgeError: the client answered llm_query with an error and no message", false},
		{`"error":{"code":1}`, "BridgeError: the client answered llm_query with an error and no message", false},
		{`"error":{}`, "BridgeError: the client answered llm_query with an error and no message", false},
		{`"result":null`, "BridgeError: the client answered llm_query with null, not a string", false},
		{`"result":5`, "BridgeError: the client answered llm_query with 5, not a string", false},
		{`"result":{"text":"x"}`, `BridgeError: the client answered llm_query with {"text":"x"}, not a string`, false},
		{`"error":"oops"`, "BridgeError: the client's answer to llm_query was malformed", true},
		{`"error":null`, "BridgeError: the client's answer to llm_query was malformed", true},
		{`"error":{"code":"1","message":"m"}`, "BridgeError: the client's answer to llm_query was malformed", true},
		{`"error":{"code":1,"message":7}`, "BridgeError: the client's answer to llm_query was malformed", true},
		{`"result":"a","error":{"code":1,"message":"m"}`, "BridgeError: the client's answer to llm_query was malformed", true},
		{`"Result":"a"`, "BridgeError: the client's answer to llm_query was malformed", true},
		// Valid JSON nested past Go's decoder (10,000 levels) was read as
		// not JSON, answered with id null, and the call waited for ever.
		{`"error":{"code":1,"message":"m","data":` + nested(10_001) + `}`, "BridgeError: the client's answer to llm_query was malformed", true},
	}
	for i, tc := range cases {
		id := 10 + i
		c.call(id, "execute", map[string]any{"sandbox": "s1", "code": code})
		_, req := c.next(time.Minute)
		if req["method"] != "llm_query" {
			t.Fatalf("want an llm_query request, got %v", req)
		}
		c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,%s}`, req["id"], tc.answer))
		var reported bool
		for {
			line, m := c.next(time.Minute)
			if m["id"] == nil {
				code, kind, msg := rpcError(t, m)
				if code != -32600 || kind != "invalid_request" || !strings.Contains(msg, fmt.Sprint(req["id"])) {
					t.Fatalf("answer %s: reported %s", tc.answer, line)
				}
				reported = true
				continue
			}
			if m["id"] != float64(id) {
				t.Fatalf("answer %s: got %s", tc.answer, line)
			}
			r, _ := m["result"].(map[string]any)
			if stdout, _ := r["stdout"].(string); !strings.HasPrefix(stdout, tc.stdout) {
				t.Fatalf("answer %s: got %s, want stdout starting %q", tc.answer, line, tc.stdout)
			}
			break
		}
		if reported != tc.report {
			t.Fatalf("answer %s: reported to the client %v, want %v", tc.answer, reported, tc.report)
		}
	}
	if code := c.wait(time.Minute); code != 0 {
		t.Fatalf("exit status %d", code)
	}
}
