package runtime

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCopyASCII(t *testing.T) {
	base := strings.Repeat("0123456789abcdef", 5) + "xyz" // 83 bytes
	for _, at := range []int{-1, 0, 1, 7, 8, 15, 16, 17, 31, 32, 79, 80, 82} {
		s := base
		want := len(s)
		if at >= 0 {
			s = s[:at] + "é" + s[at+1:] // a two-byte character in place of one byte
			want = at
		}
		dst := make([]byte, len(s))
		got := copyASCII(dst, s)
		if got != want {
			t.Fatalf("non-ASCII at %d: copied %d, want %d", at, got, want)
		}
		if string(dst[:got]) != s[:got] {
			t.Fatalf("non-ASCII at %d: copied %q", at, dst[:got])
		}
	}
}

func TestTextShape(t *testing.T) {
	for _, tc := range []struct {
		s       string
		n       int
		maxChar rune
		ok      bool
	}{
		{"", 0, 0x7f, true},
		{"plain ascii text, longer than eight bytes", 41, 0x7f, true},
		{"café", 4, 0xff, true},
		{"café ☕ 日本 and then a long ASCII tail of text", 44, 0xffff, true},
		{"emoji 😀!", 8, 0x10ffff, true},
		{"bad \xff byte", 0, 0, false},
		{"truncated \xe2\x98", 0, 0, false},
	} {
		n, maxChar, ok := textShape(tc.s)
		if ok != tc.ok || (ok && (n != tc.n || maxChar != tc.maxChar)) {
			t.Errorf("textShape(%q) = %d, %#x, %v; want %d, %#x, %v", tc.s, n, maxChar, ok, tc.n, tc.maxChar, tc.ok)
		}
	}
}

// decodeRune agrees with utf8.DecodeRuneInString on every one-, two- and
// three-byte sequence (valid or not), and on four-byte ones.
func TestDecodeRune(t *testing.T) {
	check := func(s string) {
		r, n := decodeRune(s)
		wr, wn := utf8.DecodeRuneInString(s)
		if r != wr || n != wn {
			t.Fatalf("decodeRune(%q) = %U, %d; want %U, %d", s, r, n, wr, wn)
		}
	}
	for a := 0x80; a < 0x100; a++ {
		for b := 0; b < 0x100; b++ {
			check(string([]byte{byte(a), byte(b)}))
			for _, c := range []byte{0x00, 0x41, 0x80, 0x9f, 0xa0, 0xbf, 0xc0, 0xff} {
				check(string([]byte{byte(a), byte(b), c}))
			}
		}
	}
	check("😀 and more")
	check("\xf0\x9f\x98")
}

// textShape agrees with decoding the text rune by rune, on random texts
// of characters of every kind, valid or cut short.
func TestTextShapeRandom(t *testing.T) {
	chars := []string{"a", "Z", " ", "\n", "é", "ÿ", "Ā", "☕", "日", "\uffff", "😀", "\U0010ffff"}
	kind := func(r rune) rune {
		switch {
		case r < 0x80:
			return 0x7f
		case r < 0x100:
			return 0xff
		case r < 0x10000:
			return 0xffff
		}
		return 0x10ffff
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 20000 {
		var b strings.Builder
		for range rng.IntN(40) {
			b.WriteString(chars[rng.IntN(len(chars))])
		}
		s := b.String()
		if rng.IntN(8) == 0 && len(s) > 0 {
			s = s[:rng.IntN(len(s))] // maybe in the middle of a character
		}
		wantN, wantMax := 0, rune(0x7f)
		for _, r := range s {
			wantN++
			wantMax = max(wantMax, kind(r))
		}
		n, maxChar, ok := textShape(s)
		if ok != utf8.ValidString(s) {
			t.Fatalf("textShape(%q) ok = %v", s, ok)
		}
		if ok && (n != wantN || maxChar != wantMax) {
			t.Fatalf("textShape(%q) = %d, %#x; want %d, %#x", s, n, maxChar, wantN, wantMax)
		}
	}
}
