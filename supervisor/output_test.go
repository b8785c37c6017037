package supervisor

import (
	"io"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
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
	if cap(c.tail) > 2*(c.tailMax*utf8.UTFMax+trimSlack+len(chunk)) || cap(c.head) > 1000 {
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

func TestRuneCount(t *testing.T) {
	for _, s := range []string{"", "a", "héllo wörld", strings.Repeat("abcdefgh", 9) + "é" + strings.Repeat("x", 17),
		"\xff\xfe", "ab\xe2\x82", "€€€€€€€€€", strings.Repeat("a", 7) + "\x80" + strings.Repeat("b", 8)} {
		if got, want := runeCount(s), utf8.RuneCountInString(s); got != want {
			t.Errorf("runeCount(%q) = %d, want %d", s, got, want)
		}
	}
}

// The collector keeps what a naive one keeps, however the output is cut
// into chunks, and Write's callers may reuse their buffer.
func TestOutputCollectorMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", "\n", "é", "€", "😀", "xyz"}
	for _, max := range []int{0, 1, 10, 101, 1000} {
		var all strings.Builder
		var lines []string
		c := newCollector(max, func(l string) { lines = append(lines, l) })
		buf := make([]byte, 0, 64)
		for range 2000 {
			buf = buf[:0]
			for range rng.IntN(20) {
				buf = append(buf, alphabet[rng.IntN(len(alphabet))]...)
			}
			all.Write(buf)
			if rng.IntN(2) == 0 {
				c.Write(buf)
				for i := range buf {
					buf[i] = '#' // reused by the caller
				}
			} else {
				c.WriteString(string(buf))
			}
		}
		got := c.String()
		runes := []rune(all.String())
		want := all.String()
		if len(runes) > max {
			head, tail := max/2, max-max/2
			want = string(runes[:head]) + truncationNotice(len(runes)-max) + string(runes[len(runes)-tail:])
		}
		if got != want {
			t.Fatalf("max %d: kept %q, want %q", max, got, want)
		}
		joined := strings.Join(lines, "\n")
		if strings.HasSuffix(all.String(), "\n") {
			joined += "\n"
		}
		if joined != all.String() {
			t.Fatalf("max %d: lines differ from the output", max)
		}
	}
}
