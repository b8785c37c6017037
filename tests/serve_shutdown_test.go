package tests

import (
	"syscall"
	"testing"
	"time"
)

// TestListenDrainTimeoutAnswers: when --drain-timeout passes, the requests
// still running or queued get the -32004 shutdown error before their
// connection closes.
func TestListenDrainTimeoutAnswers(t *testing.T) {
	srv := startListen(t, "--listen", unixAddr(t), "--drain-timeout", "500ms")
	c := srv.dial(t)
	pid := c.startSpinning(t, 50)
	c.send(map[string]any{"jsonrpc": "2.0", "id": 51, "method": "execute", "params": map[string]any{"sandbox": "s1", "code": "print('queued')"}})
	c.send(map[string]any{"jsonrpc": "2.0", "id": 52, "method": "version"})
	if m, _ := c.next(time.Minute); m["id"] != 52.0 {
		t.Fatalf("%v", m) // the execute is read: version, read after it, was answered
	}
	srv.cmd.Process.Signal(syscall.SIGTERM)
	answered := map[float64]bool{}
	for {
		m, ok := c.next(time.Minute)
		if !ok {
			break
		}
		if code, data := rpcErr(t, m); code != codeShutdown || data["kind"] != "shutdown" || answered[m["id"].(float64)] {
			t.Fatalf("after SIGTERM: %v", m)
		}
		answered[m["id"].(float64)] = true
	}
	if !answered[50] || !answered[51] || len(answered) != 2 {
		t.Fatalf("answered %v, want 50 and 51; stderr:\n%s", answered, srv.stderr)
	}
	if code := srv.exit(time.Minute); code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, srv.stderr)
	}
	waitGone(t, []int{pid}, 30*time.Second)
}
