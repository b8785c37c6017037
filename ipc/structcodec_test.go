package ipc

import (
	"errors"
	"math"
	"reflect"
	"testing"
)

// sized has a field of every kind the codec supports, at every integer
// width, so that the decoder's writes through field offsets are checked
// for each (the protocol's bodies use 64-bit integers only).
type sized struct {
	S   string         `msgpack:"s"`
	N   label          `msgpack:"n"`
	B   bool           `msgpack:"b"`
	I8  int8           `msgpack:"i8"`
	I16 int16          `msgpack:"i16"`
	I32 int32          `msgpack:"i32"`
	I64 int64          `msgpack:"i64"`
	I   int            `msgpack:"i"`
	U8  uint8          `msgpack:"u8"`
	U16 uint16         `msgpack:"u16"`
	U32 uint32         `msgpack:"u32"`
	U64 uint64         `msgpack:"u64"`
	U   uint           `msgpack:"u"`
	V   any            `msgpack:"v"`
	L   []any          `msgpack:"l"`
	M   map[string]any `msgpack:"m"`
	End bool           `msgpack:"end"` // after the others, to catch a write past one
}

type label string

func decodeSized(t *testing.T, c *structCodec, body []byte) (sized, error) {
	t.Helper()
	got, r, err := decodeBody[sized](c, reader{buf: body})
	if err != nil {
		return sized{}, err
	}
	if r.remaining() != 0 {
		t.Fatalf("%d bytes left after the body", r.remaining())
	}
	return got.(sized), nil
}

func TestStructCodecFieldWidths(t *testing.T) {
	c, err := newStructCodec(reflect.TypeFor[sized](), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []sized{
		{},
		{
			S: "text", N: "name", B: true,
			I8: math.MinInt8, I16: math.MinInt16, I32: math.MinInt32, I64: math.MinInt64, I: -1,
			U8: math.MaxUint8, U16: math.MaxUint16, U32: math.MaxUint32, U64: math.MaxUint64, U: 1,
			V: 1.5, L: []any{"a", int64(2)}, M: map[string]any{"k": "v"}, End: true,
		},
		{I8: math.MaxInt8, I16: math.MaxInt16, I32: math.MaxInt32, I64: math.MaxInt64, End: true},
	} {
		w := writer{}
		if err := c.encode(&w, reflect.ValueOf(want)); err != nil {
			t.Fatal(err)
		}
		got, err := decodeSized(t, c, w.b)
		if err != nil {
			t.Fatalf("decode %+v: %v", want, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
		}
	}

	for _, tc := range []struct {
		field string
		value any
	}{
		{"i8", math.MaxInt8 + 1},
		{"i8", math.MinInt8 - 1},
		{"i16", math.MaxInt16 + 1},
		{"i32", math.MinInt32 - 1},
		{"u8", math.MaxUint8 + 1},
		{"u16", math.MaxUint16 + 1},
		{"u32", math.MaxUint32 + 1},
		{"u64", -1},
		{"i64", uint64(math.MaxInt64) + 1},
		{"l", "not a list"},
		{"m", []any{"not", "a map"}},
		{"s", nil},
	} {
		_, err := decodeSized(t, c, mp(t, map[string]any{tc.field: tc.value}))
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s = %v: err = %v, want ErrMalformed", tc.field, tc.value, err)
		}
	}
}
