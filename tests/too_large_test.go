package tests

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
)

// TestCodeTooLargeForAWorker: code over the 64 MiB a worker takes in one
// message fails with ErrTooLarge, saying so (it used to be an internal
// "ipc: frame too large"), and the sandbox goes on; direct mode runs it.
func TestCodeTooLargeForAWorker(t *testing.T) {
	code := "s = '" + strings.Repeat("y", 65<<20) + "'\nprint(len(s))\ndel s"
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, "")
		ce, err := sb.Execute(context.Background(), code)
		if m.name == "worker" {
			if !errors.Is(err, supervisor.ErrTooLarge) || !strings.Contains(err.Error(), "SetVariable") {
				t.Fatalf("worker: %v, %+v", err, ce)
			}
		} else if err != nil || ce.Stdout != "68157440\n" {
			t.Fatalf("direct: %v, %+v", err, ce)
		}
		if ce := exec(t, sb, "print(6 * 7)"); ce.Stdout != "42\n" {
			t.Fatalf("after: %+v", ce)
		}
	})
}

// TestValueTooLargeToComeBack: a value over the 64 MiB a worker sends in
// one message fails GetVariable with ErrTooLarge (it matched no sentinel),
// and the sandbox goes on; direct mode returns it.
func TestValueTooLargeToComeBack(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, "")
		exec(t, sb, "v = 'z' * (65 << 20)")
		v, found, err := sb.GetVariable(context.Background(), "v")
		if m.name == "worker" {
			if !errors.Is(err, supervisor.ErrTooLarge) || !strings.Contains(err.Error(), "frame too large") {
				t.Fatalf("worker: %v", err)
			}
		} else if s, _ := v.(string); err != nil || !found || len(s) != 65<<20 {
			t.Fatalf("direct: %d characters, %v, %v", len(s), found, err)
		}
		if ce := exec(t, sb, "del v\nprint(6 * 7)"); ce.Stdout != "42\n" {
			t.Fatalf("after: %+v", ce)
		}
	})
}

// TestPromptTooLargeForAWorker: an llm_query prompt over the 64 MiB a
// worker sends in one message raises BridgeError saying so (it said
// "ipc: encode bridge_call: ... frame too large"), and the sandbox goes
// on; direct mode makes the call.
func TestPromptTooLargeForAWorker(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{
			OnLLMQuery: func(_ context.Context, p string) (string, error) { return strings.Repeat("a", len(p)%7), nil },
		}, "")
		ce := exec(t, sb, "try:\n    print(len(llm_query('q' * (65 << 20))))\nexcept BridgeError as e:\n    print(e)")
		want := "1\n" // (65 << 20) % 7
		if m.name == "worker" {
			want = "more than the 64 MiB a call sends to the host in one message"
		}
		if !strings.Contains(ce.Stdout, want) {
			t.Fatalf("stdout %q, want %q", ce.Stdout, want)
		}
		if ce := exec(t, sb, "print(6 * 7)"); ce.Stdout != "42\n" {
			t.Fatalf("after: %+v", ce)
		}
	})
}
