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

// bridgeBodies are the frames of one call of an llm_query_batched batch:
// the BridgeCall a supervisor reads and the BridgeReply its worker reads.
var bridgeBodies = []struct {
	name string
	kind Kind
	body any
}{
	{"call", KindBridgeCall, BridgeCall{Method: "llm_query", Args: []any{"Summarize line 1234: " + strings.Repeat("word ", 12)}, Batch: true}},
	{"reply", KindBridgeReply, BridgeReply{Result: "It mentions a needle (77 characters)."}},
}

// BenchmarkDecodeBridge decodes bridgeBodies, as Reader.ReadMessage does.
func BenchmarkDecodeBridge(b *testing.B) {
	for _, c := range bridgeBodies {
		b.Run(c.name, func(b *testing.B) {
			frame, err := Encode(c.kind, 42, c.body)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := decode(frame, true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncodeBridge encodes bridgeBodies, as Writer.WriteMessage does.
func BenchmarkEncodeBridge(b *testing.B) {
	for _, c := range bridgeBodies {
		b.Run(c.name, func(b *testing.B) {
			var buf []byte
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if buf, err = AppendFrame(buf[:0], c.kind, 42, c.body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
