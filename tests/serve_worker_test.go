package tests

import (
	"strings"
	"testing"
	"time"
)

// TestServeWorkerChoice: with no rlm-worker to start, a create that says
// nothing about "direct" runs in-process (and says so, and logs a
// warning), "direct": false fails with worker_unavailable, and
// --require-worker makes the first behave like the second.
func TestServeWorkerChoice(t *testing.T) {
	noWorker := []string{"RLM_WORKER=" + t.TempDir() + "/no-rlm-worker"}
	t.Run("auto", func(t *testing.T) {
		c := startServerEnv(t, noWorker)
		c.call(1, "create", map[string]any{})
		if r, _ := c.response(1, 2*time.Minute)["result"].(map[string]any); r == nil || r["worker"] != false {
			t.Fatalf("create: %v", r)
		}
		c.call(2, "create", map[string]any{"direct": false})
		m := c.response(2, 2*time.Minute)
		if code, kind, msg := rpcError(t, m); code != -32000 || kind != "worker_unavailable" || !strings.Contains(msg, `"direct": true`) {
			t.Fatalf("create with direct false: %v", m)
		}
		c.call(3, "create", map[string]any{"direct": true})
		if r, _ := c.response(3, 2*time.Minute)["result"].(map[string]any); r == nil || r["worker"] != false || r["sandbox"] != "s3" {
			t.Fatalf("create with direct true: %v", r)
		}
		if code := c.wait(time.Minute); code != 0 {
			t.Fatalf("exit status %d", code)
		}
		if !strings.Contains(c.stderr.String(), "running in-process") {
			t.Fatalf("no warning logged; stderr:\n%s", c.stderr)
		}
	})
	t.Run("--require-worker", func(t *testing.T) {
		c := startServerEnv(t, noWorker, "--require-worker")
		c.call(1, "create", map[string]any{})
		m := c.response(1, 2*time.Minute)
		if code, kind, _ := rpcError(t, m); code != -32000 || kind != "worker_unavailable" {
			t.Fatalf("create: %v", m)
		}
		// No client's code runs in the server: "direct": true is refused.
		c.call(2, "create", map[string]any{"direct": true})
		m = c.response(2, 2*time.Minute)
		if code, kind, msg := rpcError(t, m); code != -32602 || kind != "invalid_params" || !strings.Contains(msg, "--require-worker") {
			t.Fatalf("create with direct true: %v", m)
		}
		if code := c.wait(time.Minute); code != 0 {
			t.Fatalf("exit status %d", code)
		}
	})
	t.Run("--require-worker with a worker", func(t *testing.T) {
		c := startServerEnv(t, nil, "--require-worker")
		c.call(1, "create", map[string]any{})
		if r, _ := c.response(1, 2*time.Minute)["result"].(map[string]any); r == nil || r["worker"] != true {
			t.Fatalf("create: %v", r)
		}
		if code := c.wait(time.Minute); code != 0 {
			t.Fatalf("exit status %d", code)
		}
	})
}
