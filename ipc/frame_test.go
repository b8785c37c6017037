package ipc

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// frame returns a length prefix for n followed by body.
func frame(n uint32, body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, n), body...)
}

func TestFrameRoundTrip(t *testing.T) {
	bodies := [][]byte{
		{},
		[]byte("x"),
		bytes.Repeat([]byte("abc"), 100000), // larger than the bufio buffers
		bytes.Repeat([]byte("abcd"), readChunk/2), // larger than readChunk and the bufio buffers
		{0, 1, 2, 3},
	}
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for _, b := range bodies {
		if err := w.WriteFrame(b); err != nil {
			t.Fatal(err)
		}
	}
	r := NewReader(&buf)
	for i, want := range bodies {
		got, err := r.ReadFrame()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("frame %d: got %d bytes, want %d", i, len(got), len(want))
		}
	}
	if _, err := r.ReadFrame(); err != io.EOF {
		t.Fatalf("after last frame: got %v, want io.EOF", err)
	}
}

func TestFrameMaxSizeAccepted(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 2 x 64 MiB")
	}
	body := make([]byte, MaxFrameSize)
	var buf bytes.Buffer
	if err := NewWriter(&buf).WriteFrame(body); err != nil {
		t.Fatal(err)
	}
	got, err := NewReader(&buf).ReadFrame()
	if err != nil || len(got) != MaxFrameSize {
		t.Fatalf("got %d bytes, %v", len(got), err)
	}
}

func TestReadFrameErrors(t *testing.T) {
	tests := []struct {
		name  string
		input []byte
		want  error
	}{
		{"empty stream", nil, io.EOF},
		{"1 header byte", []byte{0}, io.ErrUnexpectedEOF},
		{"3 header bytes", []byte{0, 0, 1}, io.ErrUnexpectedEOF},
		{"no body", frame(5, nil), io.ErrUnexpectedEOF},
		{"short body", frame(5, []byte("abc")), io.ErrUnexpectedEOF},
		{"long body cut", frame(200000, make([]byte, 150000)), io.ErrUnexpectedEOF},
		{"oversized", frame(MaxFrameSize+1, []byte("abc")), ErrFrameTooLarge},
		{"max uint32", frame(^uint32(0), nil), ErrFrameTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(bytes.NewReader(tt.input))
			_, err := r.ReadFrame()
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if tt.want == io.EOF && err != io.EOF {
				t.Fatalf("clean EOF must be returned unwrapped, got %#v", err)
			}
			if _, again := r.ReadFrame(); again != err {
				t.Fatalf("error not sticky: first %v, then %v", err, again)
			}
		})
	}
}

// TestReadFrameHostileLength checks that a length prefix just under the
// cap, followed by only a few bytes, does not make the reader allocate
// anything near the announced size.
func TestReadFrameHostileLength(t *testing.T) {
	input := frame(60<<20, []byte{1, 2, 3})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := NewReader(bytes.NewReader(input)).ReadFrame()
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("got %v, want io.ErrUnexpectedEOF", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Fatalf("allocated %d bytes for a 7-byte input", n)
	}
}

func TestReadFrameOtherError(t *testing.T) {
	boom := errors.New("boom")
	r := NewReader(io.MultiReader(bytes.NewReader(frame(10, []byte("abc"))), errReader{boom}))
	if _, err := r.ReadFrame(); !errors.Is(err, boom) {
		t.Fatalf("got %v, want %v", err, boom)
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func TestNewReaderReusesBufio(t *testing.T) {
	br := bufio.NewReader(strings.NewReader(""))
	if NewReader(br).r != br {
		t.Fatal("NewReader wrapped a *bufio.Reader again")
	}
	bw := bufio.NewWriter(io.Discard)
	if NewWriter(bw).w != bw {
		t.Fatal("NewWriter wrapped a *bufio.Writer again")
	}
}

func TestWriteFrameTooLarge(t *testing.T) {
	var buf bytes.Buffer
	err := NewWriter(&buf).WriteFrame(make([]byte, MaxFrameSize+1))
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("got %v, want ErrFrameTooLarge", err)
	}
	if buf.Len() != 0 {
		t.Fatalf("wrote %d bytes of a refused frame", buf.Len())
	}
}

type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.n <= 0 {
		return 0, errors.New("pipe closed")
	}
	w.n--
	return len(p), nil
}

func TestWriteFrameStickyError(t *testing.T) {
	w := NewWriter(&failWriter{})
	if err := w.WriteFrame([]byte("a")); err == nil {
		t.Fatal("write to a failing writer succeeded")
	}
	if err := w.WriteFrame([]byte("b")); err == nil {
		t.Fatal("write after a failure succeeded")
	}
}

// TestWriterConcurrent writes from many goroutines and checks every frame
// arrives intact (run with -race).
func TestWriterConcurrent(t *testing.T) {
	pr, pw := io.Pipe()
	w := NewWriter(pw)
	const writers, each = 8, 50
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				body := bytes.Repeat([]byte{byte(g)}, 1000+i*97)
				if err := w.WriteFrame(body); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); pw.Close() }()
	r := NewReader(pr)
	count := 0
	for {
		b, err := r.ReadFrame()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range b {
			if c != b[0] {
				t.Fatalf("frame %d interleaved", count)
			}
		}
		count++
	}
	if count != writers*each {
		t.Fatalf("got %d frames, want %d", count, writers*each)
	}
}

func TestReadMessageDecodeErrorNotSticky(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	if err := w.WriteFrame([]byte{0x93, 0xcc, 200, 7, 0x80}); err != nil { // kind 200
		t.Fatal(err)
	}
	if err := w.WriteMessage(KindPing, 8, nil); err != nil {
		t.Fatal(err)
	}
	r := NewReader(&buf)
	m, err := r.ReadMessage()
	if !errors.Is(err, ErrUnknownKind) || m.ID != 7 {
		t.Fatalf("got %+v, %v; want ErrUnknownKind for id 7", m, err)
	}
	m, err = r.ReadMessage()
	if err != nil || m.Kind != KindPing || m.ID != 8 {
		t.Fatalf("got %+v, %v; want ping 8", m, err)
	}
	if _, err := r.ReadMessage(); err != io.EOF {
		t.Fatalf("got %v, want io.EOF", err)
	}
}

// countWriter counts the Write calls it gets.
type countWriter struct {
	bytes.Buffer
	calls int
}

func (w *countWriter) Write(p []byte) (int, error) {
	w.calls++
	return w.Buffer.Write(p)
}

func TestQueueMessageAndFlush(t *testing.T) {
	var cw countWriter
	w := NewWriter(&cw)
	for i := range 3 {
		if err := w.QueueMessage(KindOutput, 5, Output{Stream: StreamStdout, Data: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.QueueMessage(KindOutput, 5, Output{Stream: "bad"}); err == nil {
		t.Fatal("queued an invalid body")
	}
	if cw.calls != 0 || w.Queued() == 0 {
		t.Fatalf("queued frames were written (%d calls) or not kept (%d bytes)", cw.calls, w.Queued())
	}
	if err := w.WriteMessage(KindResult, 5, Result{}); err != nil {
		t.Fatal(err)
	}
	if cw.calls != 1 || w.Queued() != 0 {
		t.Fatalf("%d writes for 4 frames, %d bytes left", cw.calls, w.Queued())
	}
	if err := w.Flush(); err != nil || cw.calls != 1 {
		t.Fatalf("flush of nothing: %v, %d writes", err, cw.calls)
	}
	r := NewReader(&cw.Buffer)
	for i := range 3 {
		m, err := r.ReadMessage()
		if err != nil || m.Body != (Output{Stream: StreamStdout, Data: fmt.Sprint(i)}) {
			t.Fatalf("frame %d: %+v %v", i, m, err)
		}
	}
	if m, err := r.ReadMessage(); err != nil || m.Kind != KindResult {
		t.Fatalf("last frame: %+v %v", m, err)
	}
}

// gateWriter blocks its first Write until released.
type gateWriter struct {
	countWriter
	entered, release chan struct{}
}

func (w *gateWriter) Write(p []byte) (int, error) {
	if w.calls == 0 {
		close(w.entered)
		<-w.release
	}
	return w.countWriter.Write(p)
}

// A frame written while another goroutine is writing goes out with that
// goroutine's next write, without waiting for it.
func TestWriterGroupCommit(t *testing.T) {
	gw := &gateWriter{entered: make(chan struct{}), release: make(chan struct{})}
	w := NewWriter(gw)
	done := make(chan error)
	go func() { done <- w.WriteMessage(KindPing, 1, nil) }()
	<-gw.entered
	for id := uint64(2); id <= 4; id++ {
		if err := w.WriteMessage(KindPing, id, nil); err != nil {
			t.Fatal(err)
		}
	}
	close(gw.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if gw.calls != 2 {
		t.Fatalf("%d writes, want 2 (the first frame, then the three queued behind it)", gw.calls)
	}
	r := NewReader(&gw.Buffer)
	for id := uint64(1); id <= 4; id++ {
		if m, err := r.ReadMessage(); err != nil || m.ID != id {
			t.Fatalf("frame %d: %+v %v", id, m, err)
		}
	}
}

func TestAppendFrame(t *testing.T) {
	prefix := []byte("xyz")
	b, err := AppendFrame(prefix, KindExecute, 9, Execute{Code: "pass"})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := Encode(KindExecute, 9, Execute{Code: "pass"})
	if string(b[:3]) != "xyz" || binary.BigEndian.Uint32(b[3:]) != uint32(len(body)) || !bytes.Equal(b[7:], body) {
		t.Fatalf("got % x", b)
	}
	if b, err := AppendFrame(prefix, KindExecute, 9, Output{}); err == nil || string(b) != "xyz" {
		t.Fatalf("a failed append gave %q, %v", b, err)
	}
}

// A read that times out keeps the part of the frame read so far.
func TestReadFrameResumesAfterTimeout(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	r := NewReader(pr)
	msg := frame(6, []byte("abcdef"))
	for _, cut := range []int{0, 2, 7} { // nothing, part of the header, part of the body
		if _, err := pw.Write(msg[:cut]); err != nil {
			t.Fatal(err)
		}
		pr.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		if _, err := r.ReadFrame(); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("cut %d: got %v, want a timeout", cut, err)
		}
		pr.SetReadDeadline(time.Time{})
		if _, err := pw.Write(msg[cut:]); err != nil {
			t.Fatal(err)
		}
		if b, err := r.ReadFrame(); err != nil || string(b) != "abcdef" {
			t.Fatalf("cut %d: got %q, %v", cut, b, err)
		}
	}
}
