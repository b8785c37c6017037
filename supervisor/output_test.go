package supervisor

import (
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"
)

func TestOutputCollector(t *testing.T) {
	var lines []string
	c := newCollector(10, func(l string) { lines = append(lines, l) })
	c.WriteString("héllo ")
	c.WriteString("wörld\nsecond line\nthird")
	// 29 characters: the first 5 and the last 5 are kept.
	if got, want := c.String(), "héllo"+truncationNotice(19)+"third"; got != want {
		t.Fatalf("kept %q, want %q", got, want)
	}
	if !c.truncated() {
		t.Error("not reported truncated")
	}
	if want := []string{"héllo wörld", "second line", "third"}; !reflect.DeepEqual(lines, want) {
		t.Fatalf("lines %q, want %q", lines, want)
	}

	exact := newCollector(10, nil)
	exact.WriteString("ééééé")
	exact.WriteString("ééééé")
	if got := exact.String(); got != strings.Repeat("é", 10) || exact.truncated() {
		t.Fatalf("output of exactly the limit: %q", got)
	}

	unlimited := newCollector(-1, nil)
	unlimited.WriteString(strings.Repeat("x", 1000))
	if unlimited.String() != strings.Repeat("x", 1000) || unlimited.truncated() {
		t.Fatal("unlimited collector dropped output")
	}
}

func TestOutputCollectorBounded(t *testing.T) {
	c := newCollector(100, nil)
	chunk := strings.Repeat("0123456789", 100) + "\n"
	for range 10_000 { // 10 MB
		c.WriteString(chunk)
	}
	if cap(c.tail) > 4*maxLinePiece || cap(c.head) > 1000 {
		t.Fatalf("kept %d+%d bytes for a limit of 100 characters", cap(c.head), cap(c.tail))
	}
	got := c.String()
	want := chunk[:50] + truncationNotice(10_000*len(chunk)-100) + chunk[len(chunk)-50:]
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestLinePieces(t *testing.T) {
	var lines []string
	c := newCollector(-1, func(l string) { lines = append(lines, l) })
	c.WriteString(strings.Repeat("a", 3*maxLinePiece/2))
	c.WriteString("\nb")
	_ = c.String()
	if len(lines) != 3 || len(lines[0]) != maxLinePiece || len(lines[1]) != maxLinePiece/2 || lines[2] != "b" {
		t.Fatalf("got %d lines", len(lines))
	}
}

func TestGuardLine(t *testing.T) {
	var got []string
	f := guardLine(slog.New(slog.NewTextHandler(io.Discard, nil)), "OnStdout", func(l string) {
		if l == "boom" {
			panic("callback bug")
		}
		got = append(got, l)
	})
	f("a")
	f("boom")
	f("b")
	if !reflect.DeepEqual(got, []string{"a"}) {
		t.Fatalf("got %q", got)
	}
	if guardLine(nil, "x", nil) != nil {
		t.Fatal("a nil callback must stay nil")
	}
}
