package runtime

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"unicode/utf8"
	"unsafe"

	"github.com/tetratelabs/wazero/api"
)

// Large strings are built in the guest directly: the host asks CPython for
// an empty str of the right length and width (PyUnicode_New) and writes
// the characters into it, instead of passing the UTF-8 bytes for Python to
// decode. The guest then never holds the bytes and the str at once (a
// 50 MB context used to take 100 MB of guest memory at its peak), and the
// decoding is one pass of Go over the text.
//
// The characters of a compact str follow its header, whose size depends
// on the width: PyASCIIObject for ASCII, PyCompactUnicodeObject for the
// rest. The sizes below are those of CPython 3.14 on wasm32; they are
// checked against the interpreter (strLayoutOK) before they are relied on,
// and a build where they differ uses the decoding path instead.
const (
	asciiHeader   = 20 // PyASCIIObject: refcnt, type, length, hash, state
	compactHeader = 28 // PyCompactUnicodeObject: + utf8_length, utf8
)

// errNoDirectText means the direct path does not apply; the caller
// decodes in the guest instead.
var errNoDirectText = errors.New("runtime: text not built directly")

// textShape is what PyUnicode_New needs to know of a string, if it is
// valid UTF-8: its length in characters and the largest character, exact
// only up to the kind of str it selects (0x7f, 0xff, 0xffff or 0x10ffff:
// ASCII, Latin-1, UCS-2, UCS-4), which is all PyUnicode_New uses it for.
// It does not check the text: decodeText does, as it copies it.
func textShape(s string) (n int, maxChar rune) {
	// In valid UTF-8 the characters are the bytes that are not
	// continuation bytes (10xxxxxx), and the largest character's kind
	// shows in the lead bytes: C2-C3 Latin-1, C4-EF UCS-2, F0-F4 UCS-4.
	// Eight bytes at a time: a byte's bit 7 marks what each mask finds.
	const high = 0x8080808080808080
	var cont, wide, four, nonASCII uint64
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := binary.LittleEndian.Uint64(unsafe.Slice(unsafe.StringData(s[i:]), 8))
		if w&high == 0 {
			continue
		}
		nonASCII |= w & high
		cont += uint64(bits.OnesCount64(w &^ (w << 1) & high))
		lead := w & (w << 1) & high                                // 11xxxxxx
		wide |= lead & ((w << 2) | (w << 3) | (w << 4) | (w << 5)) // 11xxxxxx above C3
		four |= lead & (w << 2) & (w << 3)                         // 1111xxxx
	}
	for ; i < len(s); i++ {
		b := s[i]
		switch {
		case b < 0x80:
			continue
		case b < 0xc0:
			cont++
		case b >= 0xf0:
			four = 1
		case b >= 0xc4:
			wide = 1
		}
		nonASCII = 1
	}
	switch {
	case four != 0:
		maxChar = 0x10ffff
	case wide != 0:
		maxChar = 0xffff
	case nonASCII != 0:
		maxChar = 0xff
	default:
		maxChar = 0x7f
	}
	return len(s) - int(cont), maxChar
}

// decodeText writes s into buf as characters of size bytes (1: Latin-1,
// 2: UCS-2, 4: UCS-4, little-endian), and reports whether s is valid
// UTF-8 whose characters fill buf exactly, all of them fitting in size.
func decodeText(buf []byte, s string, size int) bool {
	i := 0
	for j := 0; j < len(s); {
		if i+size > len(buf) {
			return false
		}
		r, n := rune(s[j]), 1
		if r >= utf8.RuneSelf {
			if r, n = decodeRune(s[j:]); r == utf8.RuneError && n == 1 {
				return false
			}
		}
		switch size {
		case 1:
			if r > 0xff {
				return false
			}
			buf[i] = byte(r)
		case 2:
			if r > 0xffff {
				return false
			}
			buf[i], buf[i+1] = byte(r), byte(r>>8)
		default:
			binary.LittleEndian.PutUint32(buf[i:], uint32(r))
		}
		i, j = i+size, j+n
	}
	return i == len(buf)
}

// decodeRune is utf8.DecodeRuneInString of a string that starts with a
// byte that is not ASCII, with the two- and three-byte forms (most text
// that is not ASCII) decoded here rather than by the general decoder.
func decodeRune(s string) (rune, int) {
	if len(s) >= 3 {
		c, c1, c2 := s[0], s[1], s[2]
		switch {
		case c >= 0xc2 && c < 0xe0 && c1&0xc0 == 0x80:
			return rune(c&0x1f)<<6 | rune(c1&0x3f), 2
		case c >= 0xe0 && c < 0xf0 && c1&0xc0 == 0x80 && c2&0xc0 == 0x80:
			r := rune(c&0x0f)<<12 | rune(c1&0x3f)<<6 | rune(c2&0x3f)
			if r >= 0x800 && (r < 0xd800 || r > 0xdfff) {
				return r, 3
			}
		}
	}
	return utf8.DecodeRuneInString(s)
}

// directTextFuncs are the C API functions the direct path calls.
var directTextFuncs = []string{"PyUnicode_New", "PyUnicode_ReadChar", "PyTuple_New", "PyTuple_SetItem",
	"PyObject_CallObject", "PyUnicode_FromStringAndSize"}

// setTextDirect binds a large str built in place; it runs with in.mu held.
// name "" is the context.
func (in *Interpreter) setTextDirect(ctx context.Context, name, s string) error {
	if in.takeFn == 0 || !in.strLayoutOK(ctx) {
		return errNoDirectText
	}
	if len(s) > 1<<31 {
		return errNoDirectText // the guest's Py_ssize_t
	}
	// Most large text is ASCII: build it as such, checking while copying
	// (one pass over the text instead of two), and start again with the
	// text's shape when that finds a byte that is not.
	if done, err := in.setASCII(ctx, name, s); done || err != nil {
		return err
	}
	n, maxChar := textShape(s)
	size := 4
	switch {
	case maxChar < 0x80:
		return errNoDirectText // not ASCII, or setASCII would have taken it: not UTF-8
	case maxChar < 0x100:
		size = 1
	case maxChar < 0x10000:
		size = 2
	}
	obj, err := in.newStrObject(ctx, n, maxChar)
	if err != nil {
		return err
	}
	buf, ok := in.main.Memory().Read(obj+compactHeader, uint32(size*n))
	if !ok {
		return in.dropObject(ctx, obj, "the str is outside memory")
	}
	if !decodeText(buf, s, size) {
		// Not UTF-8: Python decodes it, with its replacement rules.
		if err := in.dropObject(ctx, obj, ""); err != nil {
			return err
		}
		return errNoDirectText
	}
	return in.take(ctx, name, obj)
}

// setASCII binds s as an ASCII str, and reports whether it was (else the
// interpreter is as before).
func (in *Interpreter) setASCII(ctx context.Context, name, s string) (bool, error) {
	obj, err := in.newStrObject(ctx, len(s), 0x7f)
	var re *RequestError
	if errors.As(err, &re) {
		return false, nil // the text's own shape may need less
	} else if err != nil {
		return false, err
	}
	buf, ok := in.main.Memory().Read(obj+asciiHeader, uint32(len(s)))
	if !ok {
		return false, in.dropObject(ctx, obj, "the str is outside memory")
	}
	if copyASCII(buf, s) < len(s) {
		return false, in.dropObject(ctx, obj, "")
	}
	return true, in.take(ctx, name, obj)
}

// newStrObject makes an uninitialised str of n characters up to maxChar
// (PyUnicode_New).
func (in *Interpreter) newStrObject(ctx context.Context, n int, maxChar rune) (uint32, error) {
	res, err := in.call(ctx, in.fn("PyUnicode_New"), uint64(n), uint64(maxChar))
	if err != nil {
		return 0, err
	}
	if res[0] == 0 {
		_, _ = in.call(ctx, in.fns.errClear)
		return 0, &RequestError{Type: "MemoryError", Message: fmt.Sprintf("cannot allocate a str of %d characters", n)}
	}
	return uint32(res[0]), nil
}

// copyASCII copies s to dst (as long) while it is ASCII, sixteen bytes at
// a time, and returns how many bytes it copied: len(s) when s is ASCII.
func copyASCII(dst []byte, s string) int {
	const high = 0x8080808080808080
	src := unsafe.Slice(unsafe.StringData(s), len(s))
	dst = dst[:len(src)]
	i := 0
	for ; i+16 <= len(src); i += 16 {
		a := binary.LittleEndian.Uint64(src[i:])
		b := binary.LittleEndian.Uint64(src[i+8:])
		if (a|b)&high != 0 {
			break
		}
		binary.LittleEndian.PutUint64(dst[i:], a)
		binary.LittleEndian.PutUint64(dst[i+8:], b)
	}
	for ; i < len(src) && src[i] < utf8.RuneSelf; i++ {
		dst[i] = src[i]
	}
	return i
}

// take calls _rlm.take(name, value), which binds the global name (or the
// context, for ""), and releases the reference to value (stolen by the
// argument tuple).
func (in *Interpreter) take(ctx context.Context, name string, value uint32) error {
	nameObj, err := in.newStr(ctx, name)
	if err != nil {
		_ = in.dropObject(ctx, value, "")
		return err
	}
	res, err := in.call(ctx, in.fn("PyTuple_New"), 2)
	if err != nil {
		return err
	}
	args := uint32(res[0])
	if args == 0 {
		_, _ = in.call(ctx, in.fns.errClear)
		_ = in.dropObject(ctx, nameObj, "")
		_ = in.dropObject(ctx, value, "")
		return &RequestError{Type: "MemoryError", Message: "cannot allocate a tuple"}
	}
	setItem := in.fn("PyTuple_SetItem")
	if _, err := in.call(ctx, setItem, uint64(args), 0, uint64(nameObj)); err != nil {
		return err
	}
	if _, err := in.call(ctx, setItem, uint64(args), 1, uint64(value)); err != nil {
		return err
	}
	res, err = in.call(ctx, in.fn("PyObject_CallObject"), uint64(in.takeFn), uint64(args))
	if err != nil {
		return err
	}
	_ = in.dropObject(ctx, args, "")
	if res[0] == 0 {
		_, _ = in.call(ctx, in.fns.errClear)
		return &RequestError{Type: "MemoryError", Message: "the interpreter could not bind the value"}
	}
	return in.dropObject(ctx, uint32(res[0]), "")
}

// newStr makes a Python str of s (short: a name).
func (in *Interpreter) newStr(ctx context.Context, s string) (uint32, error) {
	p, err := in.cstring(ctx, s)
	if err != nil {
		return 0, err
	}
	defer in.call(ctx, in.fns.free, uint64(p))
	res, err := in.call(ctx, in.fn("PyUnicode_FromStringAndSize"), uint64(p), uint64(len(s)))
	if err != nil {
		return 0, err
	}
	if res[0] == 0 {
		_, _ = in.call(ctx, in.fns.errClear)
		return 0, &RequestError{Type: "MemoryError", Message: "cannot allocate a str"}
	}
	return uint32(res[0]), nil
}

// dropObject releases a reference; with a reason, it reports that as the
// error.
func (in *Interpreter) dropObject(ctx context.Context, obj uint32, reason string) error {
	if _, err := in.call(ctx, in.fns.decRef, uint64(obj)); err != nil {
		return err
	}
	if reason != "" {
		return fmt.Errorf("runtime: %s", reason)
	}
	return nil
}

// strLayoutOK checks, once per interpreter, that the str header sizes are
// this CPython's: it builds an ASCII and a Latin-1 str in place and reads
// them back through the C API.
func (in *Interpreter) strLayoutOK(ctx context.Context) bool {
	if in.strLayout != 0 {
		return in.strLayout > 0
	}
	in.strLayout = -1
	probe := func(maxChar rune, header uint32, ch byte) bool {
		res, err := in.call(ctx, in.fn("PyUnicode_New"), 1, uint64(maxChar))
		if err != nil || res[0] == 0 {
			return false
		}
		obj := uint32(res[0])
		defer in.dropObject(ctx, obj, "")
		if !in.main.Memory().WriteByte(obj+header, ch) {
			return false
		}
		res, err = in.call(ctx, in.fn("PyUnicode_ReadChar"), uint64(obj), 0)
		return err == nil && uint32(res[0]) == uint32(ch)
	}
	if probe(0x7f, asciiHeader, 'q') && probe(0xff, compactHeader, 0xe9) {
		in.strLayout = 1
	}
	return in.strLayout > 0
}

// fn is the guest's exported function name; boot checked that the
// direct path's exist (else takeFn is 0 and it is not taken).
func (in *Interpreter) fn(name string) api.Function {
	f, ok := in.cfns[name]
	if !ok {
		f = in.main.ExportedFunction(name)
		if in.cfns == nil {
			in.cfns = map[string]api.Function{}
		}
		in.cfns[name] = f
	}
	return f
}
