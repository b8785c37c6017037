package emscripten

import (
	"context"
	"strings"

	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/vfs"
	"github.com/tetratelabs/wazero/api"
)

const (
	atFDCWD           = -100
	atSymlinkNofollow = 0x100
	atRemoveDir       = 0x200
	atEmptyPath       = 0x1000
	maxPath           = 4096
)

// path reads a guest path and resolves it against dirfd the way the glue's
// SYSCALLS.calculateAt does.
func (h *Host) path(m mem, dirfd int32, p uint32, allowEmpty bool) (string, vfs.Errno) {
	s, ok := m.cstring(p, maxPath+1)
	if !ok {
		if p != 0 && m.ok(p, 1) {
			return "", vfs.ENAMETOOLONG
		}
		return "", EFAULT
	}
	if strings.HasPrefix(s, "/") {
		return s, ESUCCESS
	}
	var dir string
	if dirfd == atFDCWD {
		dir = h.cwd
	} else {
		e, ok := h.fds.get(dirfd)
		if !ok {
			return "", EBADF
		}
		dir = e.d.path
	}
	if s == "" {
		if !allowEmpty {
			return "", ENOENT
		}
		return dir, ESUCCESS
	}
	return vfs.Join(dir, s), ESUCCESS
}

func (h *Host) writeStat(m mem, buf uint32, st vfs.Stat) uint64 {
	if !m.ok(buf, 96) {
		return neg(EFAULT)
	}
	m.put32(buf, uint32(st.Dev))
	m.put32(buf+4, st.Mode)
	m.put32(buf+8, st.Nlink)
	m.put32(buf+12, st.UID)
	m.put32(buf+16, st.GID)
	m.put32(buf+20, uint32(st.Rdev))
	m.put64(buf+24, uint64(st.Size))
	m.put32(buf+32, 4096)
	m.put32(buf+36, uint32((st.Size+511)/512))
	for i, t := range []int64{st.Atime, st.Mtime, st.Ctime} {
		sec, nsec := t/1e9, t%1e9
		if nsec < 0 {
			sec, nsec = sec-1, nsec+1e9
		}
		m.put64(buf+40+uint32(i)*16, uint64(sec))
		m.put32(buf+48+uint32(i)*16, uint32(nsec))
	}
	m.put64(buf+88, st.Ino)
	return 0
}

func (h *Host) openat(_ context.Context, mod api.Module, stack []uint64) {
	m := memOf(mod)
	dirfd, flags, varargs := i32(stack[0]), int(i32(stack[2])), u32(stack[3])
	path, errno := h.path(m, dirfd, u32(stack[1]), false)
	if errno != ESUCCESS {
		stack[0] = neg(errno)
		return
	}
	var mode uint32
	if varargs != 0 {
		mode = m.u32(varargs)
	}
	f, errno := h.fs.Open(path, flags, mode&^h.umask&0o7777)
	if errno != ESUCCESS {
		stack[0] = neg(errno)
		return
	}
	fd, errno := h.fds.alloc(&description{s: f, path: path, flags: flags}, 0, flags&vfs.O_CLOEXEC != 0)
	if errno != ESUCCESS {
		f.Close()
		stack[0] = neg(errno)
		return
	}
	stack[0] = ret32(fd)
}

func (h *Host) statPath(_ context.Context, mod api.Module, stack []uint64, follow bool) {
	m := memOf(mod)
	path, errno := h.path(m, atFDCWD, u32(stack[0]), false)
	if errno != ESUCCESS {
		stack[0] = neg(errno)
		return
	}
	var st vfs.Stat
	if follow {
		st, errno = h.fs.Stat(path)
	} else {
		st, errno = h.fs.Lstat(path)
	}
	if errno != ESUCCESS {
		stack[0] = neg(errno)
		return
	}
	stack[0] = h.writeStat(m, u32(stack[1]), st)
}

func (h *Host) stat64(ctx context.Context, mod api.Module, stack []uint64) {
	h.statPath(ctx, mod, stack, true)
}

func (h *Host) lstat64(ctx context.Context, mod api.Module, stack []uint64) {
	h.statPath(ctx, mod, stack, false)
}

func (h *Host) fstat64(_ context.Context, mod api.Module, stack []uint64) {
	e, ok := h.fds.get(i32(stack[0]))
	if !ok {
		stack[0] = neg(EBADF)
		return
	}
	st, errno := e.d.s.Stat()
	if errno != ESUCCESS {
		stack[0] = neg(errno)
		return
	}
	stack[0] = h.writeStat(memOf(mod), u32(stack[1]), st)
}

func (h *Host) newfstatat(_ context.Context, mod api.Module, stack []uint64) {
	m := memOf(mod)
	flags := i32(stack[3])
	path, errno := h.path(m, i32(stack[0]), u32(stack[1]), flags&atEmptyPath != 0)
	if errno != ESUCCESS {
		stack[0] = neg(errno)
		return
	}
	var st vfs.Stat
	if flags&atSymlinkNofollow != 0 {
		st, errno = h.fs.Lstat(path)
	} else {
		st, errno = h.fs.Stat(path)
	}
	if errno != ESUCCESS {
		stack[0] = neg(errno)
		return
	}
	stack[0] = h.writeStat(m, u32(stack[2]), st)
}

func (h *Host) faccessat(_ context.Context, mod api.Module, stack []uint64) {
	m := memOf(mod)
	amode := i32(stack[2])
	if amode&^7 != 0 {
		stack[0] = neg(EINVAL)
		return
	}
	path, errno := h.path(m, i32(stack[0]), u32(stack[1]), false)
	if errno == ESUCCESS {
		errno = h.fs.Access(path, int(amode))
	}
	stack[0] = neg(errno)
}

func (h *Host) chdir(_ context.Context, mod api.Module, stack []uint64) {
	path, errno := h.path(memOf(mod), atFDCWD, u32(stack[0]), false)
	if errno == ESUCCESS {
		errno = h.enterDir(path)
	}
	stack[0] = neg(errno)
}

func (h *Host) fchdir(_ context.Context, _ api.Module, stack []uint64) {
	e, ok := h.fds.get(i32(stack[0]))
	if !ok {
		stack[0] = neg(EBADF)
		return
	}
	stack[0] = neg(h.enterDir(e.d.path))
}

func (h *Host) enterDir(path string) vfs.Errno {
	st, errno := h.fs.Stat(path)
	if errno != ESUCCESS {
		return errno
	}
	if st.Mode&vfs.S_IFMT != vfs.S_IFDIR {
		return ENOTDIR
	}
	h.cwd = vfs.Join("/", path)
	return ESUCCESS
}

func (h *Host) getcwd(_ context.Context, mod api.Module, stack []uint64) {
	buf, size := u32(stack[0]), u32(stack[1])
	if size == 0 {
		stack[0] = neg(EINVAL)
		return
	}
	if uint32(len(h.cwd))+1 > size {
		stack[0] = neg(ERANGE)
		return
	}
	m := memOf(mod)
	if !m.ok(buf, uint32(len(h.cwd))+1) {
		stack[0] = neg(EFAULT)
		return
	}
	m.putCString(buf, h.cwd, size)
	stack[0] = uint64(len(h.cwd) + 1)
}

func (h *Host) chmod(_ context.Context, mod api.Module, stack []uint64) {
	path, errno := h.path(memOf(mod), atFDCWD, u32(stack[0]), false)
	if errno == ESUCCESS {
		errno = h.fs.Chmod(path, u32(stack[1])&0o7777)
	}
	stack[0] = neg(errno)
}

func (h *Host) fchmod(_ context.Context, _ api.Module, stack []uint64) {
	e, ok := h.fds.get(i32(stack[0]))
	if !ok {
		stack[0] = neg(EBADF)
		return
	}
	stack[0] = neg(h.fs.Chmod(e.d.path, u32(stack[1])&0o7777))
}

func (h *Host) fchmodat2(_ context.Context, mod api.Module, stack []uint64) {
	path, errno := h.path(memOf(mod), i32(stack[0]), u32(stack[1]), false)
	if errno == ESUCCESS {
		errno = h.fs.Chmod(path, u32(stack[2])&0o7777)
	}
	stack[0] = neg(errno)
}

// chown: there is one user in the sandbox; ownership changes succeed as no-ops
// on existing files.
func (h *Host) fchownat(_ context.Context, mod api.Module, stack []uint64) {
	path, errno := h.path(memOf(mod), i32(stack[0]), u32(stack[1]), false)
	if errno == ESUCCESS {
		_, errno = h.fs.Stat(path)
	}
	stack[0] = neg(errno)
}

func (h *Host) fchown32(_ context.Context, _ api.Module, stack []uint64) {
	if _, ok := h.fds.get(i32(stack[0])); !ok {
		stack[0] = neg(EBADF)
		return
	}
	stack[0] = 0
}

func (h *Host) mkdirat(_ context.Context, mod api.Module, stack []uint64) {
	path, errno := h.path(memOf(mod), i32(stack[0]), u32(stack[1]), false)
	if errno == ESUCCESS {
		errno = h.fs.Mkdir(strings.TrimRight(path, "/"), u32(stack[2])&^h.umask&0o7777)
	}
	stack[0] = neg(errno)
}

func (h *Host) mknodat(_ context.Context, mod api.Module, stack []uint64) {
	path, errno := h.path(memOf(mod), i32(stack[0]), u32(stack[1]), false)
	if errno != ESUCCESS {
		stack[0] = neg(errno)
		return
	}
	mode := u32(stack[2])
	if mode&vfs.S_IFMT != vfs.S_IFREG && mode&vfs.S_IFMT != 0 {
		stack[0] = neg(EPERM)
		return
	}
	f, errno := h.fs.Open(path, vfs.O_CREAT|vfs.O_EXCL|vfs.O_WRONLY, mode&^h.umask&0o7777)
	if errno == ESUCCESS {
		f.Close()
	}
	stack[0] = neg(errno)
}

func (h *Host) readlinkat(_ context.Context, mod api.Module, stack []uint64) {
	m := memOf(mod)
	buf, size := u32(stack[2]), i32(stack[3])
	if size <= 0 {
		stack[0] = neg(EINVAL)
		return
	}
	path, errno := h.path(m, i32(stack[0]), u32(stack[1]), false)
	if errno != ESUCCESS {
		stack[0] = neg(errno)
		return
	}
	target, errno := h.fs.Readlink(path)
	if errno != ESUCCESS {
		stack[0] = neg(errno)
		return
	}
	n := len(target)
	if n > int(size) {
		n = int(size)
	}
	b, ok := m.bytes(buf, uint32(n))
	if !ok {
		stack[0] = neg(EFAULT)
		return
	}
	copy(b, target)
	stack[0] = uint64(n)
}

func (h *Host) unlinkat(_ context.Context, mod api.Module, stack []uint64) {
	path, errno := h.path(memOf(mod), i32(stack[0]), u32(stack[1]), false)
	if errno == ESUCCESS {
		switch i32(stack[2]) {
		case 0:
			errno = h.fs.Unlink(path)
		case atRemoveDir:
			errno = h.fs.Rmdir(path)
		default:
			errno = EINVAL
		}
	}
	stack[0] = neg(errno)
}

func (h *Host) rmdir(_ context.Context, mod api.Module, stack []uint64) {
	path, errno := h.path(memOf(mod), atFDCWD, u32(stack[0]), false)
	if errno == ESUCCESS {
		errno = h.fs.Rmdir(path)
	}
	stack[0] = neg(errno)
}

func (h *Host) renameat(_ context.Context, mod api.Module, stack []uint64) {
	m := memOf(mod)
	oldp, errno := h.path(m, i32(stack[0]), u32(stack[1]), false)
	if errno != ESUCCESS {
		stack[0] = neg(errno)
		return
	}
	newp, errno := h.path(m, i32(stack[2]), u32(stack[3]), false)
	if errno == ESUCCESS {
		errno = h.fs.Rename(oldp, newp)
	}
	stack[0] = neg(errno)
}

func (h *Host) symlinkat(_ context.Context, mod api.Module, stack []uint64) {
	m := memOf(mod)
	target, ok := m.cstring(u32(stack[0]), maxPath)
	if !ok {
		stack[0] = neg(EFAULT)
		return
	}
	link, errno := h.path(m, i32(stack[1]), u32(stack[2]), false)
	if errno == ESUCCESS {
		errno = h.fs.Symlink(target, link)
	}
	stack[0] = neg(errno)
}

func (h *Host) truncate64(_ context.Context, mod api.Module, stack []uint64) {
	path, errno := h.path(memOf(mod), atFDCWD, u32(stack[0]), false)
	if errno == ESUCCESS {
		if int64(stack[1]) < 0 {
			errno = EINVAL
		} else {
			errno = h.fs.Truncate(path, int64(stack[1]))
		}
	}
	stack[0] = neg(errno)
}

func (h *Host) ftruncate64(_ context.Context, _ api.Module, stack []uint64) {
	e, ok := h.fds.get(i32(stack[0]))
	if !ok {
		stack[0] = neg(EBADF)
		return
	}
	f, ok := e.d.s.(*vfs.File)
	if !ok || e.d.flags&3 == vfs.O_RDONLY {
		stack[0] = neg(EINVAL)
		return
	}
	if int64(stack[1]) < 0 {
		stack[0] = neg(EINVAL)
		return
	}
	stack[0] = neg(f.Truncate(int64(stack[1])))
}

const (
	utimeNow  = 1073741823
	utimeOmit = 1073741822
)

func (h *Host) utimensat(_ context.Context, mod api.Module, stack []uint64) {
	m := memOf(mod)
	path, errno := h.path(m, i32(stack[0]), u32(stack[1]), true)
	if errno != ESUCCESS {
		stack[0] = neg(errno)
		return
	}
	atime, mtime := vfs.UtimeNow, vfs.UtimeNow
	if times := u32(stack[2]); times != 0 {
		if !m.ok(times, 32) {
			stack[0] = neg(EFAULT)
			return
		}
		pick := func(p uint32) int64 {
			switch nsec := int64(int32(m.u32(p + 8))); nsec {
			case utimeNow:
				return vfs.UtimeNow
			case utimeOmit:
				return vfs.UtimeOmit
			default:
				return int64(m.u64(p))*1e9 + nsec
			}
		}
		atime, mtime = pick(times), pick(times+16)
	}
	follow := i32(stack[3])&atSymlinkNofollow == 0
	stack[0] = neg(h.fs.Utimens(path, atime, mtime, follow))
}

func (h *Host) getdents64(_ context.Context, mod api.Module, stack []uint64) {
	e, ok := h.fds.get(i32(stack[0]))
	if !ok {
		stack[0] = neg(EBADF)
		return
	}
	ents, errno := e.d.readDirents()
	if errno != ESUCCESS {
		stack[0] = neg(errno)
		return
	}
	m := memOf(mod)
	dirp, count := u32(stack[1]), u32(stack[2])
	const recSize = 280
	var pos uint32
	for e.d.dirPos < len(ents) && pos+recSize <= count {
		ent := ents[e.d.dirPos]
		rec := dirp + pos
		if !m.ok(rec, recSize) {
			stack[0] = neg(EFAULT)
			return
		}
		m.put64(rec, ent.Ino)
		m.put64(rec+8, uint64(e.d.dirPos+1)*recSize)
		m.put16(rec+16, recSize)
		m.put8(rec+18, ent.Type)
		m.putCString(rec+19, ent.Name, 256)
		pos += recSize
		e.d.dirPos++
	}
	if pos == 0 && e.d.dirPos < len(ents) {
		stack[0] = neg(EINVAL)
		return
	}
	stack[0] = uint64(pos)
}

func (h *Host) statfs(m mem, buf uint32) uint64 {
	if !m.ok(buf, 72) {
		return neg(EFAULT)
	}
	m.put32(buf+4, 4096)
	m.put32(buf+60, 4096)
	m.put64(buf+8, 1<<20)
	m.put64(buf+16, 1<<19)
	m.put64(buf+24, 1<<19)
	m.put64(buf+32, 1<<16)
	m.put64(buf+40, 1<<15)
	m.put32(buf+48, 42)
	m.put32(buf+64, 0)
	m.put32(buf+56, 255)
	return 0
}

func (h *Host) statfs64(_ context.Context, mod api.Module, stack []uint64) {
	m := memOf(mod)
	path, errno := h.path(m, atFDCWD, u32(stack[0]), false)
	if errno == ESUCCESS {
		_, errno = h.fs.Stat(path)
	}
	if errno != ESUCCESS {
		stack[0] = neg(errno)
		return
	}
	stack[0] = h.statfs(m, u32(stack[2]))
}

func (h *Host) fstatfs64(_ context.Context, mod api.Module, stack []uint64) {
	if _, ok := h.fds.get(i32(stack[0])); !ok {
		stack[0] = neg(EBADF)
		return
	}
	stack[0] = h.statfs(memOf(mod), u32(stack[2]))
}
