package ipc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/big"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// roundTrip encodes v, decodes the result, and checks re-encoding the
// decoded value gives the same bytes.
func roundTrip(t *testing.T, v any) any {
	t.Helper()
	b, err := EncodeValue(v)
	if err != nil {
		t.Fatalf("encode %#v: %v", v, err)
	}
	got, err := DecodeValue(b)
	if err != nil {
		t.Fatalf("decode %#v: %v", v, err)
	}
	b2, err := EncodeValue(got)
	if err != nil {
		t.Fatalf("re-encode %#v: %v", got, err)
	}
	if !bytes.Equal(b, b2) {
		t.Fatalf("re-encoding %#v changed the bytes:\n% x\n% x", v, b, b2)
	}
	return got
}

func TestValueRoundTripCanonical(t *testing.T) {
	// Values already in canonical form come back unchanged.
	values := []any{
		nil,
		true,
		false,
		int64(0),
		int64(-1),
		int64(127),
		int64(-33),
		int64(math.MaxInt64),
		int64(math.MinInt64),
		bigInt("9223372036854775808"),  // MaxInt64+1: native uint64 on the wire
		bigInt("18446744073709551615"), // MaxUint64
		bigInt("18446744073709551616"), // MaxUint64+1: ExtBigInt
		bigInt("-9223372036854775809"), // MinInt64-1: ExtBigInt
		bigInt("123456789012345678901234567890123456789012345678901234567890"),
		0.0,
		-1.5,
		math.MaxFloat64,
		math.Inf(-1),
		math.SmallestNonzeroFloat64,
		complex(1.5, -2),
		complex(0, math.Inf(1)),
		"",
		"héllo \x00 wörld",
		string(bytes.Repeat([]byte("s"), 70000)),
		[]byte{},
		[]byte{0, 1, 0xff},
		[]any{},
		[]any{int64(1), "two", []any{3.0, nil}},
		map[string]any{},
		map[string]any{"a": int64(1), "b": []any{map[string]any{"c": nil}}},
		Set{},
		Set{int64(1), "x", []any{int64(1), int64(2)}, Set{int64(3)}},
		Tuple{},
		Tuple{int64(1), Tuple{"nested"}, []any{nil}},
		Dict{{Key: Tuple{int64(1), int64(2)}, Value: "pair"}},
		Dict{{Key: int64(1), Value: "one"}, {Key: "two", Value: int64(2)}},
		Dict{{Key: nil, Value: true}, {Key: []any{"tuple", int64(1)}, Value: Set{}}, {Key: 2.5, Value: nil},
			{Key: bigInt("-99999999999999999999999"), Value: []byte("x")}, {Key: Set{"frozen"}, Value: int64(0)}},
	}
	for _, v := range values {
		got := roundTrip(t, v)
		if !reflect.DeepEqual(got, v) {
			t.Errorf("round trip changed the value:\n got %#v\nwant %#v", got, v)
		}
	}
}

func TestValueNaN(t *testing.T) {
	got := roundTrip(t, math.NaN())
	if f, ok := got.(float64); !ok || !math.IsNaN(f) {
		t.Fatalf("got %#v, want NaN", got)
	}
}

func TestValueNormalization(t *testing.T) {
	type myString string
	type myInts []int
	tests := []struct {
		name string
		in   any
		want any
	}{
		{"int", 42, int64(42)},
		{"int8", int8(-8), int64(-8)},
		{"int16", int16(-300), int64(-300)},
		{"int32", int32(1 << 30), int64(1 << 30)},
		{"uint", uint(7), int64(7)},
		{"uint8", uint8(255), int64(255)},
		{"uint16", uint16(65535), int64(65535)},
		{"uint32", uint32(math.MaxUint32), int64(math.MaxUint32)},
		{"uint64 small", uint64(5), int64(5)},
		{"uint64 large", uint64(math.MaxUint64), bigInt("18446744073709551615")},
		{"small big.Int", big.NewInt(-5), int64(-5)},
		{"nil big.Int", (*big.Int)(nil), nil},
		{"float32", float32(0.5), 0.5},
		{"nil []byte", []byte(nil), []byte{}},
		{"nil []any", []any(nil), []any{}},
		{"nil map", map[string]any(nil), map[string]any{}},
		{"empty Dict", Dict{}, map[string]any{}},
		{"string-keyed Dict", Dict{{Key: "b", Value: 1}, {Key: "a", Value: 2}}, Dict{{Key: "b", Value: int64(1)}, {Key: "a", Value: int64(2)}}},
		{"sorted string-keyed Dict", Dict{{Key: "a", Value: 1}, {Key: "b", Value: 2}}, map[string]any{"a": int64(1), "b": int64(2)}},
		{"map[any]any strings", map[any]any{"a": 1}, map[string]any{"a": int64(1)}},
		{"map[any]any mixed", map[any]any{"a": 1, 2: "b"}, Dict{{Key: int64(2), Value: "b"}, {Key: "a", Value: int64(1)}}},
		{"named string", myString("x"), "x"},
		{"typed slice", myInts{1, 2}, []any{int64(1), int64(2)}},
		{"[]string", []string{"a", "b"}, []any{"a", "b"}},
		{"array", [2]bool{true, false}, []any{true, false}},
		{"byte array", [3]byte{1, 2, 3}, []byte{1, 2, 3}},
		{"map[string]int", map[string]int{"x": 1}, map[string]any{"x": int64(1)}},
		{"map[int]string", map[int]string{2: "b", 1: "a"}, Dict{{Key: int64(1), Value: "a"}, {Key: int64(2), Value: "b"}}},
		{"pointer", func() any { s := "p"; return &s }(), "p"},
		{"nil pointer", (*string)(nil), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := roundTrip(t, tt.in)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestValueDeterministicMaps(t *testing.T) {
	m := map[string]any{}
	mixed := map[any]any{}
	for i := range 100 {
		m[string(rune('a'+i%26))+string(rune('A'+i/26))] = i
		mixed[i] = i
		mixed[string(rune('a'+i%26))] = i
	}
	first, err := EncodeValue([]any{m, mixed})
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		again, err := EncodeValue([]any{m, mixed})
		if err != nil || !bytes.Equal(first, again) {
			t.Fatalf("map encoding not deterministic (%v)", err)
		}
	}
}

func TestValueWireForm(t *testing.T) {
	tests := []struct {
		name string
		v    any
		want []byte
	}{
		{"nil", nil, []byte{0xc0}},
		{"fixint", int64(5), []byte{0x05}},
		{"negative fixint", int64(-1), []byte{0xff}},
		{"uint64", uint64(math.MaxUint64), []byte{0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{"float", 1.0, []byte{0xcb, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0}},
		{"bytes", []byte("a"), []byte{0xc4, 1, 'a'}},
		{"big positive", bigInt("18446744073709551616"), []byte{0xc7, 10, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"big negative", bigInt("-18446744073709551616"), []byte{0xc7, 10, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"empty set", Set{}, []byte{0xd4, 2, 0x90}},
		{"set", Set{int64(1), int64(2)}, []byte{0xc7, 3, 2, 0x92, 1, 2}},
		{"dict", Dict{{Key: int64(1), Value: "a"}}, []byte{0x81, 1, 0xa1, 'a'}},
		{"sorted map", map[string]any{"b": nil, "a": nil}, []byte{0x82, 0xa1, 'a', 0xc0, 0xa1, 'b', 0xc0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := EncodeValue(tt.v)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tt.want) {
				t.Fatalf("got % x\nwant % x", got, tt.want)
			}
		})
	}
}

// TestValueInterop checks plain values against the reference msgpack
// library in both directions.
func TestValueInterop(t *testing.T) {
	v := map[string]any{"n": int64(-70000), "s": "x", "l": []any{true, nil, 2.5, []byte{1}}}
	b, err := EncodeValue(v)
	if err != nil {
		t.Fatal(err)
	}
	var ref map[string]any
	if err := msgpack.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	if ref["n"] != int32(-70000) || ref["s"] != "x" {
		t.Fatalf("reference decoder saw %#v", ref)
	}
	got, err := DecodeValue(mp(t, map[string]any{"n": int16(-300), "f": float32(0.25), "u": uint64(math.MaxUint64)}))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"n": int64(-300), "f": 0.25, "u": bigInt("18446744073709551615")}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v, want %#v", got, want)
	}
}

func nested(depth int) any {
	var v any = int64(1)
	for range depth {
		v = []any{v}
	}
	return v
}

func TestValueDepth(t *testing.T) {
	if _, err := EncodeValue(nested(MaxDepth)); err != nil {
		t.Fatalf("depth %d: %v", MaxDepth, err)
	}
	_, err := EncodeValue(nested(MaxDepth + 1))
	if !errors.Is(err, ErrTooDeep) || !errors.Is(err, ErrUnsupportedValue) {
		t.Fatalf("encode too deep: got %v", err)
	}

	cyclic := []any{nil}
	cyclic[0] = cyclic
	if _, err := EncodeValue(cyclic); !errors.Is(err, ErrTooDeep) {
		t.Fatalf("cyclic: got %v", err)
	}

	ok := append(bytes.Repeat([]byte{0x91}, MaxDepth), 0x01)
	if _, err := DecodeValue(ok); err != nil {
		t.Fatalf("decode depth %d: %v", MaxDepth, err)
	}
	// A hostile input nesting a million arrays must fail, not overflow
	// the stack.
	deep := append(bytes.Repeat([]byte{0x91}, 1<<20), 0x01)
	_, err = DecodeValue(deep)
	if !errors.Is(err, ErrTooDeep) || !errors.Is(err, ErrMalformed) {
		t.Fatalf("decode too deep: got %v", err)
	}
	// The same through set payloads, which are decoded separately.
	if _, err := DecodeValue(nestedSets(MaxDepth)); err != nil {
		t.Fatalf("decode sets depth %d: %v", MaxDepth, err)
	}
	if _, err := DecodeValue(nestedSets(MaxDepth + 1)); !errors.Is(err, ErrTooDeep) {
		t.Fatalf("decode sets too deep: got %v", err)
	}
}

// nestedSets returns the encoding of {{{...{None}...}}}, depth sets deep.
func nestedSets(depth int) []byte {
	b := []byte{0xc0}
	for range depth {
		payload := append([]byte{0x91}, b...)
		b = append(binary.BigEndian.AppendUint32([]byte{0xc9}, uint32(len(payload))), byte(ExtSet))
		b = append(b, payload...)
	}
	return b
}

func TestEncodeValueErrors(t *testing.T) {
	tests := []struct {
		name string
		v    any
		want error
	}{
		{"struct", struct{ A int }{1}, ErrUnsupportedValue},
		{"func", func() {}, ErrUnsupportedValue},
		{"nested chan", []any{1, map[string]any{"c": make(chan int)}}, ErrUnsupportedValue},
		{"unsupported key", map[any]any{struct{}{}: 1}, ErrUnsupportedValue},
		{"colliding keys", map[any]any{1: "a", int64(1): "b"}, ErrUnsupportedValue},
		{"duplicate Dict key", Dict{{Key: "a", Value: 1}, {Key: "a", Value: 2}}, ErrUnsupportedValue},
		{"huge string", string(make([]byte, MaxFrameSize+1)), ErrFrameTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := EncodeValue(tt.v); !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestDecodeValueErrors(t *testing.T) {
	tests := []struct {
		name  string
		input []byte
	}{
		{"empty", nil},
		{"reserved code", []byte{0xc1}},
		{"trailing bytes", []byte{0x01, 0x02}},
		{"truncated int", []byte{0xcd, 0x01}},
		{"truncated float", []byte{0xcb, 0, 0}},
		{"truncated string", []byte{0xa5, 'a', 'b'}},
		{"truncated array", []byte{0x92, 0x01}},
		{"hostile array32", []byte{0xdd, 0xff, 0xff, 0xff, 0xff, 0x01}},
		{"hostile map32", []byte{0xdf, 0xff, 0xff, 0xff, 0xff, 0x01, 0x01}},
		{"hostile str32", []byte{0xdb, 0xff, 0xff, 0xff, 0xff, 'a'}},
		{"hostile bin32", []byte{0xc6, 0xff, 0xff, 0xff, 0xff, 'a'}},
		{"hostile ext32", []byte{0xc9, 0xff, 0xff, 0xff, 0xff, 1, 'a'}},
		{"duplicate key", []byte{0x82, 0xa1, 'a', 0x01, 0xa1, 'a', 0x02}},
		{"unknown ext", []byte{0xd4, 9, 0x00}},
		{"timestamp ext", []byte{0xd6, 0xff, 0, 0, 0, 0}},
		{"big int empty", []byte{0xd4, 1, 0x00}},
		{"big int bad sign", []byte{0xc7, 10, 1, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"big int leading zero", []byte{0xc7, 11, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"big int fits int64", []byte{0xd5, 1, 0, 5}},
		{"big int fits uint64", []byte{0xc7, 9, 1, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{"big int negative zero", []byte{0xd5, 1, 1, 0}},
		{"big int MinInt64", []byte{0xc7, 9, 1, 1, 0x80, 0, 0, 0, 0, 0, 0, 0}},
		{"set not array", []byte{0xd4, 2, 0xc0}},
		{"set trailing", []byte{0xd5, 2, 0x90, 0xc0}},
		{"set truncated", []byte{0xd4, 2, 0x91}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := DecodeValue(tt.input)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("got %#v, %v; want ErrMalformed", v, err)
			}
		})
	}
}

func TestBigIntBoundaries(t *testing.T) {
	// MinInt64 is native; MinInt64-1 is the smallest negative ExtBigInt.
	got := roundTrip(t, bigInt("-9223372036854775808"))
	if got != int64(math.MinInt64) {
		t.Fatalf("got %#v", got)
	}
	b, err := EncodeValue(bigInt("-9223372036854775809"))
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{0xc7, 9, 1, 1, 0x80, 0, 0, 0, 0, 0, 0, 1}
	if !bytes.Equal(b, want) {
		t.Fatalf("got % x, want % x", b, want)
	}
}
