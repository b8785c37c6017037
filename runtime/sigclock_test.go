package runtime_test

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/runtime"
)

// longRun is code whose run is long enough for the signal clock to space
// out CPython's checks (a loop of 100,000 passes), which then calls a C
// function that takes a few milliseconds and checks nothing (str.count)
// in a loop. With checks spaced out to one per 1,000 eval-breaker checks,
// a signal that comes in the second loop would be seen about 70
// iterations later (measured), but for the clock making the guest check
// at once (LOOP is that loop's iterable).
// The line that announces the second loop is written with os.write,
// after which CPython does not look for signals (print does).
const longRun = `
s = 'a' * 10_000_000
i = -1
try:
    for _ in range(100_000): pass
    import os; os.write(1, b'slow\n')
    for i in LOOP: s.count('z')
except KeyboardInterrupt:
    print('caught at', i)
`

// soon is how many iterations of longRun's second loop may pass before
// the signal is taken: a goroutine has to wake and run meanwhile.
const soon = 20

// onLine calls f once, on the first write that contains s.
type onLine struct {
	mu   sync.Mutex
	buf  strings.Builder
	s    string
	f    func()
	done bool
}

func (w *onLine) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.done && strings.Contains(w.buf.String(), w.s) {
		w.done = true
		w.f()
	}
	return len(p), nil
}

func (w *onLine) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestSignalClockInterruptsLongRun checks that a signal reaches a long
// run at once, in the interpreter's signal clock's spaced-out phase.
func TestSignalClockInterruptsLongRun(t *testing.T) {
	intr := &runtime.AtomicInterrupt{}
	in := newInterp(t, runtime.Config{Interrupt: intr})
	code := strings.Replace(longRun, "LOOP", "range(2_000)", 1)
	for i := range 3 { // and again: each run engages the clock anew
		// The signal comes from another goroutine, kept running, as a
		// cancel does. Stored from the guest's own goroutine (in the
		// output callback), it would ready the clock's watcher on the
		// guest's processor, where, on a loaded machine, it could wait
		// for the guest's next call to the host (iteration 69).
		var slow, over atomic.Bool
		stored := make(chan struct{})
		go func() {
			defer close(stored)
			for !slow.Load() {
				if over.Load() {
					return
				}
				goruntime.Gosched()
			}
			intr.Store(runtime.SIGINT)
		}()
		out := &onLine{s: "slow", f: func() { slow.Store(true) }}
		// A garbage collection that starts during the run stops every
		// goroutine, the clock's watcher with them, until the guest next
		// calls the host (the guest's code cannot be preempted): the
		// signal would wait for it. Collect now, so none starts.
		goruntime.GC()
		res, err := in.Exec(context.Background(), code, runtime.Output{Stdout: out})
		over.Store(true)
		<-stored
		if err != nil {
			t.Fatal(err)
		}
		var at int
		if _, err := fmt.Sscanf(out.String(), "slow\ncaught at %d\n", &at); err != nil || res.Error != nil || at >= soon {
			t.Fatalf("run %d: stdout %q, error %+v: want the signal taken in the second loop", i, out.String(), res.Error)
		}
		if intr.Load() != 0 {
			t.Fatalf("run %d: signal not taken", i)
		}
	}
	// A short run after long ones: CPython's own interval again.
	res, err := in.Exec(context.Background(), "x = sum(range(10))", runtime.Output{})
	if err != nil || res.Error != nil {
		t.Fatalf("after: %+v %v", res, err)
	}
}

// TestSignalClockClose checks that Close stops a long run in the clock's
// spaced-out phase, although its code ignores KeyboardInterrupt. (Whether
// it stops at once, the guest cannot tell after the fact; the goroutine
// that makes it look is the one TestSignalClockInterruptsLongRun checks.)
func TestSignalClockClose(t *testing.T) {
	in := newInterp(t, runtime.Config{})
	out := &onLine{s: "slow", f: func() { go in.Close() }}
	code := "while True:\n  try:" + strings.ReplaceAll(strings.Replace(longRun, "LOOP", "iter(int, 1)", 1), "\n", "\n    ") +
		"\n  except KeyboardInterrupt: pass"
	done := make(chan error, 1)
	go func() {
		_, err := in.Exec(context.Background(), code, runtime.Output{Stdout: out})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, runtime.ErrClosed) {
			t.Fatalf("err = %v, want ErrClosed", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("Close did not stop the run")
	}
}
