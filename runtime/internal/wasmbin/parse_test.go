package wasmbin

import (
	"errors"
	"testing"
)

func TestBuilderParseRoundTrip(t *testing.T) {
	var b Builder
	typ := b.Type([]byte{I32}, []byte{I32})
	b.ImportFunc("env", "f", typ)
	b.ImportMemory("env", "memory")
	b.ImportTable("env", "table")
	g := b.GlobalI32(true, -5)
	b.Export("g", KindGlobal, g)
	m, err := Parse(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	want := []Import{{Module: "env", Name: "f", Kind: KindFunc}, {Module: "env", Name: "memory", Kind: KindMemory}, {Module: "env", Name: "table", Kind: KindTable}}
	if len(m.Imports) != len(want) {
		t.Fatalf("imports %+v", m.Imports)
	}
	for i := range want {
		if m.Imports[i] != want[i] {
			t.Errorf("import %d = %+v, want %+v", i, m.Imports[i], want[i])
		}
	}
}

func TestParseRejectsGarbage(t *testing.T) {
	for _, b := range [][]byte{nil, []byte("\x00asm"), []byte("\x00asm\x01\x00\x00\x00\x02\xff\xff\xff\xff\x0f")} {
		if _, err := Parse(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("Parse(%q) = %v", b, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	var b Builder
	b.ImportFunc("a", "b", b.Type(nil, nil))
	f.Add(b.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) { _, _ = Parse(data) })
}
