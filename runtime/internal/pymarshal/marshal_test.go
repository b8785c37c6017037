package pymarshal

import (
	"encoding/hex"
	"errors"
	"math/big"
	"reflect"
	"testing"
)

// Bytes produced by CPython's marshal.dumps (version 4), to check decoding
// against the real format, references included.
func TestDecodeCPythonBytes(t *testing.T) {
	// ('ab', 'ab'): the second 'ab' is a reference to the first.
	b, _ := hex.DecodeString("a902da0261627201000000")
	v, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(v, []any{"ab", "ab"}) {
		t.Fatalf("refs: %#v", v)
	}
}

func TestRoundTrip(t *testing.T) {
	huge, _ := new(big.Int).SetString("123456789012345678901234567890123456789", 10)
	neg := new(big.Int).Neg(huge)
	cases := []struct {
		in, want any
	}{
		{nil, nil},
		{true, true},
		{int64(-5), int64(-5)},
		{int(1) << 40, int64(1) << 40},
		{uint64(1<<63 + 5), new(big.Int).SetUint64(1<<63 + 5)},
		{huge, huge},
		{neg, neg},
		{3.25, 3.25},
		{float32(1.5), 1.5},
		{complex(1, -2), complex(1, -2)},
		{"héllo", "héllo"},
		{[]byte{0, 1, 255}, []byte{0, 1, 255}},
		{[]string{"a", "b"}, []any{"a", "b"}},
		{Tuple{int64(1), "x"}, []any{int64(1), "x"}},
		{map[string]int{"a": 1}, map[string]any{"a": int64(1)}},
		{Dict{{Key: int64(1), Value: "one"}}, Dict{{Key: int64(1), Value: "one"}}},
		{Set{"x"}, Set{"x"}},
		{[]any{}, []any{}},
	}
	for _, c := range cases {
		b, err := Encode(c.in)
		if err != nil {
			t.Fatalf("Encode(%#v): %v", c.in, err)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("Decode(Encode(%#v)): %v", c.in, err)
		}
		if bw, ok := c.want.(*big.Int); ok {
			if bg, ok := got.(*big.Int); !ok || bg.Cmp(bw) != 0 {
				t.Errorf("%v: got %#v", c.in, got)
			}
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%#v: got %#v, want %#v", c.in, got, c.want)
		}
	}
}

func TestEncodeRejects(t *testing.T) {
	for _, v := range []any{make(chan int), func() {}, struct{ A int }{1}} {
		if _, err := Encode(v); err == nil {
			t.Errorf("Encode(%T) succeeded", v)
		}
	}
}

func TestDecodeMalformed(t *testing.T) {
	for _, h := range []string{"", "69", "7300000010", "5bffffff7f", "72ff000000", "58", "6c02000000"} {
		b, _ := hex.DecodeString(h)
		if _, err := Decode(b); !errors.Is(err, ErrFormat) {
			t.Errorf("Decode(%s) = %v, want ErrFormat", h, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, h := range []string{"4e", "a902da0261627201000000", "5b020000006901000000750100000061", "7b7501000000616901000000" + "30"} {
		b, _ := hex.DecodeString(h)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := Decode(b)
		if err != nil {
			return
		}
		if _, err := Encode(v); err != nil {
			t.Fatalf("decoded value does not encode: %#v: %v", v, err)
		}
	})
}

func mustBig(s string) *big.Int {
	v, _ := new(big.Int).SetString(s, 10)
	return v
}

// Bytes from CPython 3's marshal.dumps.
func TestDecodeCPythonValues(t *testing.T) {
	cases := []struct {
		hex  string
		want any
	}{
		{"4e", nil},
		{"54", true},
		{"e907000000", int64(7)},
		{"ecf9ffffff0000000000000000000000000004", mustBig("-1267650600228229401496703205376")},
		{"e700000000000004c0", -2.5},
		{"f50600000068c3a96c6c6f", "héllo"},
		{"f30200000000ff", []byte{0, 0xff}},
		{"db02000000e901000000da0161", []any{int64(1), "a"}},
		{"fbda016ba902e901000000e90200000030", map[string]any{"k": []any{int64(1), int64(2)}}},
		{"fbe901000000da017830", Dict{{Key: int64(1), Value: "x"}}},
		{"be00000000", Set{}},
		{"ec0500000000000000000000000400", int64(1) << 62},
	}
	for _, c := range cases {
		b, _ := hex.DecodeString(c.hex)
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("%s: %v", c.hex, err)
		}
		if bw, ok := c.want.(*big.Int); ok {
			if bg, ok := got.(*big.Int); !ok || bg.Cmp(bw) != 0 {
				t.Errorf("%s: got %#v", c.hex, got)
			}
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %#v, want %#v", c.hex, got, c.want)
		}
	}
}
