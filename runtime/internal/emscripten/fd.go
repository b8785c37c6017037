package emscripten

import (
	"io"
	"sort"

	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/vfs"
)

// stream is an open file description: a vfs file, a stdio device, a pipe
// end or a socket.
type stream interface {
	Read(p []byte) (int, vfs.Errno)
	Write(p []byte) (int, vfs.Errno)
	Pread(p []byte, off int64) (int, vfs.Errno)
	Pwrite(p []byte, off int64) (int, vfs.Errno)
	Lseek(off int64, whence int) (int64, vfs.Errno)
	Stat() (vfs.Stat, vfs.Errno)
	Close() vfs.Errno
}

// poller is implemented by streams whose readiness can change (pipes,
// sockets). Others are always ready for reading and writing.
type poller interface {
	poll(events int16) int16
}

const (
	pollIn   = 0x1
	pollOut  = 0x4
	pollErr  = 0x8
	pollHup  = 0x10
	pollNval = 0x20
)

// description is shared by descriptors made with dup.
type description struct {
	s     stream
	refs  int
	path  string
	flags int

	dirents []vfs.DirEntry // getdents snapshot, taken on first read
	dirPos  int
}

type fdEntry struct {
	d       *description
	cloexec bool
}

const maxFDs = 4096

type fdTable struct {
	fds []*fdEntry
}

func newFDTable() *fdTable { return &fdTable{} }

func (t *fdTable) get(fd int32) (*fdEntry, bool) {
	if fd < 0 || int(fd) >= len(t.fds) || t.fds[fd] == nil {
		return nil, false
	}
	return t.fds[fd], true
}

// alloc places d at the lowest free descriptor >= min.
func (t *fdTable) alloc(d *description, min int, cloexec bool) (int32, vfs.Errno) {
	for fd := min; fd < maxFDs; fd++ {
		if fd >= len(t.fds) {
			t.fds = append(t.fds, make([]*fdEntry, fd-len(t.fds)+1)...)
		}
		if t.fds[fd] == nil {
			d.refs++
			t.fds[fd] = &fdEntry{d: d, cloexec: cloexec}
			return int32(fd), ESUCCESS
		}
	}
	return -1, EMFILE
}

// place puts d at exactly fd, closing what was there.
func (t *fdTable) place(d *description, fd int32, cloexec bool) vfs.Errno {
	if fd < 0 || fd >= maxFDs {
		return EBADF
	}
	if int(fd) >= len(t.fds) {
		t.fds = append(t.fds, make([]*fdEntry, int(fd)-len(t.fds)+1)...)
	}
	if t.fds[fd] != nil {
		t.close(fd)
	}
	d.refs++
	t.fds[fd] = &fdEntry{d: d, cloexec: cloexec}
	return ESUCCESS
}

func (t *fdTable) close(fd int32) vfs.Errno {
	e, ok := t.get(fd)
	if !ok {
		return EBADF
	}
	t.fds[fd] = nil
	e.d.refs--
	if e.d.refs == 0 {
		return e.d.s.Close()
	}
	return ESUCCESS
}

func (t *fdTable) closeAll() {
	for fd := range t.fds {
		if t.fds[fd] != nil {
			t.close(int32(fd))
		}
	}
}

// readDirents returns the directory entries of d, sorted, "." and ".." first.
func (d *description) readDirents() ([]vfs.DirEntry, vfs.Errno) {
	if d.dirents != nil {
		return d.dirents, ESUCCESS
	}
	f, ok := d.s.(*vfs.File)
	if !ok {
		return nil, vfs.ENOTDIR
	}
	ents, errno := f.ReadDir()
	if errno != ESUCCESS {
		return nil, errno
	}
	sort.SliceStable(ents, func(i, j int) bool { return rank(ents[i].Name) < rank(ents[j].Name) })
	d.dirents = ents
	return ents, ESUCCESS
}

func rank(name string) int {
	switch name {
	case ".":
		return 0
	case "..":
		return 1
	}
	return 2
}

// stdio streams ---------------------------------------------------------------

type charDev struct{}

func (charDev) Pread([]byte, int64) (int, vfs.Errno)  { return 0, ESPIPE }
func (charDev) Pwrite([]byte, int64) (int, vfs.Errno) { return 0, ESPIPE }
func (charDev) Lseek(int64, int) (int64, vfs.Errno)   { return 0, ESPIPE }
func (charDev) Close() vfs.Errno                      { return ESUCCESS }
func (charDev) Stat() (vfs.Stat, vfs.Errno) {
	return vfs.Stat{Mode: vfs.S_IFCHR | 0o620, Nlink: 1, Ino: 1, Rdev: 0x0500, Blksize: 4096}, ESUCCESS
}

type stdinStream struct{ charDev }

func (stdinStream) Read([]byte) (int, vfs.Errno)  { return 0, ESUCCESS }
func (stdinStream) Write([]byte) (int, vfs.Errno) { return 0, EBADF }

type stdoutStream struct {
	charDev
	h   *Host
	err bool
}

func (s stdoutStream) Read([]byte) (int, vfs.Errno) { return 0, EBADF }
func (s stdoutStream) Write(p []byte) (int, vfs.Errno) {
	var w io.Writer
	if s.err {
		w = *s.h.stderr.Load()
	} else {
		w = *s.h.stdout.Load()
	}
	if _, err := w.Write(p); err != nil {
		return 0, vfs.EIO
	}
	return len(p), ESUCCESS
}

// Stdio is the device of /dev/stdin (fd 0), /dev/stdout (1) or
// /dev/stderr (2), which Emscripten's createStandardStreams makes: what is
// written reaches the host's output as descriptor 1's or 2's does,
// whatever the code did to the descriptors since; standard input is at
// its end.
func (h *Host) Stdio(fd int) vfs.Device { return h.std[fd] }

// Random is the device of /dev/random and /dev/urandom: reads fill the
// buffer from the host's random source (Config.Rand), writes are taken
// and dropped, as Linux takes them into its pool.
func (h *Host) Random() vfs.Device { return randomDevice{h} }

type randomDevice struct{ h *Host }

func (d randomDevice) Read(p []byte) (int, vfs.Errno) {
	d.h.cfg.Rand(p)
	return len(p), ESUCCESS
}

func (randomDevice) Write(p []byte) (int, vfs.Errno) { return len(p), ESUCCESS }

// stdio is the description of standard descriptor fd (0-2).
func (h *Host) stdio(fd int) *description {
	return &description{s: h.std[fd], path: "/dev/std" + []string{"in", "out", "err"}[fd], flags: []int{vfs.O_RDONLY, vfs.O_WRONLY, vfs.O_WRONLY}[fd]}
}

func (h *Host) installStdio() error {
	h.std = [3]stream{stdinStream{}, stdoutStream{h: h}, stdoutStream{h: h, err: true}}
	for fd := range 3 {
		if errno := h.fds.place(h.stdio(fd), int32(fd), false); errno != ESUCCESS {
			return errno
		}
	}
	return nil
}

// Keep records the descriptors open on the files at paths (the
// bootstrap's channels to the host), for RestoreKept. It reports false
// when one of the paths has none.
func (h *Host) Keep(paths ...string) bool {
	h.kept = h.kept[:0]
	for _, p := range paths {
		found := false
		for fd, e := range h.fds.fds {
			if e != nil && e.d.path == p {
				h.kept = append(h.kept, keptFD{int32(fd), e.d})
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// keptFD is a descriptor Keep recorded, and its description (whose path
// and flags open another if code closed that one: its last reference
// gone, it is closed).
type keptFD struct {
	fd int32
	d  *description
}

// RestoreKept puts back the descriptors Keep recorded that code closed
// (os.closerange(3, 100)) or made refer to something else (os.dup2), and
// reports whether it had to: the bootstrap's channels to the host, without
// which its replies went nowhere and every error read as an interrupt.
func (h *Host) RestoreKept() (restored bool) {
	for i, k := range h.kept {
		if e, ok := h.fds.get(k.fd); ok && e.d == k.d {
			continue
		}
		f, errno := h.fs.Open(k.d.path, k.d.flags, 0)
		if errno != ESUCCESS {
			continue // a device of the host's: not while it lives
		}
		d := &description{s: f, path: k.d.path, flags: k.d.flags}
		if h.fds.place(d, k.fd, false) == ESUCCESS {
			h.kept[i].d = d
		}
		restored = true
	}
	return restored
}

// RestoreStdio opens again the standard descriptors (0-2) that code closed
// (os.close(1), a `with open(1, "w")`), as the host's: a request's output
// reaches the host whatever the requests before it did. One that code
// made refer to something else (os.dup2) is left.
func (h *Host) RestoreStdio() {
	for fd := range 3 {
		if _, open := h.fds.get(int32(fd)); !open {
			h.fds.place(h.stdio(fd), int32(fd), false)
		}
	}
}
