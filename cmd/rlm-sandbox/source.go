package main

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// sourceError is a code file that cannot be decoded: CPython raises
// SyntaxError for it before running any of it.
type sourceError struct {
	name, msg string
}

func (e *sourceError) Error() string { return e.name + ": SyntaxError: " + e.msg }

// codingRE is PEP 263's coding declaration, as CPython's tokenizer finds it
// in the first or second line.
var codingRE = regexp.MustCompile(`^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)`)

// decodeSource turns the bytes of a code file into text the way CPython
// reads a script: a UTF-8 byte order mark is dropped, a PEP 263 coding
// declaration in the first two lines is followed, and the default is
// UTF-8. Only UTF-8, Latin-1 (ISO 8859-1) and ASCII can be declared; other
// codings, and bytes the coding does not allow, are a *sourceError.
func decodeSource(name string, b []byte) (string, error) {
	fail := func(format string, args ...any) (string, error) {
		return "", &sourceError{name: name, msg: fmt.Sprintf(format, args...)}
	}
	bom := bytes.HasPrefix(b, []byte("\xef\xbb\xbf"))
	if bom {
		b = b[3:]
	}
	coding := "utf-8"
	declared := declaredCoding(b)
	if declared != "" {
		coding = normalCoding(declared)
		switch {
		case bom && coding != "utf-8":
			return fail("encoding problem: %s with BOM", declared)
		case coding == "":
			return fail("encoding problem: %s (rlm-sandbox reads code in UTF-8, Latin-1 or ASCII: convert the file to UTF-8)", declared)
		}
	}
	switch coding {
	case "iso-8859-1":
		r := make([]rune, len(b))
		for i, c := range b {
			r[i] = rune(c)
		}
		return string(r), nil
	case "ascii":
		for i, c := range b {
			if c >= 0x80 {
				return fail("(unicode error) 'ascii' codec can't decode byte 0x%02x on line %d: ordinal not in range(128)", c, lineOf(b, i))
			}
		}
	default:
		if !utf8.Valid(b) {
			i := firstInvalid(b)
			if declared != "" {
				return fail("(unicode error) 'utf-8' codec can't decode byte 0x%02x on line %d", b[i], lineOf(b, i))
			}
			return fail("Non-UTF-8 code starting with '\\x%02x' in file %s on line %d, but no encoding declared; "+
				"see https://peps.python.org/pep-0263/ for details", b[i], name, lineOf(b, i))
		}
	}
	return string(b), nil
}

// declaredCoding is the coding named in the first line, or in the second
// when the first is blank or a comment; "" when there is none.
func declaredCoding(b []byte) string {
	lines := bytes.SplitN(b, []byte("\n"), 3)
	for i, l := range lines[:min(2, len(lines))] {
		if m := codingRE.FindSubmatch(l); m != nil {
			return string(m[1])
		}
		if t := bytes.TrimLeft(l, " \t\f\r"); i == 0 && len(t) > 0 && t[0] != '#' {
			break
		}
	}
	return ""
}

// normalCoding is the coding's canonical name, as CPython's tokenizer
// normalizes it, when it is one rlm-sandbox reads; else "".
func normalCoding(name string) string {
	n := strings.ReplaceAll(strings.ToLower(name), "_", "-")
	switch {
	case n == "utf-8" || strings.HasPrefix(n, "utf-8-") || n == "utf8":
		return "utf-8"
	case n == "latin-1" || n == "iso-8859-1" || n == "iso-latin-1" || n == "latin1" || n == "iso8859-1" || n == "l1" ||
		strings.HasPrefix(n, "latin-1-") || strings.HasPrefix(n, "iso-8859-1-") || strings.HasPrefix(n, "iso-latin-1-"):
		return "iso-8859-1"
	case n == "ascii" || n == "us-ascii" || n == "646":
		return "ascii"
	}
	return ""
}

func firstInvalid(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// lineOf is the 1-based line of byte i.
func lineOf(b []byte, i int) int { return 1 + bytes.Count(b[:i], []byte("\n")) }
