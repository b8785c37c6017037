package tests

import (
	"testing"
	"time"
)

// TestServeCancelQueued pipelines create, an endless execute, cancel and
// another execute without waiting: the cancel comes while the execute
// still waits for the sandbox to start, and must fail it (there is no
// timeout, so nothing else could end it); the execute sent after the
// cancel runs.
func TestServeCancelQueued(t *testing.T) {
	c := startServer(t)
	c.call(1, "create", map[string]any{"timeout_ms": 0})
	c.call(2, "execute", map[string]any{"sandbox": "s1", "code": "while True: pass"})
	c.call(3, "execute", map[string]any{"sandbox": "s1", "code": "print('never')"})
	c.call(4, "cancel", map[string]any{"sandbox": "s1"})
	c.call(5, "execute", map[string]any{"sandbox": "s1", "code": "print('after')"})
	got := map[float64]map[string]any{}
	for len(got) < 5 {
		_, m := c.next(2 * time.Minute)
		got[m["id"].(float64)] = m
	}
	if _, ok := got[1]["result"]; !ok {
		t.Fatalf("create: %v", got[1])
	}
	if _, ok := got[4]["result"]; !ok {
		t.Fatalf("cancel: %v", got[4])
	}
	for _, id := range []float64{2, 3} {
		code, kind, _ := rpcError(t, got[id])
		data := got[id]["error"].(map[string]any)["data"].(map[string]any)
		ex, _ := data["execution"].(map[string]any)
		if code != -32002 || kind != "canceled" || ex == nil || ex["error_type"] != "KeyboardInterrupt" || ex["stdout"] != "" || data["sandbox_dead"] != false {
			t.Fatalf("execute %v: %v", id, got[id])
		}
	}
	if r, _ := got[5]["result"].(map[string]any); r == nil || r["stdout"] != "after\n" {
		t.Fatalf("execute after the cancel: %v", got[5])
	}
	// A cancel when nothing runs or waits changes nothing that follows.
	c.call(6, "cancel", map[string]any{"sandbox": "s1"})
	c.response(6, time.Minute)
	c.call(7, "execute", map[string]any{"sandbox": "s1", "code": "print('still')"})
	if r, _ := c.response(7, time.Minute)["result"].(map[string]any); r == nil || r["stdout"] != "still\n" {
		t.Fatalf("execute after an idle cancel: %v", r)
	}
	if code := c.wait(time.Minute); code != 0 {
		t.Fatalf("exit status %d", code)
	}
}
