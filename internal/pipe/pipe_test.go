package pipe

import (
	"errors"
	"io"
	"os"
	"testing"
	"time"
)

func newPipe(t *testing.T) (*Reader, *os.File) {
	t.Helper()
	r, w, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// TestReadWrite: what is written is read, in order, and the end of the
// write end is io.EOF.
func TestReadWrite(t *testing.T) {
	r, w := newPipe(t)
	go func() {
		for _, s := range []string{"abc", "defgh", "i"} {
			w.Write([]byte(s))
		}
		w.Close()
	}()
	got, err := io.ReadAll(r)
	if err != nil || string(got) != "abcdefghi" {
		t.Fatalf("read %q, %v", got, err)
	}
}

// TestDeadline: a Read blocked with no data ends when a deadline set from
// another goroutine passes, reads nothing, and the next Read, once the
// deadline is cleared, gets the data written later.
func TestDeadline(t *testing.T) {
	r, w := newPipe(t)
	done := make(chan error)
	go func() {
		_, err := r.Read(make([]byte, 8))
		done <- err
	}()
	r.SetReadDeadline(time.Unix(1, 0)) // in the past: ends the Read at once
	if err := <-done; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("blocked Read: %v, want a deadline error", err)
	}
	if err := r.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(make([]byte, 8)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past a future deadline: %v", err)
	}
	r.SetReadDeadline(time.Time{})
	w.Write([]byte("late"))
	b := make([]byte, 8)
	if n, err := r.Read(b); err != nil || string(b[:n]) != "late" {
		t.Fatalf("after the deadline: %q, %v", b[:n], err)
	}
}

// TestCloseWhileReading: Close ends a blocked Read with os.ErrClosed and
// returns after it.
func TestCloseWhileReading(t *testing.T) {
	r, _ := newPipe(t)
	done := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		close(started)
		_, err := r.Read(make([]byte, 8))
		done <- err
	}()
	<-started
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Read: %v, want os.ErrClosed", err)
	}
	if _, err := r.Read(make([]byte, 1)); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Read after Close: %v", err)
	}
}

// TestDeadlineBeforeData: a deadline that has passed ends a Read even
// when data waits (as for an *os.File), and the data stays for the next
// Read once the deadline is cleared; after Close, SetReadDeadline fails.
func TestDeadlineBeforeData(t *testing.T) {
	r, w := newPipe(t)
	w.Write([]byte("kept"))
	r.SetReadDeadline(time.Unix(1, 0))
	if _, err := r.Read(make([]byte, 8)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past the deadline: %v", err)
	}
	r.SetReadDeadline(time.Time{})
	b := make([]byte, 8)
	if n, err := r.Read(b); err != nil || string(b[:n]) != "kept" {
		t.Fatalf("after clearing the deadline: %q, %v", b[:n], err)
	}
	r.Close()
	if err := r.SetReadDeadline(time.Unix(1, 0)); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("SetReadDeadline after Close: %v", err)
	}
}
