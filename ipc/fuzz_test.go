package ipc

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"testing"
)

// allocBudget is a generous bound on what decoding n input bytes may
// allocate. Decoded Go values are larger than their msgpack form (an
// element of one byte becomes a 16-byte interface), but nothing may be
// sized by an untrusted length.
func allocBudget(n int) uint64 { return 8<<20 + 256*uint64(n) }

// allocated runs f and returns how many bytes it allocated.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func FuzzDecodeFrame(f *testing.F) {
	f.Add([]byte{})
	f.Add(frame(0, nil))
	f.Add(frame(3, []byte("abc")))
	f.Add(append(frame(1, []byte("a")), frame(2, []byte("bc"))...))
	f.Add(frame(60<<20, []byte{1, 2, 3}))
	f.Add(frame(MaxFrameSize+1, nil))
	f.Add([]byte{0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		var frames int
		var err error
		n := allocated(func() {
			r := NewReader(bytes.NewReader(data))
			for {
				var b []byte
				if b, err = r.ReadFrame(); err != nil {
					break
				}
				if len(b) > MaxFrameSize {
					t.Fatalf("frame of %d bytes", len(b))
				}
				frames++
			}
		})
		if err != io.EOF && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("unexpected error %v", err)
		}
		if n > allocBudget(len(data)) {
			t.Fatalf("allocated %d bytes reading %d", n, len(data))
		}
	})
}

func FuzzDecodeMessage(f *testing.F) {
	for kind, body := range sampleBodies {
		b, err := Encode(kind, uint64(kind)*1000, body)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x93, 0xa7, 'e', 'x', 'e', 'c', 'u', 't', 'e', 1, 0x80}) // kind as string
	f.Add([]byte{0x93, 99, 1, 0x80})                                      // unknown kind
	f.Add([]byte{0x93, 10, 7, 0x81, 0xa5, 'v', 'a', 'l', 'u', 'e', 0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0xc1})
	f.Fuzz(func(t *testing.T, data []byte) {
		var m Message
		var err error
		n := allocated(func() { m, err = Decode(data) })
		if n > allocBudget(len(data)) {
			t.Fatalf("allocated %d bytes decoding %d", n, len(data))
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnknownKind) {
				t.Fatalf("error %v is neither ErrMalformed nor ErrUnknownKind", err)
			}
			if m.Body != nil {
				t.Fatalf("failed decode returned a body")
			}
			return
		}
		// Whatever decodes re-encodes, and re-encoding is a fixed point.
		b1, err := Encode(m.Kind, m.ID, m.Body)
		if err != nil {
			t.Fatalf("re-encode %+v: %v", m, err)
		}
		m2, err := Decode(b1)
		if err != nil {
			t.Fatalf("decode re-encoded %+v: %v", m, err)
		}
		b2, err := Encode(m2.Kind, m2.ID, m2.Body)
		if err != nil || !bytes.Equal(b1, b2) {
			t.Fatalf("encoding not stable (%v):\n% x\n% x", err, b1, b2)
		}
	})
}

func FuzzDecodeValue(f *testing.F) {
	for _, v := range []any{
		nil, true, int64(-1), uint64(1 << 63), bigInt("-123456789012345678901234567890"), 1.5, "s", []byte{1},
		[]any{int64(1), []any{}}, map[string]any{"a": Set{int64(1)}},
		Dict{{Key: []any{int64(1)}, Value: "t"}, {Key: nil, Value: Dict{{Key: 1.5, Value: nil}}}},
	} {
		b, err := EncodeValue(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(append(bytes.Repeat([]byte{0x91}, 300), 0x01))
	f.Add([]byte{0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0xc7, 9, 1, 1, 0x80, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0xd6, 0xff, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		var err error
		n := allocated(func() { v, err = DecodeValue(data) })
		if n > allocBudget(len(data)) {
			t.Fatalf("allocated %d bytes decoding %d", n, len(data))
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		b1, err := EncodeValue(v)
		if err != nil {
			t.Fatalf("re-encode %#v: %v", v, err)
		}
		v2, err := DecodeValue(b1)
		if err != nil {
			t.Fatalf("decode re-encoded %#v: %v", v, err)
		}
		b2, err := EncodeValue(v2)
		if err != nil || !bytes.Equal(b1, b2) {
			t.Fatalf("encoding not stable (%v):\n% x\n% x", err, b1, b2)
		}
	})
}
