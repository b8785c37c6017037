package worker

import (
	"sync"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/rlm-sandbox/rlm-sandbox/ipc"
)

// Python's output is sent in batches: one Output frame per run of writes
// to one stream, sent once outputBatch bytes are waiting, before any other
// frame of the execution (a BridgeCall, the Result), and at the latest
// outputDelay after it was written, so that it still reaches OnStdout
// while the code runs. A print loop then costs a write system call per
// outputBatch bytes instead of two per line.
const (
	outputBatch = 64 << 10
	outputDelay = time.Millisecond
	// maxOutputFrame bounds the data of one Output frame.
	maxOutputFrame = 1 << 20
)

// outbox gathers the output of the Execute being served and sends it,
// ahead of the execution's other frames.
type outbox struct {
	w *ipc.Writer

	mu     sync.Mutex
	id     uint64 // the Execute
	stream string // of data
	data   []byte // written to stream, not yet queued as a frame
	queued int    // bytes of output queued as frames since the last write
	timer  *time.Timer
	armed  bool // the timer will send what is waiting
}

// begin starts the output of the Execute id.
func (o *outbox) begin(id uint64) {
	o.mu.Lock()
	o.id = id
	o.mu.Unlock()
}

// write adds p, written by Python to stream. It waits only when a batch
// is sent, so that a program printing faster than the supervisor reads
// is held back (and the worker's memory stays bounded).
func (o *outbox) write(stream string, p []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if stream != o.stream {
		o.queue()
		o.stream = stream
	}
	for len(p) > 0 {
		n := min(len(p), maxOutputFrame-len(o.data))
		for n < len(p) && n > 0 && !utf8.RuneStart(p[n]) {
			n-- // keep characters whole
		}
		if n == 0 && len(o.data) == 0 {
			n = min(len(p), maxOutputFrame)
		}
		o.data = append(o.data, p[:n]...)
		p = p[n:]
		if len(p) > 0 || len(o.data)+o.queued >= outputBatch {
			o.flush()
		}
	}
	if len(o.data) > 0 && !o.armed {
		o.armed = true
		if o.timer == nil {
			o.timer = time.AfterFunc(outputDelay, o.sendLater)
		} else {
			o.timer.Reset(outputDelay)
		}
	}
}

// sendLater sends the output waiting since the timer was set.
func (o *outbox) sendLater() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.armed = false
	o.flush()
}

// flush writes the output waiting, and the frames queued before it.
func (o *outbox) flush() {
	o.queue()
	o.queued = 0
	_ = o.w.Flush() // an error is sticky: the reply reports it
}

// send writes a frame of the Execute (a BridgeCall, its reply), after the
// output written before it and in the same system call.
func (o *outbox) send(kind ipc.Kind, id uint64, body any) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.queue()
	o.queued = 0
	return o.w.WriteMessage(kind, id, body)
}

// sendAll writes frames of the Execute (bridge calls), after the
// output written before them, in one system call.
func (o *outbox) sendAll(kind ipc.Kind, ids []uint64, bodies []ipc.BridgeCall) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.queue()
	o.queued = 0
	for i := range bodies {
		if err := o.w.QueueMessage(kind, ids[i], bodies[i]); err != nil {
			return err
		}
	}
	return o.w.Flush()
}

// queue turns the data waiting into a frame queued on the writer.
func (o *outbox) queue() {
	if len(o.data) == 0 {
		return
	}
	// The frame is encoded before data is reused: the string need not be a copy.
	data := unsafe.String(unsafe.SliceData(o.data), len(o.data))
	_ = o.w.QueueMessage(ipc.KindOutput, o.id, ipc.Output{Stream: o.stream, Data: data})
	o.queued += len(o.data)
	o.data = o.data[:0]
}

// streamWriter is the io.Writer of one of Python's streams.
type streamWriter struct {
	o      *outbox
	stream string
}

func (sw streamWriter) Write(p []byte) (int, error) {
	sw.o.write(sw.stream, p)
	return len(p), nil
}
