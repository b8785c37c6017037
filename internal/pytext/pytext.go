// Package pytext turns bytes into text the way Python decodes UTF-8 with
// errors="replace".
package pytext

import (
	"strings"
	"unicode/utf8"
)

// Replace returns s with each ill-formed part replaced by U+FFFD as
// Python's bytes.decode("utf-8", "replace") does: one U+FFFD for each
// maximal subpart of an ill-formed sequence (a lead byte and the
// continuation bytes that could still have completed it), the Unicode
// Standard's recommended practice. strings.ToValidUTF8 gives one for a
// whole run of bad bytes, and Go's decoder one for each byte.
//
// One exception: the three bytes of an encoded surrogate (ED A0..BF
// 80..BF), which Python decodes as three U+FFFD, are one here. Such bytes
// come from a Python str holding a lone surrogate (os.fsdecode makes
// them), which the guest writes "surrogatepass": one character, which
// stays one.
func Replace(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r != utf8.RuneError || n > 1 {
			b.WriteString(s[i : i+n])
			i += n
			continue
		}
		b.WriteRune(utf8.RuneError)
		if surrogate(s[i:]) {
			i += 3
			continue
		}
		i += maximalSubpart(s[i:])
	}
	return b.String()
}

// maximalSubpart is the length of the ill-formed sequence at the start of
// s: its lead byte and the continuation bytes that follow it as far as a
// well-formed sequence could go (at least 1).
func maximalSubpart(s string) int {
	need, lo, hi := 0, byte(0x80), byte(0xBF) // bytes after the lead; the second byte's range
	switch c := s[0]; {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c == 0xED:
		need, hi = 2, 0x9F
	case c >= 0xE1 && c <= 0xEF:
		need = 2
	case c == 0xF0:
		need, lo = 3, 0x90
	case c == 0xF4:
		need, hi = 3, 0x8F
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	default:
		return 1 // not a lead byte
	}
	n := 1
	for k := 0; k < need && n < len(s); k++ {
		c := s[n]
		if k > 0 {
			lo, hi = 0x80, 0xBF
		}
		if c < lo || c > hi {
			break
		}
		n++
	}
	return n
}

// surrogate reports whether s starts with an encoded surrogate.
func surrogate(s string) bool {
	return len(s) >= 3 && s[0] == 0xED && s[1] >= 0xA0 && s[1] <= 0xBF && s[2] >= 0x80 && s[2] <= 0xBF
}
