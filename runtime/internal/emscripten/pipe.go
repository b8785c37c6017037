package emscripten

import "github.com/rlm-sandbox/rlm-sandbox/runtime/internal/vfs"

// buffer is one direction of a pipe or a loopback connection. The sandbox has
// a single guest thread, so a read from an empty buffer whose writer is still
// open could never be satisfied: it reports EAGAIN instead of hanging.
type buffer struct {
	data        []byte
	readClosed  bool
	writeClosed bool
	pool        *bufferPool // the bytes all of a guest's buffers hold
}

const bufferCap = 1 << 20

// bufferPool bounds the bytes a guest's pipes and loopback sockets hold
// together, host memory outside MemoryLimit: each buffer holds at most
// bufferCap, but 2,000 connections queued on a listener, 1 MiB each,
// held 2 GB of the host's (the process calling a direct-mode sandbox,
// or the worker). Past the pool's limit a write finds no room (EAGAIN),
// as past a buffer's own cap.
type bufferPool struct{ used int }

const bufferPoolLimit = 64 << 20

func (pool *bufferPool) newBuffer() *buffer { return &buffer{pool: pool} }

// closeRead says nothing will read b again: what it holds is dropped.
func (b *buffer) closeRead() {
	b.readClosed = true
	b.pool.used -= len(b.data)
	b.data = nil
}

func (b *buffer) read(p []byte) (int, vfs.Errno) {
	if len(b.data) == 0 {
		if b.writeClosed {
			return 0, ESUCCESS
		}
		return 0, EAGAIN
	}
	n := copy(p, b.data)
	b.data = b.data[n:]
	b.pool.used -= n
	if len(b.data) == 0 {
		b.data = nil
	}
	return n, ESUCCESS
}

func (b *buffer) write(p []byte) (int, vfs.Errno) {
	if b.readClosed {
		return 0, EPIPE
	}
	room := min(bufferCap-len(b.data), bufferPoolLimit-b.pool.used)
	if room <= 0 {
		return 0, EAGAIN
	}
	if len(p) > room {
		p = p[:room]
	}
	b.data = append(b.data, p...)
	b.pool.used += len(p)
	return len(p), ESUCCESS
}

type pipeEnd struct {
	b     *buffer
	write bool
}

func newPipe(pool *bufferPool) (r, w *pipeEnd) {
	b := pool.newBuffer()
	return &pipeEnd{b: b}, &pipeEnd{b: b, write: true}
}

func (p *pipeEnd) Read(q []byte) (int, vfs.Errno) {
	if p.write {
		return 0, EBADF
	}
	return p.b.read(q)
}

func (p *pipeEnd) Write(q []byte) (int, vfs.Errno) {
	if !p.write {
		return 0, EBADF
	}
	return p.b.write(q)
}

func (p *pipeEnd) Pread([]byte, int64) (int, vfs.Errno)  { return 0, ESPIPE }
func (p *pipeEnd) Pwrite([]byte, int64) (int, vfs.Errno) { return 0, ESPIPE }
func (p *pipeEnd) Lseek(int64, int) (int64, vfs.Errno)   { return 0, ESPIPE }
func (p *pipeEnd) Stat() (vfs.Stat, vfs.Errno) {
	return vfs.Stat{Mode: vfs.S_IFIFO | 0o600, Nlink: 1, Blksize: 4096}, ESUCCESS
}

func (p *pipeEnd) Close() vfs.Errno {
	if p.write {
		p.b.writeClosed = true
	} else {
		p.b.closeRead()
	}
	return ESUCCESS
}

func (p *pipeEnd) poll(events int16) int16 {
	var rev int16
	if p.write {
		if p.b.readClosed {
			rev |= pollErr
		} else if len(p.b.data) < bufferCap {
			rev |= pollOut
		}
		return rev
	}
	if len(p.b.data) > 0 {
		rev |= pollIn
	}
	if p.b.writeClosed {
		rev |= pollHup
	}
	return rev
}
