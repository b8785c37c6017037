package tests

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
)

// stuckCallback is an OnStdout that never returns from the line "block"
// (until the test ends) and records the other lines.
type stuckCallback struct {
	entered chan struct{} // gets a value when the callback blocks
	release chan struct{}
	lines   atomic.Int64
	last    atomic.Value
}

func newStuckCallback(t *testing.T) *stuckCallback {
	c := &stuckCallback{entered: make(chan struct{}, 1), release: make(chan struct{})}
	t.Cleanup(func() { close(c.release) })
	return c
}

func (c *stuckCallback) onLine(l string) {
	if l == "block" {
		select {
		case c.entered <- struct{}{}:
		default:
		}
		<-c.release
		return
	}
	c.lines.Add(1)
	c.last.Store(l)
}

// executeBounded runs Execute and fails the test if it has not returned
// within a minute (the bug this guards against is a hang).
func executeBounded(t *testing.T, ctx context.Context, sb supervisor.Sandbox, code string) (*supervisor.CodeExecution, error) {
	t.Helper()
	type result struct {
		ce  *supervisor.CodeExecution
		err error
	}
	done := make(chan result, 1)
	go func() {
		ce, err := sb.Execute(ctx, code)
		done <- result{ce, err}
	}()
	select {
	case r := <-done:
		return r.ce, r.err
	case <-time.After(time.Minute):
		t.Fatalf("Execute(%q) did not return: an output callback that never returns holds it", code)
		return nil, nil
	}
}

// An output callback that never returns cannot keep Execute from
// returning, whether the code is still writing (held by the callbacks'
// back-pressure) or has returned: the execution's context, Timeout and
// Cancel end it, the lines are all in the CodeExecution, and the sandbox
// (its worker) lives on for the next execution, whose callbacks work.
func TestStuckOutputCallback(t *testing.T) {
	// More than the 1 MiB the code may write ahead of its callbacks.
	const flood = "print('block')\nfor i in range(30_000): print('x' * 99)\nprint('end')"
	const returned = "print('block')\nprint('end')"
	cases := []struct {
		name    string
		code    string
		timeout time.Duration // Config.Timeout
		wall    time.Duration // Config.WallTimeout
		ctx     bool          // a context that ends
		cancel  bool          // Cancel once the callback is stuck
		want    error
	}{
		{"writing, context", flood, 0, 0, true, false, supervisor.ErrCanceled},
		{"writing, Timeout", flood, time.Second, 0, false, false, supervisor.ErrTimeout},
		{"writing, Cancel", flood, 0, 0, false, true, supervisor.ErrCanceled},
		// Empty lines count against the limit too (they once did not,
		// and the code queued them all, then Execute waited for them).
		// Two million of them: more than a worker's pipe (1 MiB) holds
		// beyond what the queue does, so that the code is held there too.
		{"empty lines, Timeout", "print('block')\nimport sys\nfor _ in range(20): sys.stdout.write('\\n' * 100_000)", time.Second, 0, false, false, supervisor.ErrTimeout},
		{"returned, context", returned, 0, 0, true, false, supervisor.ErrCanceled},
		{"returned, Cancel", returned, 0, 0, false, true, supervisor.ErrCanceled},
		{"returned, WallTimeout", returned, 0, time.Second, false, false, supervisor.ErrTimeout},
		// The wait counts against the time limit, as a write that waits
		// for the callbacks does: the default configuration cannot hang.
		{"returned, Timeout", returned, time.Second, 0, false, false, supervisor.ErrTimeout},
	}
	forEachMode(t, func(t *testing.T, m mode) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				cb := newStuckCallback(t)
				// The callbacks get GracePeriod after a stop to catch up.
				cfg := supervisor.Config{OnStdout: cb.onLine, Timeout: tc.timeout, WallTimeout: tc.wall, GracePeriod: 200 * time.Millisecond}
				sb := newSandbox(t, m, cfg, "")
				pid := sb.Info().PID
				ctx := context.Background()
				if tc.ctx {
					var cancel context.CancelFunc
					ctx, cancel = context.WithCancel(ctx)
					defer cancel()
					go func() {
						<-cb.entered
						cancel()
					}()
				}
				if tc.cancel {
					go func() {
						<-cb.entered
						sb.Cancel()
					}()
				}
				ce, err := executeBounded(t, ctx, sb, tc.code)
				if !errors.Is(err, tc.want) {
					t.Fatalf("Execute: %v, want an error matching %v", err, tc.want)
				}
				if ce == nil || !strings.HasPrefix(ce.Stdout, "block\n") {
					t.Fatalf("CodeExecution %+v", ce)
				}
				if tc.code == returned && ce.Stdout != "block\nend\n" {
					t.Errorf("Stdout %q, want the code's two lines", ce.Stdout)
				}
				if tc.code != returned && ce.ErrorType != "KeyboardInterrupt" {
					// The writes waited for the callbacks until the stop:
					// the code did not run to its end.
					t.Errorf("the code ran to its end (%+v): its writes did not wait", ce)
				}
				// The sandbox is whole, in the same worker, and the next
				// execution's callbacks get its lines.
				ce, err = executeBounded(t, context.Background(), sb, "print(6 * 7)")
				if err != nil || ce.Stdout != "42\n" {
					t.Fatalf("next Execute: %v, %+v", err, ce)
				}
				if got := cb.last.Load(); got != "42" {
					t.Errorf("the next execution's callback got %v last, want 42", got)
				}
				if sb.Info().PID != pid {
					t.Errorf("worker %d replaced by %d", pid, sb.Info().PID)
				}
			})
		}
		t.Run("Destroy", func(t *testing.T) {
			cb := newStuckCallback(t)
			sb := newSandbox(t, m, supervisor.Config{OnStdout: cb.onLine, GracePeriod: 200 * time.Millisecond}, "")
			go func() {
				<-cb.entered
				sb.Destroy()
			}()
			_, err := executeBounded(t, context.Background(), sb, flood)
			if err == nil {
				t.Fatal("Execute after Destroy: no error")
			}
		})
	})
}

// Code that has returned is not reported as interrupted when the stop
// comes while its last output is still on its way to a slow callback. In
// a worker, the code can write a pipe's worth (1 MiB) beyond what the
// callbacks' queue holds, so that this code returns with its reply behind
// output that a stuck callback keeps unread; the Timeout that expires
// meanwhile once made the result report a KeyboardInterrupt the code
// never had. In direct mode the same code waits for the callbacks before
// it can end, and is interrupted: whatever the mode, a result whose code
// printed its last line has no error.
func TestOutputBehindTheReply(t *testing.T) {
	const code = "print('block')\nfor i in range(1100): print('x' * 999)\nprint('end')"
	forEachMode(t, func(t *testing.T, m mode) {
		cb := newStuckCallback(t)
		cfg := supervisor.Config{OnStdout: cb.onLine, Timeout: time.Second, GracePeriod: 200 * time.Millisecond, MaxOutputLength: 4 << 20}
		sb := newSandbox(t, m, cfg, "")
		pid := sb.Info().PID
		ce, err := executeBounded(t, context.Background(), sb, code)
		if !errors.Is(err, supervisor.ErrTimeout) {
			t.Fatalf("Execute: %v, want an error matching ErrTimeout (the callbacks never had every line)", err)
		}
		ended := strings.HasSuffix(ce.Stdout, "\nend\n")
		if m.name == "worker" && !ended {
			t.Fatalf("the worker's code did not run to its end (%d bytes of output, error %q): the test did not get its reply behind the output", len(ce.Stdout), ce.ErrorType)
		}
		if ended && ce.ErrorType != "" {
			t.Errorf("the code ran to its end, yet the result reports %s: %s", ce.ErrorType, ce.Error)
		}
		if !ended && ce.ErrorType != "KeyboardInterrupt" {
			t.Errorf("the code did not end and the result reports %q, want KeyboardInterrupt", ce.ErrorType)
		}
		if !ended {
			return
		}
		if n := strings.Count(ce.Stdout, "\n"); n != 1102 {
			t.Errorf("Stdout has %d lines, want all 1102", n)
		}
		ce, err = executeBounded(t, context.Background(), sb, "print(6 * 7)")
		if err != nil || ce.Stdout != "42\n" {
			t.Fatalf("next Execute: %v, %+v", err, ce)
		}
		if sb.Info().PID != pid {
			t.Errorf("worker %d replaced by %d", pid, sb.Info().PID)
		}
	})
}

// A stop does not cost the callbacks what the code wrote: the lines
// written before it, and those the code writes as it takes the interrupt,
// all reach a callback that keeps up.
func TestOutputAroundStop(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		var mu sync.Mutex
		var got []string
		sb := newSandbox(t, m, supervisor.Config{
			Timeout: 300 * time.Millisecond,
			OnStdout: func(l string) {
				mu.Lock()
				got = append(got, l)
				mu.Unlock()
			},
		}, "")
		code := "try:\n    for i in range(2000): print(i)\n    while True: pass\n" +
			"except KeyboardInterrupt:\n    print('bye')\n    raise"
		ce, err := executeBounded(t, context.Background(), sb, code)
		if !errors.Is(err, supervisor.ErrTimeout) || ce.ErrorType != "KeyboardInterrupt" {
			t.Fatalf("Execute: %v, %+v", err, ce)
		}
		var want []string
		for i := range 2000 {
			want = append(want, strconv.Itoa(i))
		}
		want = append(want, "bye")
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(got, want) {
			t.Fatalf("the callback got %d lines (last %q), want %d ending with bye", len(got), got[max(len(got)-1, 0):], len(want))
		}
	})
}

// WallTimeout, like Timeout, gives slow callbacks GracePeriod to catch up
// (the wait for them once ended at the wall deadline, already past).
func TestOutputAroundWallTimeout(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		var mu sync.Mutex
		var got []string
		sb := newSandbox(t, m, supervisor.Config{
			WallTimeout: 300 * time.Millisecond, GracePeriod: 5 * time.Second,
			OnStdout: func(l string) {
				time.Sleep(50 * time.Millisecond) // a slow consumer, not synchronisation
				mu.Lock()
				got = append(got, l)
				mu.Unlock()
			},
		}, "")
		ce, err := executeBounded(t, context.Background(), sb,
			"for i in range(10): print(i)\ntry:\n    while True: pass\nexcept KeyboardInterrupt:\n    print('bye')\n    raise")
		if !errors.Is(err, supervisor.ErrTimeout) || ce == nil || ce.ErrorType != "KeyboardInterrupt" {
			t.Fatalf("Execute: %v, %+v", err, ce)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 11 || got[10] != "bye" {
			t.Fatalf("the callback got %q, want 0..9 and bye", got)
		}
	})
}

// Cancel and the end of the execution's context (the command line's
// Ctrl-C), like the time limit, leave the callbacks what the code prints as
// it takes the interrupt, before Execute returns.
func TestOutputAroundCancel(t *testing.T) {
	for _, how := range []string{"Cancel", "context"} {
		t.Run(how, func(t *testing.T) {
			forEachMode(t, func(t *testing.T, m mode) {
				var mu sync.Mutex
				var got []string
				started := make(chan struct{}, 1)
				sb := newSandbox(t, m, supervisor.Config{OnStdout: func(l string) {
					mu.Lock()
					got = append(got, l)
					mu.Unlock()
					if l == "started" {
						started <- struct{}{}
					}
				}}, "")
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				done := make(chan result, 1)
				go func() {
					ce, err := sb.Execute(ctx,
						"print('started')\ntry:\n    while True: pass\nexcept KeyboardInterrupt:\n    print('bye')\n    raise")
					done <- result{ce, err}
				}()
				<-started
				if how == "Cancel" {
					sb.Cancel()
				} else {
					cancel()
				}
				r := wait(t, done)
				mu.Lock()
				defer mu.Unlock()
				if !errors.Is(r.err, supervisor.ErrCanceled) || r.ce == nil || r.ce.Stdout != "started\nbye\n" ||
					!slices.Equal(got, []string{"started", "bye"}) {
					t.Fatalf("Execute: %v, %+v; the callback got %q", r.err, r.ce, got)
				}
			})
		})
	}
}

// A Cancel that comes as Execute starts either interrupts the code or does
// nothing: it never leaves the code running to its end while it drops the
// lines the callbacks had not had yet (a Cancel between the publication of
// an execution's output and its run did).
func TestCancelAtStart(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		var mu sync.Mutex
		var got []string
		sb := newSandbox(t, m, supervisor.Config{OnStdout: func(l string) {
			mu.Lock()
			got = append(got, l)
			mu.Unlock()
		}}, "")
		for i := range 100 {
			mu.Lock()
			got = nil
			mu.Unlock()
			done := make(chan result, 1)
			go func() {
				ce, err := sb.Execute(context.Background(), "print('a')\nprint('b')")
				done <- result{ce, err}
			}()
			sb.Cancel()
			r := wait(t, done)
			mu.Lock()
			lines := slices.Clone(got)
			mu.Unlock()
			switch {
			case r.err == nil && !slices.Equal(lines, []string{"a", "b"}):
				t.Fatalf("run %d: completed, but the callback got %q", i, lines)
			case r.err != nil && (!errors.Is(r.err, supervisor.ErrCanceled) || r.ce == nil || r.ce.ErrorType != "KeyboardInterrupt"):
				t.Fatalf("run %d: %v, %+v (the callback got %q)", i, r.err, r.ce, lines)
			}
		}
	})
}
