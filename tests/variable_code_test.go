package tests

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
)

// GetVariable and SetVariable can run the sandbox's own code (a value's
// __repr__, __iter__ or __del__): the caller's context and Cancel stop
// them, so hostile code cannot hang the host's calls, and the sandbox
// stays usable when the code gives in to the interrupt. Timeout bounds
// them too, but not below DefaultTimeout (large values take time).
func TestVariablesRunUnderLimits(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{Timeout: 100 * time.Millisecond, GracePeriod: 300 * time.Millisecond}, "")
		exec(t, sb, "import time\n"+
			"class Spin:\n"+
			"    def __repr__(self):\n        while True: pass\n"+
			"    def __del__(self):\n        while True: pass\n"+
			"class Endless(list):\n"+
			"    def __iter__(self):\n        while True: yield 1\n"+
			"class Slow:\n"+
			"    def __repr__(self):\n        time.sleep(0.5)\n        return 'slow'\n"+
			"spin, endless, slow, stubborn = Spin(), Endless([1]), Slow(), None")
		deadline := func() context.Context {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			t.Cleanup(cancel)
			return ctx
		}

		t.Run("repr that loops: the caller's deadline", func(t *testing.T) {
			_, _, err := sb.GetVariable(deadline(), "spin")
			if !errors.Is(err, supervisor.ErrCanceled) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want ErrCanceled (deadline exceeded)", err)
			}
		})
		t.Run("iter that loops: the caller's cancel", func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, _, err := sb.GetVariable(ctx, "endless")
				done <- err
			}()
			cancel()
			if err := <-done; !errors.Is(err, supervisor.ErrCanceled) {
				t.Fatalf("err = %v, want ErrCanceled", err)
			}
		})
		t.Run("a slow repr outlives a short Timeout", func(t *testing.T) {
			v, found, err := sb.GetVariable(context.Background(), "slow")
			if err != nil || !found || v != "slow" {
				t.Fatalf("got %v %v %v, want 'slow'", v, found, err)
			}
		})
		t.Run("del that loops: SetVariable", func(t *testing.T) {
			// The interrupt ends __del__, whose exception Python ignores
			// (it prints "Exception ignored in"), so the value is set.
			err := sb.SetVariable(deadline(), "spin", 1)
			if err != nil && !errors.Is(err, supervisor.ErrCanceled) {
				t.Fatalf("err = %v, want nil or ErrCanceled", err)
			}
		})
		t.Run("still usable", func(t *testing.T) {
			ce := exec(t, sb, "print(spin)")
			if ce.Stdout != "1\n" {
				t.Fatalf("stdout %q, error %q", ce.Stdout, ce.Error)
			}
		})
		t.Run("Cancel stops GetVariable", func(t *testing.T) {
			sb2 := newSandbox(t, m, supervisor.Config{Timeout: 0, GracePeriod: time.Second}, "")
			exec(t, sb2, "class Spin:\n    def __repr__(self):\n        while True: pass\nspin = Spin()")
			done := make(chan error, 1)
			go func() {
				_, _, err := sb2.GetVariable(context.Background(), "spin")
				done <- err
			}()
			for {
				sb2.Cancel() // until the call has started and is stopped by it
				select {
				case err := <-done:
					if !errors.Is(err, supervisor.ErrCanceled) {
						t.Fatalf("err = %v, want ErrCanceled", err)
					}
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		})
		t.Run("code that ignores the interrupt is killed", func(t *testing.T) {
			exec(t, sb, "class Stubborn:\n    def __repr__(self):\n        while True:\n            try:\n                while True: pass\n            except BaseException: pass\nstubborn = Stubborn()")
			_, _, err := sb.GetVariable(deadline(), "stubborn")
			if !errors.Is(err, supervisor.ErrCanceled) || !errors.Is(err, supervisor.ErrDead) {
				t.Fatalf("err = %v, want ErrCanceled and ErrDead", err)
			}
			if _, err := sb.Execute(context.Background(), "1"); !errors.Is(err, supervisor.ErrDead) {
				t.Fatalf("Execute after the kill: %v, want ErrDead", err)
			}
		})
	})
}
