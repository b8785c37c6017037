package pytext

import "testing"

// The cases are what CPython's b.decode("utf-8", "replace") gives, but
// for an encoded surrogate (see Replace).
func TestReplace(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain é", "plain é"},
		{"a\xffb", "a\ufffdb"},
		{"\xff\xfe", "\ufffd\ufffd"},
		{"\xe2\x82", "\ufffd"},                 // a truncated € (e2 82 ac)
		{"\xe2\x82x", "\ufffdx"},               // the same, followed by ASCII
		{"\xed\xb2\x80", "\ufffd"},             // a surrogate: one character (Python: three)
		{"\xed\xb2", "\ufffd\ufffd"},           // ED takes 80-9F only
		{"\xf0\x9f\x98", "\ufffd"},             // a truncated emoji
		{"\xf0\x80\x80", "\ufffd\ufffd\ufffd"}, // overlong: F0 takes 90-BF only
		{"\xc0\xaf", "\ufffd\ufffd"},           // C0 is never a lead byte
		{"\xe0\xa0", "\ufffd"},
		{"ok\xf4\x90\x80\x80", "ok\ufffd\ufffd\ufffd\ufffd"}, // past U+10FFFF
	} {
		if got := Replace(c.in); got != c.want {
			t.Errorf("Replace(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
