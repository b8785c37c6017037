package ipc

import (
	"bytes"
	"strings"
	"testing"
)

// BenchmarkReadOutput reads Output frames of 64 KiB, as a supervisor reads
// a print loop's output.
func BenchmarkReadOutput(b *testing.B) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	data := strings.Repeat(strings.Repeat("x", 1023)+"\n", 64)
	for range 64 {
		if err := w.WriteMessage(KindOutput, 7, Output{Stream: StreamStdout, Data: data}); err != nil {
			b.Fatal(err)
		}
	}
	frames := buf.Bytes()
	b.SetBytes(int64(len(frames)))
	b.ReportAllocs()
	for b.Loop() {
		r := NewReader(bytes.NewReader(frames))
		for range 64 {
			if _, err := r.ReadMessage(); err != nil {
				b.Fatal(err)
			}
		}
	}
}
