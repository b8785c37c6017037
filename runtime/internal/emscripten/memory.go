package emscripten

import (
	"context"
	"encoding/binary"
	"math"

	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/vfs"
	"github.com/tetratelabs/wazero/api"
)

// A guest pointer outside linear memory is a bug in the guest or a hostile
// program; the accessors report it as EFAULT instead of panicking.

type mem struct {
	m   api.Memory
	buf []byte
}

func memOf(mod api.Module) mem {
	m := mod.Memory()
	b, _ := m.Read(0, m.Size())
	return mem{m: m, buf: b}
}

func (m mem) ok(p, n uint32) bool { return uint64(p)+uint64(n) <= uint64(len(m.buf)) }

func (m mem) bytes(p, n uint32) ([]byte, bool) {
	if !m.ok(p, n) {
		return nil, false
	}
	return m.buf[p : p+n : p+n], true
}

func (m mem) u8(p uint32) uint8 {
	if !m.ok(p, 1) {
		return 0
	}
	return m.buf[p]
}

func (m mem) u16(p uint32) uint16 {
	if !m.ok(p, 2) {
		return 0
	}
	return binary.LittleEndian.Uint16(m.buf[p:])
}

func (m mem) u32(p uint32) uint32 {
	if !m.ok(p, 4) {
		return 0
	}
	return binary.LittleEndian.Uint32(m.buf[p:])
}

func (m mem) u64(p uint32) uint64 {
	if !m.ok(p, 8) {
		return 0
	}
	return binary.LittleEndian.Uint64(m.buf[p:])
}

func (m mem) put8(p uint32, v uint8) bool {
	if !m.ok(p, 1) {
		return false
	}
	m.buf[p] = v
	return true
}

func (m mem) put16(p uint32, v uint16) bool {
	if !m.ok(p, 2) {
		return false
	}
	binary.LittleEndian.PutUint16(m.buf[p:], v)
	return true
}

func (m mem) put32(p uint32, v uint32) bool {
	if !m.ok(p, 4) {
		return false
	}
	binary.LittleEndian.PutUint32(m.buf[p:], v)
	return true
}

func (m mem) put64(p uint32, v uint64) bool {
	if !m.ok(p, 8) {
		return false
	}
	binary.LittleEndian.PutUint64(m.buf[p:], v)
	return true
}

// cstring reads a NUL-terminated string of at most max bytes.
func (m mem) cstring(p uint32, max int) (string, bool) {
	if p == 0 || !m.ok(p, 1) {
		return "", false
	}
	end := len(m.buf)
	if int(p)+max < end {
		end = int(p) + max
	}
	for i := int(p); i < end; i++ {
		if m.buf[i] == 0 {
			return string(m.buf[p:i]), true
		}
	}
	return "", false
}

// putCString writes s NUL-terminated into at most size bytes, truncating; it
// returns the bytes written excluding the NUL.
func (m mem) putCString(p uint32, s string, size uint32) uint32 {
	if size == 0 || !m.ok(p, size) {
		return 0
	}
	n := uint32(len(s))
	if n > size-1 {
		n = size - 1
	}
	copy(m.buf[p:], s[:n])
	m.buf[p+n] = 0
	return n
}

// iovecs returns the buffers of a wasi iovec array, in out's storage
// (out[:0] appended to).
func (m mem) iovecs(out [][]byte, iov, n uint32) ([][]byte, bool) {
	if n > 1024 {
		return nil, false
	}
	out = out[:0]
	for i := uint32(0); i < n; i++ {
		p, l := m.u32(iov+8*i), m.u32(iov+8*i+4)
		var b []byte
		ok := m.ok(iov+8*i, 8)
		if ok {
			b, ok = m.bytes(p, l)
		}
		if !ok {
			clear(out) // keep no view of the memory in out's storage
			return nil, false
		}
		out = append(out, b)
	}
	return out, true
}

// Stack helpers for api.GoModuleFunc implementations.

func i32(v uint64) int32   { return int32(uint32(v)) }
func u32(v uint64) uint32  { return uint32(v) }
func ret32(v int32) uint64 { return uint64(uint32(v)) }
func f64(v float64) uint64 { return math.Float64bits(v) }

// heap growth ---------------------------------------------------------------

const wasmPage = 65536

func (h *Host) maxMemory() uint64 {
	max := uint64(4294901760) // what the glue's getHeapMax returns
	if h.cfg.MaxMemory != 0 && h.cfg.MaxMemory < max {
		max = h.cfg.MaxMemory
	}
	// Whole pages: with a ceiling between two, a request past the last
	// whole page was answered as grown (nothing to grow: "size <= old"),
	// and the guest wrote past its memory's end (a trap in direct mode,
	// a crash of the worker).
	return max / wasmPage * wasmPage
}

// emscripten_resize_heap(requestedSize) -> bool: grows linear memory the way
// the glue does (over-allocating by up to 20%), refusing past the ceiling so
// malloc returns NULL and Python raises MemoryError.
func (h *Host) resizeHeap(_ context.Context, mod api.Module, stack []uint64) {
	req := uint64(u32(stack[0]))
	m := mod.Memory()
	old := uint64(m.Size())
	max := h.maxMemory()
	if req > max {
		h.refused.Add(1)
		stack[0] = 0
		return
	}
	for cut := uint64(1); cut <= 4; cut *= 2 {
		over := old + old/(5*cut)
		if over > req+96<<20 {
			over = req + 96<<20
		}
		size := req
		if over > size {
			size = over
		}
		size = (size + wasmPage - 1) / wasmPage * wasmPage
		if size > max {
			size = max // whole pages
		}
		if size <= old {
			stack[0] = 1
			return
		}
		if _, ok := m.Grow(uint32((size - old) / wasmPage)); ok {
			stack[0] = 1
			return
		}
	}
	h.refused.Add(1)
	stack[0] = 0
}

// MemoryRefused counts the guest's requests for more memory refused so
// far (malloc returned NULL: Python raised MemoryError, or code caught it).
func (h *Host) MemoryRefused() int64 { return h.refused.Load() }

func (h *Host) getHeapMax(_ context.Context, _ api.Module, stack []uint64) {
	stack[0] = uint64(uint32(h.maxMemory()))
}

// Protection and mapping flags of mmap, as musl has them.
const (
	protWrite   = 2
	mapPrivate  = 2
	mmapAlign   = 65536 // as the glue's mmapAlloc aligns
	mmapMaxSize = 1 << 31
)

// _mmap_js(len, prot, flags, fd, offset, allocatedPtr, addrPtr): maps a
// regular file as Emscripten's MEMFS does: into memory the guest
// allocates (memalign, as the glue's mmapAlloc), filled with the file's
// bytes from offset; libc frees it at munmap, which writes a shared,
// writable map back (_munmap_js, _msync_js). Maps of one file do not
// share memory, but a process's own use (CPython's mmap module, SQLite's
// shared memory for its WAL mode) holds one map of a region at a time.
// Anonymous maps never come here: libc allocates them itself.
func (h *Host) mmapJS(ctx context.Context, mod api.Module, stack []uint64) {
	length, prot, flags, fd := u32(stack[0]), i32(stack[1]), i32(stack[2]), i32(stack[3])
	off, allocated, addr := int64(stack[4]), u32(stack[5]), u32(stack[6])
	e, _, errno := h.regularFile(fd)
	if errno != ESUCCESS {
		stack[0] = ret32(-int32(errno))
		return
	}
	switch acc := e.d.flags & vfs.O_ACCMODE; {
	case acc == vfs.O_WRONLY, prot&protWrite != 0 && flags&mapPrivate == 0 && acc != vfs.O_RDWR:
		stack[0] = ret32(-int32(EACCES))
		return
	case length == 0 || off < 0:
		stack[0] = ret32(-int32(EINVAL))
		return
	case length > mmapMaxSize:
		stack[0] = ret32(-int32(vfs.ENOMEM))
		return
	}
	size := (uint64(length) + mmapAlign - 1) / mmapAlign * mmapAlign
	ptr := h.guestCall(ctx, mod, "emscripten_builtin_memalign", mmapAlign, size)
	m := memOf(mod) // after the call: the memory may have grown
	b, ok := m.bytes(ptr, uint32(size))
	if ptr == 0 || !ok {
		stack[0] = ret32(-int32(vfs.ENOMEM))
		return
	}
	clear(b)
	for n := 0; n < int(length); {
		k, errno := e.d.s.Pread(b[n:length], off+int64(n))
		if errno != ESUCCESS {
			h.guestCall(ctx, mod, "emscripten_builtin_free", uint64(ptr))
			stack[0] = ret32(-int32(errno))
			return
		}
		if k == 0 {
			break // the rest of the map is past the end of the file: zeros
		}
		n += k
	}
	if !m.put32(allocated, 1) || !m.put32(addr, ptr) {
		h.guestCall(ctx, mod, "emscripten_builtin_free", uint64(ptr))
		stack[0] = ret32(-int32(EFAULT))
		return
	}
	stack[0] = 0
}

// _munmap_js(addr, len, prot, flags, fd, offset): a writable map is
// written back, as msync does; libc frees the memory after.
func (h *Host) munmapJS(ctx context.Context, mod api.Module, stack []uint64) {
	if i32(stack[2])&protWrite == 0 {
		stack[0] = 0
		return
	}
	h.msyncJS(ctx, mod, stack)
}

// _msync_js(addr, len, prot, flags, fd, offset): writes a shared map back
// to its file, up to the file's end (the part of a map past it is not
// the file's, as on Linux).
func (h *Host) msyncJS(_ context.Context, mod api.Module, stack []uint64) {
	addr, length, flags, fd := u32(stack[0]), u32(stack[1]), i32(stack[3]), i32(stack[4])
	off := int64(stack[5])
	if flags&mapPrivate != 0 {
		stack[0] = 0
		return
	}
	e, size, errno := h.regularFile(fd)
	if errno != ESUCCESS {
		stack[0] = ret32(-int32(errno))
		return
	}
	n := min(int64(length), max(0, size-off))
	b, ok := memOf(mod).bytes(addr, uint32(n))
	if !ok {
		stack[0] = ret32(-int32(EFAULT))
		return
	}
	if _, errno := e.d.s.Pwrite(b, off); errno != ESUCCESS {
		stack[0] = ret32(-int32(errno))
		return
	}
	stack[0] = 0
}

// regularFile is the entry of descriptor fd and its file's size, for a
// map: EBADF without one, ENODEV when its file is not a regular one (as
// MEMFS maps only files).
func (h *Host) regularFile(fd int32) (*fdEntry, int64, vfs.Errno) {
	e, ok := h.fds.get(fd)
	if !ok {
		return nil, 0, EBADF
	}
	st, errno := e.d.s.Stat()
	switch {
	case errno != ESUCCESS:
		return nil, 0, errno
	case st.Mode&vfs.S_IFMT != vfs.S_IFREG:
		return nil, 0, ENODEV
	}
	return e, int64(st.Size), ESUCCESS
}

// guestCall calls the guest's exported function name from an import (as
// the glue's JavaScript calls malloc); 0 when it fails.
func (h *Host) guestCall(ctx context.Context, mod api.Module, name string, args ...uint64) uint32 {
	f := mod.ExportedFunction(name)
	if f == nil {
		return 0
	}
	res, err := f.Call(ctx, args...)
	if err != nil || len(res) != 1 {
		return 0
	}
	return uint32(res[0])
}
