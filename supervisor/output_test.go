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
	c := newCollector(10, func(l string) { lines = append(lines, l) }, nil)
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

	exact := newCollector(10, nil, nil)
	exact.WriteString("ééééé")
	exact.WriteString("ééééé")
	if got := exact.String(); got != strings.Repeat("é", 10) || exact.truncated() {
		t.Fatalf("output of exactly the limit: %q", got)
	}

	unlimited := newCollector(-1, nil, nil)
	unlimited.WriteString(strings.Repeat("x", 1000))
	if unlimited.String() != strings.Repeat("x", 1000) || unlimited.truncated() {
		t.Fatal("unlimited collector dropped output")
	}
}

func TestOutputCollectorBounded(t *testing.T) {
	c := newCollector(100, nil, nil)
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
	c := newCollector(-1, func(l string) { lines = append(lines, l) }, nil)
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
		c := newCollector(max, func(l string) { lines = append(lines, l) }, nil)
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

// Lines of any length reach onLine in pieces of at most maxLinePiece
// bytes, cut before a character, which joined give the line; chunks that
// end exactly at a piece's end (the worker sends 64 KiB frames) included.
// onWrite sees every chunk as it came.
func TestLongLinesInPieces(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []string{"x", "é", "€", "😀"}
	for round := range 40 {
		var text strings.Builder
		for range 1 + rng.IntN(4) {
			n := []int{0, 1, maxLinePiece - 1, maxLinePiece, maxLinePiece + 1, 3*maxLinePiece + rng.IntN(100), rng.IntN(5 * maxLinePiece)}[rng.IntN(7)]
			for text.Len() < n {
				text.WriteString(alphabet[rng.IntN(len(alphabet))])
			}
			text.WriteString("\n")
		}
		if round%2 == 1 {
			text.WriteString(strings.Repeat("y", maxLinePiece+rng.IntN(3))) // no final newline
		}
		all := text.String()
		var pieces []string
		var written strings.Builder
		c := newCollector(-1, func(l string) { pieces = append(pieces, l) }, func(s string) { written.WriteString(s) })
		for s := all; s != ""; {
			n := min(len(s), []int{maxLinePiece, 1 + rng.IntN(maxLinePiece+2), 1 + rng.IntN(10)}[rng.IntN(3)])
			c.Write([]byte(s[:n]))
			s = s[n:]
		}
		if got := c.String(); got != all {
			t.Fatalf("round %d: kept %d bytes of %d", round, len(got), len(all))
		}
		if written.String() != all {
			t.Fatalf("round %d: onWrite got %d bytes of %d", round, written.Len(), len(all))
		}
		// Each line is the join of the next pieces, or one empty piece.
		lines := strings.Split(strings.TrimSuffix(all, "\n"), "\n")
		next := 0
		for _, line := range lines {
			var joined strings.Builder
			for first := true; first || joined.Len() < len(line); first = false {
				if next == len(pieces) {
					t.Fatalf("round %d: %d pieces for %d lines", round, len(pieces), len(lines))
				}
				p := pieces[next]
				next++
				if len(p) > maxLinePiece || !utf8.ValidString(p) {
					t.Fatalf("round %d: piece %d has %d bytes, valid UTF-8 %v", round, next-1, len(p), utf8.ValidString(p))
				}
				joined.WriteString(p)
			}
			if joined.String() != line {
				t.Fatalf("round %d: the pieces do not join to the line", round)
			}
		}
		if next != len(pieces) {
			t.Fatalf("round %d: %d pieces left over", round, len(pieces)-next)
		}
	}
}

func TestCapText(t *testing.T) {
	for _, c := range []struct {
		s    string
		max  int
		want string
		cut  bool
	}{
		{"short", 10, "short", false},
		{"exactly10!", 10, "exactly10!", false},
		{"ééééé", 5, "ééééé", false}, // 10 bytes, 5 characters
		{"abcdefghijkl", 5, "ab" + truncationNotice(7) + "jkl", true},
		{"éàüöñçøåßœ", 4, "éà" + truncationNotice(6) + "ßœ", true},
		{"anything", -1, "anything", false},
	} {
		got, cut := capText(c.s, c.max)
		if got != c.want || cut != c.cut {
			t.Errorf("capText(%q, %d) = %q, %v; want %q, %v", c.s, c.max, got, cut, c.want, c.cut)
		}
	}
}
