package ipc

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// MaxFrameSize is the largest frame body, in bytes, that a Reader accepts
// and a Writer or Encode produces. The 4-byte length prefix is not counted.
const MaxFrameSize = 64 << 20

// headerSize is the size of the big-endian length prefix of a frame.
const headerSize = 4

// readChunk is how many bytes of a frame body a Reader allocates before it
// has seen any of them. Beyond that the buffer only grows (by doubling) as
// bytes actually arrive, so a hostile length prefix costs at most this
// much plus twice what the peer really sent.
const readChunk = 64 << 10

func frameTooLarge[N int | uint32](n N) error {
	return fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, n, MaxFrameSize)
}

// Reader reads length-prefixed frames. It is not safe for concurrent use:
// one goroutine should own each stream's Reader.
type Reader struct {
	r   *bufio.Reader
	err error // sticky: once framing fails the stream is out of sync
}

// NewReader returns a Reader that reads frames from r through a
// bufio.Reader (r itself if it already is one).
func NewReader(r io.Reader) *Reader {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReader(r)
	}
	return &Reader{r: br}
}

// ReadFrame reads the next frame and returns its body in a new slice the
// caller owns.
//
// It returns io.EOF, unwrapped, when the stream ends cleanly between
// frames; an error wrapping io.ErrUnexpectedEOF when it ends inside a
// frame; and an error wrapping ErrFrameTooLarge, without reading or
// allocating the body, when the length prefix exceeds MaxFrameSize. Any
// error is final: later calls return it again.
func (r *Reader) ReadFrame() ([]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	body, err := r.readFrame()
	if err != nil {
		r.err = err
		return nil, err
	}
	return body, nil
}

func (r *Reader) readFrame() ([]byte, error) {
	var hdr [headerSize]byte
	if _, err := io.ReadFull(r.r, hdr[:]); err != nil {
		if err == io.EOF {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("ipc: read frame header: %w", err)
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > MaxFrameSize {
		return nil, fmt.Errorf("ipc: read frame: %w", frameTooLarge(n))
	}
	size := int(n)
	body := make([]byte, 0, min(size, readChunk))
	for len(body) < size {
		if len(body) == cap(body) {
			grown := make([]byte, len(body), min(size, 2*cap(body)))
			copy(grown, body)
			body = grown
		}
		m, err := io.ReadFull(r.r, body[len(body):cap(body)])
		body = body[:len(body)+m]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("ipc: read frame body (%d of %d bytes): %w", len(body), size, err)
		}
	}
	return body, nil
}

// ReadMessage reads the next frame and decodes it with Decode. Framing
// errors are those of ReadFrame and are final. Decoding errors
// (ErrMalformed, ErrUnknownKind) are not: the frame was consumed whole, the
// stream is still in sync, and the returned Message carries the Kind and ID
// when the envelope could be read, so the receiver can answer with an
// Error reply and carry on.
func (r *Reader) ReadMessage() (Message, error) {
	frame, err := r.ReadFrame()
	if err != nil {
		return Message{}, err
	}
	return Decode(frame)
}

// Writer writes length-prefixed frames, flushing after each one. It is
// safe for concurrent use: each frame is written whole under a mutex.
type Writer struct {
	mu sync.Mutex
	w  *bufio.Writer
}

// NewWriter returns a Writer that writes frames to w through a
// bufio.Writer (w itself if it already is one).
func NewWriter(w io.Writer) *Writer {
	bw, ok := w.(*bufio.Writer)
	if !ok {
		bw = bufio.NewWriter(w)
	}
	return &Writer{w: bw}
}

// WriteFrame writes body as one frame and flushes it. A body larger than
// MaxFrameSize is refused with ErrFrameTooLarge before anything is
// written. Once a write to the underlying writer has failed, every later
// call fails too, since the peer may have seen part of a frame.
func (w *Writer) WriteFrame(body []byte) error {
	if len(body) > MaxFrameSize {
		return fmt.Errorf("ipc: write frame: %w", frameTooLarge(len(body)))
	}
	var hdr [headerSize]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(body)))

	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.w.Write(hdr[:]); err != nil {
		return fmt.Errorf("ipc: write frame: %w", err)
	}
	if _, err := w.w.Write(body); err != nil {
		return fmt.Errorf("ipc: write frame: %w", err)
	}
	if err := w.w.Flush(); err != nil {
		return fmt.Errorf("ipc: write frame: %w", err)
	}
	return nil
}

// WriteMessage encodes a message with Encode and writes it as one frame.
func (w *Writer) WriteMessage(kind Kind, id uint64, body any) error {
	frame, err := Encode(kind, id, body)
	if err != nil {
		return err
	}
	return w.WriteFrame(frame)
}
