package ipc

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
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
// much plus twice what the peer really sent. It exceeds a worker's batch
// of output (64 KiB and a frame header), which then needs no second
// allocation.
const readChunk = 256 << 10

func frameTooLarge[N int | uint32](n N) error {
	return fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, n, MaxFrameSize)
}

// Reader reads length-prefixed frames. It is not safe for concurrent use:
// one goroutine at a time should read each stream's Reader.
type Reader struct {
	r   *bufio.Reader
	err error // sticky: once framing fails the stream is out of sync

	// The frame being read, kept when a read times out.
	hdr  [headerSize]byte
	nhdr int // bytes of hdr read
	body []byte
	size int // of body, once hdr is read
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

// Buffered reports how many bytes have been read from the underlying
// reader but not yet returned in a frame.
func (r *Reader) Buffered() int { return r.r.Buffered() }

// ReadFrame reads the next frame and returns its body in a new slice the
// caller owns.
//
// It returns io.EOF, unwrapped, when the stream ends cleanly between
// frames; an error wrapping io.ErrUnexpectedEOF when it ends inside a
// frame; and an error wrapping ErrFrameTooLarge, without reading or
// allocating the body, when the length prefix exceeds MaxFrameSize. Any
// error is final (later calls return it again) except a timeout of the
// underlying reader, an error matching os.ErrDeadlineExceeded (an
// *os.File whose read deadline passed): the part of the frame read so far
// is kept, and the next call goes on with it.
func (r *Reader) ReadFrame() ([]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	body, err := r.readFrame()
	if err != nil {
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			r.err = err
		}
		return nil, err
	}
	return body, nil
}

// asText describes a stream whose first bytes are text where a frame
// header should be (a program printing to the stream, not speaking the
// protocol): what it says, as far as it is already read; else "".
func (r *Reader) asText() string {
	more, _ := r.r.Peek(min(r.r.Buffered(), 76))
	text := append(r.hdr[:r.nhdr:r.nhdr], more...)
	for _, c := range text {
		if (c < ' ' || c > '~') && c != '\n' && c != '\r' && c != '\t' {
			return ""
		}
	}
	return fmt.Sprintf("; the stream reads %q: text, not frames", text)
}

func (r *Reader) readFrame() ([]byte, error) {
	if r.nhdr < headerSize {
		n, err := io.ReadFull(r.r, r.hdr[r.nhdr:])
		r.nhdr += n
		if err != nil {
			if err == io.EOF && r.nhdr == 0 {
				return nil, io.EOF
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("ipc: read frame header: %w", err)
		}
		n32 := binary.BigEndian.Uint32(r.hdr[:])
		if n32 > MaxFrameSize {
			return nil, fmt.Errorf("ipc: read frame: %w%s", frameTooLarge(n32), r.asText())
		}
		r.size = int(n32)
		r.body = make([]byte, 0, min(r.size, readChunk))
	}
	for len(r.body) < r.size {
		if len(r.body) == cap(r.body) {
			grown := make([]byte, len(r.body), min(r.size, 2*cap(r.body)))
			copy(grown, r.body)
			r.body = grown
		}
		m, err := io.ReadFull(r.r, r.body[len(r.body):cap(r.body)])
		r.body = r.body[:len(r.body)+m]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("ipc: read frame body (%d of %d bytes): %w", len(r.body), r.size, err)
		}
	}
	body := r.body
	r.nhdr, r.body, r.size = 0, nil, 0
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
	// Nothing else holds the frame: its strings need not be copies.
	return decode(frame, true)
}

// Writer writes length-prefixed frames. It is safe for concurrent use:
// frames go out whole, in the order their calls took the Writer.
//
// Writes are group-committed. A frame written while another goroutine is
// in a write system call is queued, and that goroutine sends it with its
// next system call before it returns: concurrent writers (the answers to a
// batched bridge call, say) share system calls, and none waits for
// another's. QueueMessage queues a frame without writing it; Flush waits
// for a write in progress and sends what is queued.
type Writer struct {
	w  io.Writer
	bw *bufio.Writer // w, when it is one: flushed after each write

	mu      sync.Mutex
	queued  []byte // frames waiting to be written
	spare   []byte // the buffer of the last write, reused
	writing bool   // a goroutine is writing; it sends what is queued before it stops
	idle    sync.Cond
	err     error // sticky: the peer may have seen part of a frame
}

// maxSpare bounds the write buffer a Writer keeps between writes.
const maxSpare = 4 << 20

// NewWriter returns a Writer that writes frames to w (and flushes w after
// each write when it is a *bufio.Writer).
func NewWriter(w io.Writer) *Writer {
	wr := &Writer{w: w}
	wr.bw, _ = w.(*bufio.Writer)
	wr.idle.L = &wr.mu
	return wr
}

// WriteFrame writes body as one frame. A body larger than MaxFrameSize is
// refused with ErrFrameTooLarge before anything is written. Once a write
// to the underlying writer has failed, every later call fails too, since
// the peer may have seen part of a frame. When another goroutine is
// writing, the frame is left to it and WriteFrame returns nil at once; an
// error of that write is reported by the calls that follow.
func (w *Writer) WriteFrame(body []byte) error {
	if len(body) > MaxFrameSize {
		return fmt.Errorf("ipc: write frame: %w", frameTooLarge(len(body)))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	w.queued = binary.BigEndian.AppendUint32(w.queued, uint32(len(body)))
	w.queued = append(w.queued, body...)
	return w.send(false)
}

// WriteMessage encodes a message as Encode does and writes it as one
// frame, as WriteFrame does. An encoding error writes nothing.
func (w *Writer) WriteMessage(kind Kind, id uint64, body any) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.queue(kind, id, body); err != nil {
		return err
	}
	return w.send(false)
}

// QueueMessage encodes a message as Encode does and queues its frame: it
// goes out with the next write (WriteFrame, WriteMessage or Flush).
func (w *Writer) QueueMessage(kind Kind, id uint64, body any) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.queue(kind, id, body)
}

// Flush waits for a write in progress to end, then writes the queued
// frames. It returns the Writer's sticky error, if any.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.send(true)
}

// Queued reports how many bytes of frames are waiting to be written.
func (w *Writer) Queued() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.queued)
}

func (w *Writer) queue(kind Kind, id uint64, body any) error {
	if w.err != nil {
		return w.err
	}
	q, err := AppendFrame(w.queued, kind, id, body)
	if err != nil {
		return err
	}
	w.queued = q
	return nil
}

// send writes the queue, with w.mu held. When another goroutine is
// writing, it leaves the queue to it, or with wait waits for it to end.
func (w *Writer) send(wait bool) error {
	for w.writing {
		if !wait {
			return w.err
		}
		w.idle.Wait()
	}
	w.writing = true
	for len(w.queued) > 0 && w.err == nil {
		p := w.queued
		w.queued = w.spare[:0]
		w.mu.Unlock()
		_, err := w.w.Write(p)
		if err == nil && w.bw != nil {
			err = w.bw.Flush()
		}
		w.mu.Lock()
		if cap(p) <= maxSpare {
			w.spare = p[:0]
		} else {
			w.spare = nil
		}
		if err != nil {
			w.err = fmt.Errorf("ipc: write frame: %w", err)
		}
	}
	w.queued = w.queued[:0]
	w.writing = false
	w.idle.Broadcast()
	return w.err
}
