package jsonvalue

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// benchDocs is a JSON array of n documents, as an agent's context often is.
func benchDocs(n int) []byte {
	var b strings.Builder
	b.WriteString("[")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"id": %d, "title": "document %d", "score": %d.5, "text": "%s"}`, i, i, i, strings.Repeat("lorem ipsum dolor ", 20))
	}
	b.WriteString("]")
	return []byte(b.String())
}

// BenchmarkDecode compares Decode with encoding/json's decoding into any
// (map[string]any, no order), which it replaced.
func BenchmarkDecode(b *testing.B) {
	data := benchDocs(20000)
	b.Run("jsonvalue", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := Decode(data, 200); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			d := json.NewDecoder(bytes.NewReader(data))
			d.UseNumber()
			var v any
			if err := d.Decode(&v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
