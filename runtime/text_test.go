package runtime

import (
	"strings"
	"testing"
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
