package spin

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestNewPollsOnlyPollableInput(t *testing.T) {
	if p := New(strings.NewReader("x"), time.Second); p.rc != nil {
		t.Error("a reader that is not a file got a poller")
	}
	r, _ := pipe(t)
	if p := New(r, 0); p.rc != nil {
		t.Error("a zero duration got a poller")
	}
	if p := New(r, -time.Second); p.rc != nil {
		t.Error("a negative duration got a poller")
	}
	if p := New(r, time.Second); canPoll && p.rc == nil {
		t.Error("a pipe got no poller")
	}
}

// TestWaitReturnsOnData: a poller with an hour to spin returns as soon as
// the pipe has data (the test's deadline catches one that spins on), and
// the data is then there to read.
func TestWaitReturnsOnData(t *testing.T) {
	if !canPoll {
		t.Skip("no polling on this system")
	}
	r, w := pipe(t)
	p := New(r, time.Hour)
	if p.rc == nil {
		t.Skip("one processor: no polling")
	}
	go func() { _, _ = w.Write([]byte("frame")) }()
	p.Wait()
	if !readableNow(t, p) {
		t.Fatal("Wait returned before the pipe had data")
	}
	buf := make([]byte, 8)
	if n, err := r.Read(buf); err != nil || string(buf[:n]) != "frame" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
}

type buffered int

func (b buffered) Buffered() int { return int(b) }

// TestAwaitSkipsWhenBuffered: with input already buffered, Await returns
// at once, however long its poller would spin on an empty pipe.
func TestAwaitSkipsWhenBuffered(t *testing.T) {
	r, _ := pipe(t)
	New(r, time.Hour).Await(buffered(1))
}

func readableNow(t *testing.T, p Poller) (ok bool) {
	t.Helper()
	if err := p.rc.Control(func(fd uintptr) { ok = readable(fd) }); err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestWaitEnds: with nothing to read, Wait returns once its time is up.
func TestWaitEnds(t *testing.T) {
	r, _ := pipe(t)
	New(r, time.Millisecond).Wait()
	Poller{}.Wait()
}

func pipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// TestEstimate: the poll is twice the recent average of the inputs'
// delays when that lies between base and most, and base otherwise (no
// input seen yet, inputs that come at once, or later than most allows).
func TestEstimate(t *testing.T) {
	const base, most = 100 * time.Microsecond, 400 * time.Microsecond
	var e Estimate
	if d := e.Poll(base, most); d != base {
		t.Fatalf("no input seen: %v, want %v", d, base)
	}
	e.Observe(150 * time.Microsecond)
	if d := e.Poll(base, most); d != 300*time.Microsecond {
		t.Fatalf("after 150 µs: %v, want 300 µs", d)
	}
	for range 20 {
		e.Observe(5 * time.Millisecond)
	}
	if d := e.Poll(base, most); d != base {
		t.Fatalf("after inputs that came in 5 ms: %v, want %v", d, base)
	}
	for range 40 {
		e.Observe(120 * time.Microsecond)
	}
	if d := e.Poll(base, most); d < 235*time.Microsecond || d > 245*time.Microsecond {
		t.Fatalf("back to 120 µs: %v, want about 240 µs", d)
	}
	for range 40 {
		e.Observe(10 * time.Microsecond)
	}
	if d := e.Poll(base, most); d != base {
		t.Fatalf("inputs that come at once: %v, want %v", d, base)
	}
}
