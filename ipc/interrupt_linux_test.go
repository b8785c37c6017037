//go:build linux

package ipc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// dupPage maps a second view of p through a duplicate of its descriptor,
// as the worker does with the descriptor it inherits.
func dupPage(t *testing.T, p *Page) *Page {
	t.Helper()
	fd, err := unix.Dup(int(p.File().Fd()))
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "dup")
	q, err := OpenPage(f)
	if err != nil {
		f.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

func testSharedPage(t *testing.T, p *Page) {
	q := dupPage(t, p)
	if p.Load() != 0 || q.Load() != 0 {
		t.Fatal("new page is not zero")
	}
	p.Store(SignalInterrupt)
	if got := q.Load(); got != SignalInterrupt {
		t.Fatalf("other mapping sees %d, want %d", got, SignalInterrupt)
	}
	if got := q.Swap(0); got != SignalInterrupt {
		t.Fatalf("Swap returned %d", got)
	}
	if got := p.Load(); got != 0 {
		t.Fatalf("after Swap(0) the creator sees %d", got)
	}
	q.Store(-7)
	if got := p.Swap(1); got != -7 {
		t.Fatalf("creator swapped out %d, want -7", got)
	}
	if got := q.Load(); got != 1 {
		t.Fatalf("got %d, want 1", got)
	}
	// The returned word is apart from the interrupt word.
	if p.Returned() != 0 {
		t.Fatalf("new page has returned word %d", p.Returned())
	}
	q.MarkReturned(1<<40 + 7)
	if got := p.Returned(); got != 1<<40+7 {
		t.Fatalf("other mapping sees returned word %d, want %d", got, uint64(1<<40+7))
	}
	if got := p.Load(); got != 1 {
		t.Fatalf("MarkReturned changed the interrupt word to %d", got)
	}
}

func TestPageShared(t *testing.T) {
	p, err := NewPage()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	testSharedPage(t, p)
}

func TestPageTempFileFallback(t *testing.T) {
	f, err := createTempPageFile()
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPageFrom(f)
	if err != nil {
		f.Close()
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := os.Stat(f.Name()); !os.IsNotExist(err) {
		t.Fatalf("temporary file %s left on disk (%v)", f.Name(), err)
	}
	testSharedPage(t, p)
}

func TestPageSizeAndCloseOnExec(t *testing.T) {
	p, err := NewPage()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	st, err := p.File().Stat()
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != int64(os.Getpagesize()) {
		t.Fatalf("page file is %d bytes", st.Size())
	}
	flags, err := unix.FcntlInt(p.File().Fd(), unix.F_GETFD, 0)
	if err != nil {
		t.Fatal(err)
	}
	if flags&unix.FD_CLOEXEC == 0 {
		t.Fatal("page descriptor is inheritable; only ExtraFiles should pass it on")
	}
}

func TestOpenPageErrors(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	if err := os.WriteFile(small, []byte{1, 2, 3}, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(small, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := OpenPage(f); !errors.Is(err, ErrPageTooSmall) {
		t.Fatalf("3-byte file: got %v, want ErrPageTooSmall", err)
	}

	ok := filepath.Join(dir, "ok")
	if err := os.WriteFile(ok, []byte{0, 0, 0, 0}, 0o600); err != nil {
		t.Fatal(err)
	}
	ro, err := os.Open(ok)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := OpenPage(ro); err == nil {
		t.Fatal("mapped a read-only descriptor shared and writable")
	}

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if _, err := OpenPage(r); err == nil {
		t.Fatal("mapped a pipe")
	}
	if _, err := OpenPage(nil); err == nil {
		t.Fatal("mapped a nil file")
	}
}

// TestOpenPageFourBytes maps a file holding just the word, the smallest
// OpenPage accepts.
func TestOpenPageFourBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "word")
	if err := os.WriteFile(path, []byte{0, 0, 0, 0}, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	p, err := OpenPage(f)
	if err != nil {
		f.Close()
		t.Fatal(err)
	}
	p.Store(SignalInterrupt)
	p.MarkReturned(9) // no room for it: nothing
	if got := p.Returned(); got != 0 {
		t.Fatalf("a four-byte page has returned word %d", got)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != 4 || (data[0] != 2 && data[3] != 2) {
		t.Fatalf("file holds % x after Store(2)", data)
	}
}

func TestPageClose(t *testing.T) {
	p, err := NewPage()
	if err != nil {
		t.Fatal(err)
	}
	p.Store(SignalInterrupt)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	p.Store(1) // must not fault
	if p.Load() != 0 || p.Swap(1) != 0 {
		t.Fatal("closed page still reads a value")
	}

	var nilPage *Page
	nilPage.Store(1)
	if nilPage.Load() != 0 || nilPage.Swap(1) != 0 || nilPage.Close() != nil || nilPage.File() != nil {
		t.Fatal("nil page is not inert")
	}
}

// TestPageConcurrent races stores, swaps and Close (run with -race).
func TestPageConcurrent(t *testing.T) {
	p, err := NewPage()
	if err != nil {
		t.Fatal(err)
	}
	q := dupPage(t, p)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 1000 {
				p.Store(SignalInterrupt)
			}
		}()
		go func() {
			defer wg.Done()
			for range 1000 {
				if v := q.Swap(0); v != 0 && v != SignalInterrupt {
					t.Errorf("swapped out %d", v)
				}
			}
		}()
	}
	wg.Add(1)
	go func() { defer wg.Done(); p.Close() }()
	wg.Wait()
}

// longWaits makes each futex wait of the test last up to an hour, so that
// only a wake-up ends it: a waiter that is not woken hangs the test, and
// waitFor fails it.
func longWaits(t *testing.T) {
	old := waitSlice
	waitSlice = time.Hour
	t.Cleanup(func() { waitSlice = old })
}

// waitingPages returns a new page and a second mapping of it, for tests
// of waits (longWaits).
func waitingPages(t *testing.T) (p, q *Page) {
	longWaits(t)
	p, err := NewPage()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, dupPage(t, p)
}

// waitFor fails the test if ch yields nothing for a long while (a waiter
// that was never woken); it returns what ch yields.
func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: the waiter was not woken", what)
	}
	var zero T
	return zero
}

// TestPageWaitWokenByStore: a Store through one mapping wakes a waiter on
// another (the supervisor's page and the worker's), whether the waiter is
// asleep already or not yet.
func TestPageWaitWokenByStore(t *testing.T) {
	p, q := waitingPages(t)
	for i := range 50 {
		ready, got := make(chan struct{}), make(chan bool, 1)
		go func() {
			close(ready)
			got <- q.WaitInterrupt(context.Background(), -1)
		}()
		<-ready
		for i%2 == 0 && q.sleepers.Load() == 0 { // asleep already
			runtime.Gosched()
		}
		p.Store(SignalInterrupt)
		if !waitFor(t, got, "Store") {
			t.Fatalf("round %d: woken without the signal", i)
		}
		if v := q.Swap(0); v != SignalInterrupt {
			t.Fatalf("round %d: took %d", i, v)
		}
	}
	// Swap to a signal wakes too.
	got := make(chan bool, 1)
	go func() { got <- q.WaitInterrupt(context.Background(), -1) }()
	for q.sleepers.Load() == 0 {
		runtime.Gosched()
	}
	p.Swap(SignalInterrupt)
	if !waitFor(t, got, "Swap") {
		t.Fatal("woken without the signal")
	}
}

// TestPageWaitEnds: a wait ends, reporting no signal, when its context
// ends, when its time is up, and when the page is closed.
func TestPageWaitEnds(t *testing.T) {
	_, q := waitingPages(t)

	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan bool, 1)
	go func() { got <- q.WaitInterrupt(ctx, -1) }()
	for q.sleepers.Load() == 0 {
		runtime.Gosched()
	}
	cancel()
	if waitFor(t, got, "context") {
		t.Fatal("a cancelled wait reported a signal")
	}
	if q.WaitInterrupt(ctx, -1) {
		t.Fatal("a wait on a done context reported a signal")
	}

	if q.WaitInterrupt(context.Background(), time.Millisecond) {
		t.Fatal("a wait that timed out reported a signal")
	}

	go func() { got <- q.WaitInterrupt(context.Background(), -1) }()
	for q.sleepers.Load() == 0 { // Close must wake a waiter, not find none
		runtime.Gosched()
	}
	closed := make(chan error, 1)
	go func() { closed <- q.Close() }()
	if err := waitFor(t, closed, "Close"); err != nil {
		t.Fatal(err)
	}
	if waitFor(t, got, "Close") {
		t.Fatal("a wait ended by Close reported a signal")
	}
	// A closed or nil page waits for the context or the time alone.
	if q.WaitInterrupt(context.Background(), time.Millisecond) {
		t.Fatal("a closed page reported a signal")
	}
	var nilPage *Page
	if nilPage.WaitInterrupt(context.Background(), time.Millisecond) {
		t.Fatal("a nil page reported a signal")
	}
}
