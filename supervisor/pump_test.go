package supervisor

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// The pump makes the calls in the order they were queued, across
// callbacks, and finish returns once they are all made.
func TestPumpOrder(t *testing.T) {
	p := newPump()
	var got []string
	a := p.via(func(s string) { got = append(got, "a:"+s) })
	b := p.viaCopy(func(s string) { got = append(got, "b:"+s) })
	var want []string
	buf := []byte("x")
	for i := range 1000 {
		s := fmt.Sprint(i)
		if i%3 == 0 {
			buf = append(buf[:0], s...)
			b(string(buf))
			want = append(want, "b:"+s)
		} else {
			a(s)
			want = append(want, "a:"+s)
		}
	}
	if err := p.finish(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("calls out of order: %v", got)
	}
}

// A write past the pump's limit waits for the callbacks; abandoning the
// pump ends the wait, though the callback in progress never returns, and
// finish then reports why.
func TestPumpAbandonFreesWriter(t *testing.T) {
	p := newPump()
	entered, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	f := p.via(func(s string) {
		if s == "block" {
			close(entered)
			<-release
		}
	})
	f("block")
	<-entered
	wrote := make(chan struct{})
	go func() {
		f(strings.Repeat("x", pumpLimit+1)) // over the limit: waits
		f("after")                          // abandoned: dropped at once
		close(wrote)
	}()
	flushed := make(chan error)
	go func() { flushed <- p.flush() }()
	why := errors.New("stopped")
	p.abandon(why)
	<-wrote
	if err := <-flushed; err != why {
		t.Fatalf("flush: %v, want %v", err, why)
	}
	if err := p.finish(); !errors.Is(err, why) {
		t.Fatalf("finish: %v, want an error matching %v", err, why)
	}
}
