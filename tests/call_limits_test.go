package tests

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
)

// A call given a context that is already cancelled returns ErrCanceled
// and runs nothing (a select between a free sandbox and the context
// would pick the sandbox half the time).
func TestCancelledContextRunsNothing(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, "")
		exec(t, sb, "n = 0")
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		for range 20 {
			ce, err := sb.Execute(ctx, "n += 1")
			if !errors.Is(err, supervisor.ErrCanceled) {
				t.Fatalf("Execute: err = %v, want ErrCanceled", err)
			}
			// The documented CodeExecution so far: nothing ran.
			if ce == nil || ce.Code != "n += 1" || ce.Stdout != "" {
				t.Fatalf("Execute: CodeExecution %+v, want one for the code, with no output", ce)
			}
			if ce, err := sb.ExecuteInteractive(ctx, "n"); ce == nil || !errors.Is(err, supervisor.ErrCanceled) {
				t.Fatalf("ExecuteInteractive: %+v, %v; want a CodeExecution and ErrCanceled", ce, err)
			}
			if err := sb.SetVariable(ctx, "n", 100); !errors.Is(err, supervisor.ErrCanceled) {
				t.Fatalf("SetVariable: err = %v, want ErrCanceled", err)
			}
			if _, err := sb.Stats(ctx); !errors.Is(err, supervisor.ErrCanceled) {
				t.Fatalf("Stats: err = %v, want ErrCanceled", err)
			}
		}
		if ce := exec(t, sb, "print(n)"); ce.Stdout != "0\n" {
			t.Fatalf("n = %q: a cancelled call ran", ce.Stdout)
		}
	})
}

// A callback's error with an empty message still raises BridgeError (an
// empty message was read as no error: llm_query returned None).
func TestBridgeErrorWithoutMessage(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{
			OnLLMQuery: func(context.Context, string) (string, error) { return "", errors.New("") },
		}, "")
		ce := exec(t, sb, "r = llm_query('q')")
		if ce.ErrorType != "BridgeError" || !strings.Contains(ce.Error, "no message") {
			t.Fatalf("error %q (%s), want BridgeError saying there was no message", ce.Error, ce.ErrorType)
		}
	})
}

// Callbacks that ignore their context and run on after their execution
// was cancelled hold none of the next execution's bridge slots.
func TestAbandonedCallbacksFreeTheirSlots(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		slow, started, _ := blockingBridge(t, true)
		sb := newSandbox(t, m, supervisor.Config{
			MaxBridgeConcurrency: 2,
			OnLLMQuery: func(ctx context.Context, p string) (string, error) {
				if p == "slow" {
					return slow(ctx, p)
				}
				return "fast", nil
			},
		}, "")
		done := make(chan error, 1)
		go func() {
			_, err := sb.Execute(context.Background(), "llm_query_batched(['slow'] * 2)")
			done <- err
		}()
		<-started
		<-started // both slots are taken, by callbacks that never look at their ctx
		sb.Cancel()
		if err := <-done; !errors.Is(err, supervisor.ErrCanceled) {
			t.Fatalf("first Execute: %v, want ErrCanceled", err)
		}
		ce := exec(t, sb, "print(llm_query('quick'))")
		if ce.Stdout != "fast\n" {
			t.Fatalf("second Execute: stdout %q, error %q", ce.Stdout, ce.Error)
		}
	})
}
