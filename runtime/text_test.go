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
	}{
		{"", 0, 0x7f},
		{"plain ascii text, longer than eight bytes", 41, 0x7f},
		{"café", 4, 0xff},
		{"café ☕ 日本 and then a long ASCII tail of text", 44, 0xffff},
		{"emoji 😀!", 8, 0x10ffff},
	} {
		n, maxChar := textShape(tc.s)
		if n != tc.n || maxChar != tc.maxChar {
			t.Errorf("textShape(%q) = %d, %#x; want %d, %#x", tc.s, n, maxChar, tc.n, tc.maxChar)
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

// textShape and decodeText agree with decoding the text rune by rune, on
// random texts of characters of every kind, valid or cut short: the shape
// of valid text, its characters, and invalid text refused.
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
		valid := utf8.ValidString(s)
		wantN, wantMax := 0, rune(0x7f)
		for _, r := range s {
			wantN++
			wantMax = max(wantMax, kind(r))
		}
		n, maxChar := textShape(s)
		if valid && (n != wantN || maxChar != wantMax) {
			t.Fatalf("textShape(%q) = %d, %#x; want %d, %#x", s, n, maxChar, wantN, wantMax)
		}
		size := map[rune]int{0x7f: 1, 0xff: 1, 0xffff: 2, 0x10ffff: 4}[maxChar]
		buf := make([]byte, size*n)
		if ok := decodeText(buf, s, size); ok != valid {
			t.Fatalf("decodeText(%q) ok = %v", s, ok)
		}
		if valid {
			i := 0
			for _, r := range s {
				var got rune
				switch size {
				case 1:
					got = rune(buf[i])
				case 2:
					got = rune(buf[i]) | rune(buf[i+1])<<8
				default:
					got = rune(buf[i]) | rune(buf[i+1])<<8 | rune(buf[i+2])<<16 | rune(buf[i+3])<<24
				}
				if got != r {
					t.Fatalf("decodeText(%q): %U at byte %d, want %U", s, got, i, r)
				}
				i += size
			}
		}
	}
	// Too small a buffer, or too narrow a kind, is refused, not overrun.
	if decodeText(make([]byte, 3), "abcd", 1) || decodeText(make([]byte, 8), "日本", 1) || decodeText(make([]byte, 4), "😀", 2) {
		t.Fatal("decodeText accepted text that does not fit")
	}
}
