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
