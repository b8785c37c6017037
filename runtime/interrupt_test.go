package runtime

import (
	"context"
	goruntime "runtime"
	"testing"
	"time"
)

// TestAtomicInterruptWait: a wait ends with the signal when one is stored
// (before or during the wait), without it when its context ends or its
// time is up.
func TestAtomicInterruptWait(t *testing.T) {
	var a AtomicInterrupt
	var _ InterruptWaiter = &a

	waitFor := func(ch <-chan bool, what string) bool {
		t.Helper()
		select {
		case v := <-ch:
			return v
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the waiter was not woken", what)
		}
		return false
	}
	// waiting reports once a's waiter has registered.
	waiting := func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.wake != nil
	}

	for _, store := range []func(){
		func() { a.Store(SIGINT) },
		func() { a.Swap(SIGINT) },
	} {
		got := make(chan bool, 1)
		go func() { got <- a.WaitInterrupt(context.Background(), -1) }()
		for !waiting() {
			goruntime.Gosched()
		}
		store()
		if !waitFor(got, "store") {
			t.Fatal("woken without the signal")
		}
		if a.Swap(0) != SIGINT {
			t.Fatal("signal lost")
		}
	}

	a.Store(SIGINT)
	if !a.WaitInterrupt(context.Background(), -1) {
		t.Fatal("a pending signal did not end the wait at once")
	}
	a.Swap(0)

	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan bool, 1)
	go func() { got <- a.WaitInterrupt(ctx, -1) }()
	for !waiting() {
		goruntime.Gosched()
	}
	cancel()
	if waitFor(got, "context") {
		t.Fatal("a cancelled wait reported a signal")
	}
	if a.WaitInterrupt(context.Background(), time.Millisecond) {
		t.Fatal("a wait that timed out reported a signal")
	}
}

// sourceOnly is an InterruptSource that cannot wake a waiter.
type sourceOnly struct{ a AtomicInterrupt }

func (s *sourceOnly) Swap(v int32) int32 { return s.a.Swap(v) }
func (s *sourceOnly) Load() int32        { return s.a.Load() }

// TestPolledInterrupt: an InterruptSource that is not an InterruptWaiter is
// looked at by its waits, which see a signal stored meanwhile.
func TestPolledInterrupt(t *testing.T) {
	src := &sourceOnly{}
	w := waiterOf(src)
	if _, ok := w.(polled); !ok {
		t.Fatalf("waiterOf(%T) = %T, want polled", src, w)
	}
	if waiterOf(&src.a) != InterruptWaiter(&src.a) {
		t.Fatal("an InterruptWaiter was wrapped")
	}
	go src.Swap(SIGINT)
	for !w.WaitInterrupt(context.Background(), -1) {
	}
	if src.Swap(0) != SIGINT {
		t.Fatal("signal lost")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if w.WaitInterrupt(ctx, -1) {
		t.Fatal("a done context reported a signal")
	}
}
