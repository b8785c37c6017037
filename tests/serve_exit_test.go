package tests

import (
	"strings"
	"testing"
	"time"
)

// TestServeProcessExit: code that calls os._exit ends the interpreter. Its
// execute fails with -32000, kind dead, in a worker and in-process alike;
// its execution keeps what the code printed and says why, as exec --json
// does (error_type ProcessExit), and data.exit_status gives the status.
// The requests after it fail as dead, naming os._exit, until restart.
func TestServeProcessExit(t *testing.T) {
	const msg = "the code called os._exit(3): the Python process ended"
	for _, tc := range []struct {
		name   string
		direct bool
	}{{"worker", false}, {"direct", true}} {
		t.Run(tc.name, func(t *testing.T) {
			c := startServer(t)
			c.call(1, "create", map[string]any{"direct": tc.direct})
			if r, _ := c.response(1, 2*time.Minute)["result"].(map[string]any); r == nil || r["worker"] != !tc.direct {
				t.Fatalf("create: worker %v, want %v", r["worker"], !tc.direct)
			}
			c.call(2, "execute", map[string]any{"sandbox": "s1", "code": "import os\nx = 1\nprint('before', flush=True)\nos._exit(3)\nprint('after')"})
			m := c.response(2, time.Minute)
			code, kind, message := rpcError(t, m)
			data, _ := m["error"].(map[string]any)["data"].(map[string]any)
			ex, _ := data["execution"].(map[string]any)
			if code != -32000 || kind != "dead" || !strings.Contains(message, msg) || !strings.Contains(message, "restart") ||
				strings.Contains(message, "fatal error") || ex == nil {
				t.Fatalf("execute: %v", m)
			}
			if ex["error_type"] != "ProcessExit" || ex["error"] != "ProcessExit: "+msg || ex["traceback"] != nil ||
				ex["stdout"] != "before\n" || ex["timed_out"] != false || data["exit_status"] != 3.0 {
				t.Fatalf("execute: %v", m)
			}
			c.call(3, "get_variable", map[string]any{"sandbox": "s1", "name": "x"})
			m = c.response(3, time.Minute)
			if code, kind, message := rpcError(t, m); code != -32000 || kind != "dead" || !strings.Contains(message, msg) || !strings.Contains(message, "restart") {
				t.Fatalf("after os._exit: %v", m)
			}
			if data, _ := m["error"].(map[string]any)["data"].(map[string]any); data["execution"] != nil || data["exit_status"] != nil {
				t.Fatalf("after os._exit: %v", m)
			}
			c.call(4, "restart", map[string]any{"sandbox": "s1"})
			if _, ok := c.response(4, 2*time.Minute)["result"]; !ok {
				t.Fatal("restart failed")
			}
			// Status 0 is an exit too, and exit_status says 0.
			c.call(5, "execute", map[string]any{"sandbox": "s1", "code": "import os; os._exit(0)"})
			m = c.response(5, time.Minute)
			code, kind, _ = rpcError(t, m)
			data, _ = m["error"].(map[string]any)["data"].(map[string]any)
			ex, _ = data["execution"].(map[string]any)
			if code != -32000 || kind != "dead" || ex == nil || ex["error_type"] != "ProcessExit" || data["exit_status"] != 0.0 {
				t.Fatalf("os._exit(0): %v", m)
			}
			if code := c.wait(time.Minute); code != 0 {
				t.Fatalf("exit status %d", code)
			}
		})
	}
}
