package emscripten

import (
	"context"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/vfs"
	"github.com/tetratelabs/wazero/api"
)

func (h *Host) fdClose(_ context.Context, _ api.Module, stack []uint64) {
	stack[0] = wasiErr(h.fds.close(i32(stack[0])))
}

// transfer moves data through op buffer by buffer, as readv/writev do: it
// stops at the first short transfer, and reports an error only when nothing
// was transferred.
func transfer(bufs [][]byte, op func(b []byte) (int, vfs.Errno)) (int, vfs.Errno) {
	total := 0
	for _, b := range bufs {
		if len(b) == 0 {
			continue
		}
		n, errno := op(b)
		if errno != ESUCCESS {
			if total == 0 {
				return 0, errno
			}
			break
		}
		total += n
		if n < len(b) {
			break
		}
	}
	return total, ESUCCESS
}

// rw runs a readv/writev-style transfer over the iovecs at iov.
func (h *Host) rw(mod api.Module, stack []uint64, fd int32, iov, n, pnum uint32, write bool, off int64) {
	e, ok := h.fds.get(fd)
	if !ok {
		stack[0] = wasiErr(EBADF)
		return
	}
	m := memOf(mod)
	// The guest runs one call at a time: its transfers share one slice
	// of buffers (emptied after use, so that it holds no view of a
	// memory that has since grown elsewhere).
	bufs, ok := m.iovecs(h.iov, iov, n)
	if ok {
		h.iov = bufs
		defer clear(bufs)
	}
	if !ok || !m.ok(pnum, 4) {
		stack[0] = wasiErr(EFAULT)
		return
	}
	acc := e.d.flags & 3
	if (write && acc == vfs.O_RDONLY) || (!write && acc == vfs.O_WRONLY) {
		stack[0] = wasiErr(EBADF)
		return
	}
	var op func(b []byte) (int, vfs.Errno)
	switch {
	case write && off >= 0:
		op = func(b []byte) (int, vfs.Errno) { k, errno := e.d.s.Pwrite(b, off); off += int64(k); return k, errno }
	case write:
		op = e.d.s.Write
	case off >= 0:
		op = func(b []byte) (int, vfs.Errno) { k, errno := e.d.s.Pread(b, off); off += int64(k); return k, errno }
	default:
		op = e.d.s.Read
	}
	total, errno := transfer(bufs, op)
	if errno != ESUCCESS {
		stack[0] = wasiErr(errno)
		return
	}
	m.put32(pnum, uint32(total))
	stack[0] = 0
}

func (h *Host) fdRead(_ context.Context, mod api.Module, stack []uint64) {
	h.rw(mod, stack, i32(stack[0]), u32(stack[1]), u32(stack[2]), u32(stack[3]), false, -1)
}

func (h *Host) fdWrite(_ context.Context, mod api.Module, stack []uint64) {
	h.rw(mod, stack, i32(stack[0]), u32(stack[1]), u32(stack[2]), u32(stack[3]), true, -1)
}

func (h *Host) fdPread(_ context.Context, mod api.Module, stack []uint64) {
	off := int64(stack[3])
	if off < 0 {
		stack[0] = wasiErr(EINVAL)
		return
	}
	h.rw(mod, stack, i32(stack[0]), u32(stack[1]), u32(stack[2]), u32(stack[4]), false, off)
}

func (h *Host) fdPwrite(_ context.Context, mod api.Module, stack []uint64) {
	off := int64(stack[3])
	if off < 0 {
		stack[0] = wasiErr(EINVAL)
		return
	}
	h.rw(mod, stack, i32(stack[0]), u32(stack[1]), u32(stack[2]), u32(stack[4]), true, off)
}

func (h *Host) fdSeek(_ context.Context, mod api.Module, stack []uint64) {
	e, ok := h.fds.get(i32(stack[0]))
	if !ok {
		stack[0] = wasiErr(EBADF)
		return
	}
	off, whence, out := int64(stack[1]), int(i32(stack[2])), u32(stack[3])
	pos, errno := e.d.s.Lseek(off, whence)
	if errno != ESUCCESS {
		stack[0] = wasiErr(errno)
		return
	}
	if e.d.dirents != nil && off == 0 && whence == 0 {
		e.d.dirents, e.d.dirPos = nil, 0 // rewinddir
	}
	if !memOf(mod).put64(out, uint64(pos)) {
		stack[0] = wasiErr(EFAULT)
		return
	}
	stack[0] = 0
}

func (h *Host) fdFdstatGet(_ context.Context, mod api.Module, stack []uint64) {
	e, ok := h.fds.get(i32(stack[0]))
	if !ok {
		stack[0] = wasiErr(EBADF)
		return
	}
	st, errno := e.d.s.Stat()
	if errno != ESUCCESS {
		stack[0] = wasiErr(errno)
		return
	}
	var typ uint8 = 4 // regular file
	switch st.Mode & vfs.S_IFMT {
	case vfs.S_IFDIR:
		typ = 3
	case vfs.S_IFLNK:
		typ = 7
	case vfs.S_IFCHR:
		// No device here is a terminal (the standard streams go to the
		// host's pipes and buffers). A character device is one to
		// Emscripten's isatty, so they are reported as Emscripten reports
		// its devices that are not terminals: as regular files. (Pyodide
		// makes its standard streams such devices too, by default.)
		typ = 4
	case vfs.S_IFSOCK:
		typ = 6
	}
	m := memOf(mod)
	buf := u32(stack[1])
	if !m.ok(buf, 24) {
		stack[0] = wasiErr(EFAULT)
		return
	}
	m.put8(buf, typ)
	m.put16(buf+2, 0)
	m.put64(buf+8, 0)
	m.put64(buf+16, 0)
	stack[0] = 0
}

func (h *Host) fdSync(_ context.Context, _ api.Module, stack []uint64) {
	if _, ok := h.fds.get(i32(stack[0])); !ok {
		stack[0] = wasiErr(EBADF)
		return
	}
	stack[0] = 0
}

func (h *Host) fdatasync(_ context.Context, _ api.Module, stack []uint64) {
	if _, ok := h.fds.get(i32(stack[0])); !ok {
		stack[0] = neg(EBADF)
		return
	}
	stack[0] = 0
}

func (h *Host) dup(_ context.Context, _ api.Module, stack []uint64) {
	e, ok := h.fds.get(i32(stack[0]))
	if !ok {
		stack[0] = neg(EBADF)
		return
	}
	fd, errno := h.fds.alloc(e.d, 0, false)
	if errno != ESUCCESS {
		stack[0] = neg(errno)
		return
	}
	stack[0] = ret32(fd)
}

func (h *Host) dup3(_ context.Context, _ api.Module, stack []uint64) {
	fd, newfd, flags := i32(stack[0]), i32(stack[1]), i32(stack[2])
	e, ok := h.fds.get(fd)
	if !ok {
		stack[0] = neg(EBADF)
		return
	}
	if fd == newfd {
		stack[0] = neg(EINVAL)
		return
	}
	if errno := h.fds.place(e.d, newfd, flags&vfs.O_CLOEXEC != 0); errno != ESUCCESS {
		stack[0] = neg(errno)
		return
	}
	stack[0] = ret32(newfd)
}

const (
	fDupfd        = 0
	fGetfd        = 1
	fSetfd        = 2
	fGetfl        = 3
	fSetfl        = 4
	fGetlk        = 12
	fSetlk        = 13
	fSetlkw       = 14
	fDupfdCloexec = 1030
)

func (h *Host) fcntl64(_ context.Context, mod api.Module, stack []uint64) {
	fd, cmd, varargs := i32(stack[0]), i32(stack[1]), u32(stack[2])
	e, ok := h.fds.get(fd)
	if !ok {
		stack[0] = neg(EBADF)
		return
	}
	m := memOf(mod)
	switch cmd {
	case fDupfd, fDupfdCloexec:
		min := int32(m.u32(varargs))
		if min < 0 {
			stack[0] = neg(EINVAL)
			return
		}
		nfd, errno := h.fds.alloc(e.d, int(min), cmd == fDupfdCloexec)
		if errno != ESUCCESS {
			stack[0] = neg(errno)
			return
		}
		stack[0] = ret32(nfd)
	case fGetfd:
		if e.cloexec {
			stack[0] = 1
		} else {
			stack[0] = 0
		}
	case fSetfd:
		e.cloexec = m.u32(varargs)&1 != 0
		stack[0] = 0
	case fGetfl:
		stack[0] = ret32(int32(e.d.flags))
	case fSetfl:
		const settable = vfs.O_APPEND | vfs.O_NONBLOCK
		arg := int(int32(m.u32(varargs)))
		e.d.flags = e.d.flags&^settable | arg&settable
		if f, ok := e.d.s.(*vfs.File); ok {
			f.SetFlags(f.Flags()&^settable | arg&settable)
		}
		stack[0] = 0
	case fGetlk:
		p := m.u32(varargs)
		m.put16(p, 2) // F_UNLCK: nobody else holds locks here
		stack[0] = 0
	case fSetlk, fSetlkw:
		stack[0] = 0
	default:
		stack[0] = neg(EINVAL)
	}
}

func (h *Host) ioctl(_ context.Context, _ api.Module, stack []uint64) {
	if _, ok := h.fds.get(i32(stack[0])); !ok {
		stack[0] = neg(EBADF)
		return
	}
	stack[0] = neg(ENOTTY) // no terminals in the sandbox
}

func (h *Host) fadvise64(_ context.Context, _ api.Module, stack []uint64) {
	if _, ok := h.fds.get(i32(stack[0])); !ok {
		stack[0] = neg(EBADF)
		return
	}
	stack[0] = 0
}

func (h *Host) fallocate(_ context.Context, _ api.Module, stack []uint64) {
	e, ok := h.fds.get(i32(stack[0]))
	if !ok {
		stack[0] = neg(EBADF)
		return
	}
	f, ok := e.d.s.(*vfs.File)
	if !ok {
		stack[0] = neg(ENODEV)
		return
	}
	off, n := int64(stack[2]), int64(stack[3])
	if off < 0 || n <= 0 {
		stack[0] = neg(EINVAL)
		return
	}
	st, errno := f.Stat()
	if errno == ESUCCESS && off+n > st.Size {
		errno = f.Truncate(off + n)
	}
	stack[0] = neg(errno)
}

func (h *Host) umaskCall(_ context.Context, _ api.Module, stack []uint64) {
	old := h.umask
	h.umask = u32(stack[0]) & 0o777
	stack[0] = uint64(old)
}

func (h *Host) getuid(_ context.Context, _ api.Module, stack []uint64) { stack[0] = 0 }

func (h *Host) pipe(_ context.Context, mod api.Module, stack []uint64) {
	m := memOf(mod)
	p := u32(stack[0])
	if !m.ok(p, 8) {
		stack[0] = neg(EFAULT)
		return
	}
	r, w := newPipe(&h.net.bufs)
	rfd, errno := h.fds.alloc(&description{s: r, path: "pipe:", flags: vfs.O_RDONLY}, 0, false)
	if errno != ESUCCESS {
		stack[0] = neg(errno)
		return
	}
	wfd, errno := h.fds.alloc(&description{s: w, path: "pipe:", flags: vfs.O_WRONLY}, 0, false)
	if errno != ESUCCESS {
		h.fds.close(rfd)
		stack[0] = neg(errno)
		return
	}
	m.put32(p, uint32(rfd))
	m.put32(p+4, uint32(wfd))
	stack[0] = 0
}

// poll(fds, nfds, timeoutMillis). Nothing in the sandbox changes readiness
// while the guest waits (there is one guest thread and no network), so poll
// reports what is ready now, or sleeps for the timeout. The sleep is a real,
// cheap sleep that ends early with EINTR when an interrupt is pending, which
// makes CPython check its signals and raise KeyboardInterrupt.
func (h *Host) poll(ctx context.Context, mod api.Module, stack []uint64) {
	m := memOf(mod)
	fds, nfds, timeout := u32(stack[0]), u32(stack[1]), i32(stack[2])
	if nfds > maxFDs || !m.ok(fds, 8*nfds) {
		h.setErrno(m, EFAULT)
		stack[0] = neg(EFAULT)
		return
	}
	var count int32
	for i := uint32(0); i < nfds; i++ {
		p := fds + 8*i
		fd, events := int32(m.u32(p)), int16(m.u16(p+4))
		var rev int16
		if fd >= 0 {
			if e, ok := h.fds.get(fd); !ok {
				rev = pollNval
			} else if pl, ok := e.d.s.(poller); ok {
				rev = pl.poll(events) & (events | pollErr | pollHup)
			} else {
				rev = (pollIn | pollOut) & (events | pollErr | pollHup)
			}
		}
		if rev != 0 {
			count++
		}
		m.put16(p+6, uint16(rev))
	}
	if count > 0 || timeout == 0 {
		stack[0] = uint64(count)
		return
	}
	var d time.Duration = -1
	if timeout > 0 {
		d = time.Duration(timeout) * time.Millisecond
	}
	if !h.sleep(ctx, d) {
		h.setErrno(m, EINTR) // for select (see SetErrnoAddr)
		stack[0] = neg(EINTR)
		return
	}
	stack[0] = 0
}

// sleep waits for d (forever if d < 0) and reports whether it completed;
// it returns false as soon as an interrupt is pending or ctx is done.
func (h *Host) sleep(ctx context.Context, d time.Duration) bool {
	start := time.Now()
	defer func() { h.AddIdle(time.Since(start)) }()
	deadline := start.Add(d)
	for {
		if h.killed.Load() {
			panic(ErrKilled)
		}
		if h.cfg.Interrupt.Load() != 0 || ctx.Err() != nil {
			return false
		}
		left := time.Until(deadline)
		if d < 0 {
			left = -1
		} else if left <= 0 {
			return true
		}
		h.cfg.Interrupt.WaitInterrupt(ctx, left)
	}
}
