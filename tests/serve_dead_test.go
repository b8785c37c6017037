package tests

import (
	"strings"
	"testing"
	"time"
)

// TestServeDeadSandbox: code that ignores KeyboardInterrupt is killed;
// its execute fails with the timeout error saying the sandbox is dead,
// and the requests after it with -32000, kind worker_exited (a worker) or
// dead (in-process), whose advice is the server's (restart), not the
// command line's.
func TestServeDeadSandbox(t *testing.T) {
	for _, tc := range []struct {
		direct bool
		kind   string
	}{{false, "worker_exited"}, {true, "dead"}} {
		t.Run(tc.kind, func(t *testing.T) {
			c := startServer(t)
			c.call(1, "create", map[string]any{"timeout_ms": 200, "direct": tc.direct})
			c.response(1, 2*time.Minute)
			c.call(2, "execute", map[string]any{"sandbox": "s1", "code": "while True:\n    try:\n        while True: pass\n    except KeyboardInterrupt:\n        pass"})
			m := c.response(2, time.Minute)
			code, kind, msg := rpcError(t, m)
			data := m["error"].(map[string]any)["data"].(map[string]any)
			ex, _ := data["execution"].(map[string]any)
			if code != -32001 || kind != "timeout" || !strings.Contains(msg, "the sandbox is dead") || ex == nil || ex["error_type"] != nil || data["sandbox_dead"] != true {
				t.Fatalf("execute: %v", m)
			}
			c.call(3, "get_variable", map[string]any{"sandbox": "s1", "name": "x"})
			m = c.response(3, time.Minute)
			if code, kind, msg := rpcError(t, m); code != -32000 || kind != tc.kind || strings.Contains(msg, "--direct") || !strings.Contains(msg, "restart") {
				t.Fatalf("after the kill: %v", m)
			}
			c.call(4, "restart", map[string]any{"sandbox": "s1"})
			if _, ok := c.response(4, 2*time.Minute)["result"]; !ok {
				t.Fatal("restart failed")
			}
			if code := c.wait(time.Minute); code != 0 {
				t.Fatalf("exit status %d", code)
			}
		})
	}
}
