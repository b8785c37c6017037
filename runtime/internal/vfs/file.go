package vfs

import "slices"

// File is an open file description: the object that open(2) creates and
// that dup'ed descriptors share. It holds the node (which stays alive while
// the File is open, even if unlinked), the open flags, the read/write
// offset and the directory read cursor. All methods lock the FS it came
// from; after Close every method fails with EBADF.
type File struct {
	fs      *FS
	n       *node
	path    string
	flags   int
	pos     int64
	dirPos  int64
	dirList []DirEntry // entries captured when reading started at position 0
	closed  bool
}

// FileState is the serialisable state of a File, for re-opening it in a
// restored FS with FS.Reopen.
type FileState struct {
	Ino    uint64 // Inode number of the open node.
	Path   string // Path the File was opened with.
	Flags  int    // Open flags.
	Pos    int64  // Read/write offset.
	DirPos int64  // Directory read cursor.
}

// Open opens path with the given O_* flags; perm gives the permission bits
// of a file created by O_CREAT (the caller applies the umask). Semantics
// follow Linux:
//
//   - O_CREAT|O_EXCL fails with EEXIST if the name exists, even as a
//     dangling symlink; O_CREAT alone creates through a dangling symlink.
//   - O_NOFOLLOW fails with ELOOP on a final symlink, except with O_PATH,
//     which then opens the symlink itself.
//   - O_DIRECTORY fails with ENOTDIR on a non-directory; O_CREAT|O_DIRECTORY
//     is EINVAL.
//   - A directory can only be opened read-only (else EISDIR), and O_CREAT on
//     an existing directory is EISDIR. A trailing slash on a name that does
//     not exist with O_CREAT is EISDIR; on an existing non-directory it is
//     ENOTDIR.
//   - O_TRUNC truncates a regular file opened for writing; it is ignored for
//     devices and read-only opens.
//   - Opening a read-only node for writing fails with EROFS, as does
//     creating in a read-only directory.
//   - A character device with no driver attached gives ENXIO.
//   - Access mode 3 (O_WRONLY|O_RDWR) is EINVAL.
func (fs *FS) Open(path string, flags int, perm uint32) (*File, Errno) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.open(path, flags, perm)
}

func (fs *FS) open(path string, flags int, perm uint32) (*File, Errno) {
	if flags&O_PATH != 0 {
		flags &= O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC
	}
	acc := flags & O_ACCMODE
	if acc == O_ACCMODE {
		return nil, EINVAL
	}
	creat := flags&O_CREAT != 0
	excl := creat && flags&O_EXCL != 0
	if creat && flags&O_DIRECTORY != 0 {
		return nil, EINVAL
	}
	follow := flags&O_NOFOLLOW == 0 && !excl
	l, e := fs.resolve(path, follow, true)
	if e != ESUCCESS {
		return nil, e
	}
	n := l.node
	if n == nil {
		switch {
		case !creat:
			return nil, ENOENT
		case l.trailing:
			return nil, EISDIR
		case l.parent.readOnly:
			return nil, EROFS
		}
		var e Errno
		if n, e = fs.newNode(S_IFREG | perm&PermMask); e != ESUCCESS {
			return nil, e
		}
		fs.link(l.parent, l.name, n)
	} else {
		writing := acc != O_RDONLY && flags&O_PATH == 0
		switch {
		case excl:
			return nil, EEXIST
		case n.isLink() && flags&O_PATH == 0:
			return nil, ELOOP
		case flags&O_DIRECTORY != 0 && !n.isDir():
			return nil, ENOTDIR
		case n.isDir() && (writing || creat):
			return nil, EISDIR
		case writing && n.readOnly:
			return nil, EROFS
		case n.isChr() && n.dev == nil && flags&O_PATH == 0:
			return nil, ENXIO
		}
		if writing && flags&O_TRUNC != 0 && n.isReg() {
			fs.resize(n, 0)
			now := fs.now()
			n.mtime, n.ctime = now, now
		}
	}
	n.opens++
	return &File{fs: fs, n: n, path: path, flags: flags}, ESUCCESS
}

// Reopen opens the node with inode number st.Ino again, restoring the
// flags and offsets recorded by File.State. It is meant for rebuilding a
// descriptor table after Restore; the node must still exist (ENOENT
// otherwise: unlinked-but-open files are not part of a snapshot). No
// permission, truncation or creation logic runs.
func (fs *FS) Reopen(st FileState) (*File, Errno) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := fs.inodes[st.Ino]
	if n == nil {
		return nil, ENOENT
	}
	if st.Pos < 0 || st.DirPos < 0 || st.Flags&O_ACCMODE == O_ACCMODE {
		return nil, EINVAL
	}
	n.opens++
	return &File{fs: fs, n: n, path: st.Path, flags: st.Flags, pos: st.Pos, dirPos: st.DirPos}, ESUCCESS
}

func (fs *FS) close(f *File) {
	if f.closed {
		return
	}
	f.closed = true
	f.dirList = nil
	f.n.opens--
	fs.release(f.n)
}

// Close closes the file description; the second Close gives EBADF. The
// node is freed once it is unlinked and no File refers to it.
func (f *File) Close() Errno {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return EBADF
	}
	f.fs.close(f)
	return ESUCCESS
}

func (f *File) readable() bool {
	return f.flags&O_PATH == 0 && f.flags&O_ACCMODE != O_WRONLY
}

func (f *File) writable() bool {
	return f.flags&O_PATH == 0 && f.flags&O_ACCMODE != O_RDONLY
}

// Read reads from the current offset and advances it. It returns 0 at end
// of file. EBADF if not open for reading, EISDIR on a directory. On a
// device it calls Device.Read without holding the FS lock.
func (f *File) Read(p []byte) (int, Errno) {
	fs := f.fs
	fs.mu.Lock()
	if f.closed || !f.readable() {
		fs.mu.Unlock()
		return 0, EBADF
	}
	n := f.n
	switch {
	case n.isChr():
		dev := n.dev
		fs.mu.Unlock()
		if dev == nil {
			return 0, ENXIO
		}
		return dev.Read(p)
	case n.isDir():
		fs.mu.Unlock()
		return 0, EISDIR
	case !n.isReg():
		fs.mu.Unlock()
		return 0, EINVAL
	}
	k := readAt(n, p, f.pos)
	f.pos += int64(k)
	fs.mu.Unlock()
	return k, ESUCCESS
}

func readAt(n *node, p []byte, off int64) int {
	if off >= int64(len(n.data)) {
		return 0
	}
	return copy(p, n.data[off:])
}

// Pread reads at offset off without moving the file offset: ESPIPE on a
// device, EINVAL for a negative offset.
func (f *File) Pread(p []byte, off int64) (int, Errno) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if e := f.positional(off, f.readable()); e != ESUCCESS {
		return 0, e
	}
	return readAt(f.n, p, off), ESUCCESS
}

// positional checks the preconditions shared by Pread and Pwrite.
func (f *File) positional(off int64, allowed bool) Errno {
	switch {
	case f.closed || !allowed:
		return EBADF
	case f.n.isDir():
		return EISDIR
	case !f.n.isReg():
		return ESPIPE
	case off < 0:
		return EINVAL
	}
	return ESUCCESS
}

// Write writes at the current offset (at the end of file with O_APPEND)
// and advances it. EBADF if not open for writing, EROFS if the node was
// made read-only, EFBIG beyond MaxFileSize, ENOSPC if the quota is full. If
// only part of p fits in the quota, that part is written and its length
// returned without error, as on a full disk. On a device it calls
// Device.Write without holding the FS lock.
func (f *File) Write(p []byte) (int, Errno) {
	fs := f.fs
	fs.mu.Lock()
	if f.closed || !f.writable() {
		fs.mu.Unlock()
		return 0, EBADF
	}
	n := f.n
	switch {
	case n.isChr():
		dev := n.dev
		fs.mu.Unlock()
		if dev == nil {
			return 0, ENXIO
		}
		return dev.Write(p)
	case n.isDir():
		fs.mu.Unlock()
		return 0, EISDIR
	case !n.isReg():
		fs.mu.Unlock()
		return 0, EINVAL
	}
	if f.flags&O_APPEND != 0 {
		f.pos = int64(len(n.data))
	}
	k, e := fs.writeAt(n, p, f.pos)
	f.pos += int64(k)
	fs.mu.Unlock()
	return k, e
}

// Pwrite writes at offset off without moving the file offset (O_APPEND is
// ignored, as POSIX specifies). Errors as for Write, plus ESPIPE on a
// device and EINVAL for a negative offset.
func (f *File) Pwrite(p []byte, off int64) (int, Errno) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if e := f.positional(off, f.writable()); e != ESUCCESS {
		return 0, e
	}
	return f.fs.writeAt(f.n, p, off)
}

// writeAt writes p into the regular file n at off, growing it as needed.
func (fs *FS) writeAt(n *node, p []byte, off int64) (int, Errno) {
	if n.readOnly {
		return 0, EROFS
	}
	if off < 0 {
		return 0, EINVAL
	}
	if len(p) == 0 {
		return 0, ESUCCESS
	}
	if off >= MaxFileSize {
		return 0, EFBIG
	}
	if int64(len(p)) > MaxFileSize-off {
		p = p[:MaxFileSize-off]
	}
	end := off + int64(len(p))
	if size := int64(len(n.data)); end > size {
		if room := fs.room(); end-size > room {
			end = size + room
			if end <= off {
				return 0, ENOSPC
			}
			p = p[:end-off]
		}
		fs.resize(n, end)
	}
	k := copy(n.data[off:], p)
	now := fs.now()
	n.mtime, n.ctime = now, now
	return k, ESUCCESS
}

// Growth policy for file content: capacity doubles up to 8 MiB, then
// grows by half. (Past 8 MiB it grew by 8 MiB at a time, each step a copy
// of the whole file: 1 MiB writes took 3 s to make a 200 MiB file.)
const (
	minSlack  = 64        // smallest spare capacity added when a file grows
	halfSlack = 8 << 20   // the size past which the spare capacity is half the size
	maxSlack  = 512 << 20 // largest spare capacity kept beyond the size
)

// slackFor returns the spare capacity allowed for a file of the given size.
func slackFor(size int64) int64 {
	if size < halfSlack {
		return max(size, minSlack)
	}
	return min(size/2, maxSlack)
}

// resize sets the length of n's content, zero-filling growth and updating
// the quota counter. Capacity grows geometrically (amortised O(1) appends)
// but never exceeds size + slackFor(size), nor eats more than the remaining
// quota; shrinking well below the capacity reallocates.
func (fs *FS) resize(n *node, size int64) {
	old := int64(len(n.data))
	switch {
	case size > old:
		if size > int64(cap(n.data)) {
			slack := slackFor(size)
			if fs.limit > 0 {
				slack = min(slack, max(fs.room()-(size-old), 0))
			}
			nd := make([]byte, size, size+slack)
			copy(nd, n.data)
			n.data = nd
		} else {
			n.data = n.data[:size]
			clear(n.data[old:])
		}
	case size < old:
		n.data = n.data[:size]
		if int64(cap(n.data))-size > slackFor(size) {
			if size == 0 {
				n.data = nil
			} else {
				n.data = slices.Clip(slices.Clone(n.data))
			}
		}
	}
	if n.counted() {
		fs.used += size - old
	}
}

// Lseek sets the offset for the next Read or Write: SEEK_SET, SEEK_CUR or
// SEEK_END, returning the new offset. Seeking past the end is allowed (a
// later write leaves a zero-filled hole); a negative result is EINVAL. On a
// device it is ESPIPE. On a directory it moves the ReadDir cursor
// (SEEK_SET to a position, or SEEK_CUR, as telldir/seekdir/rewinddir do).
//
// It is not called Seek because go vet insists that a method of that name
// have io.Seeker's signature.
func (f *File) Lseek(off int64, whence int) (int64, Errno) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed || f.flags&O_PATH != 0 {
		return 0, EBADF
	}
	n := f.n
	var base int64
	switch {
	case n.isDir():
		switch whence {
		case SEEK_SET:
		case SEEK_CUR:
			base = f.dirPos
		default:
			return 0, EINVAL
		}
		np := base + off // base >= 0, so overflow shows as np < 0
		if np < 0 {
			return 0, EINVAL
		}
		f.setDirPos(np)
		return f.dirPos, ESUCCESS
	case !n.isReg():
		return 0, ESPIPE
	}
	switch whence {
	case SEEK_SET:
	case SEEK_CUR:
		base = f.pos
	case SEEK_END:
		base = int64(len(n.data))
	default:
		return 0, EINVAL
	}
	np := base + off // base >= 0, so overflow shows as np < 0
	if np < 0 {
		return 0, EINVAL
	}
	f.pos = np
	return np, ESUCCESS
}

// Stat returns the attributes of the open node (fstat), which works even
// after the node was unlinked (Nlink is then 0).
func (f *File) Stat() (Stat, Errno) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return Stat{}, EBADF
	}
	return f.n.stat(), ESUCCESS
}

// Truncate sets the size of the open regular file (ftruncate): EINVAL if
// the File is not open for writing or is not a regular file; otherwise as
// FS.Truncate. The offset does not move.
func (f *File) Truncate(size int64) Errno {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	switch {
	case f.closed || f.flags&O_PATH != 0:
		return EBADF
	case !f.writable():
		return EINVAL
	}
	return f.fs.truncate(f.n, size)
}

// Chmod sets the permission bits of the open node (fchmod). EBADF on an
// O_PATH File, as on Linux.
func (f *File) Chmod(mode uint32) Errno {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed || f.flags&O_PATH != 0 {
		return EBADF
	}
	return f.fs.chmod(f.n, mode)
}

// Utimens sets the times of the open node (futimens); see FS.Utimens.
// EBADF on an O_PATH File.
func (f *File) Utimens(atime, mtime int64) Errno {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed || f.flags&O_PATH != 0 {
		return EBADF
	}
	return f.fs.utimens(f.n, atime, mtime)
}

// ReadDir returns the directory entries from the cursor to the end and
// moves the cursor to the end. "." and ".." come first, then the entries
// sorted by name. Positions are indexes into that list, so DirEntry.Next
// of the i-th entry (from 0) is i+1.
//
// The list is captured when reading starts at position 0 (on the first
// call, and again after SetDirPos(0) or a rewind), and later calls resume in
// the captured list, so entries that exist throughout are returned exactly
// once even if the directory changes between calls; entries created or
// removed meanwhile may or may not show up, as POSIX allows.
//
// A caller that consumes only part of the result (getdents64 with a small
// buffer) must call SetDirPos with the Next of the last entry it consumed.
// ENOTDIR if the File is not a directory; a removed directory reads empty.
func (f *File) ReadDir() ([]DirEntry, Errno) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	switch {
	case f.closed || f.flags&O_PATH != 0:
		return nil, EBADF
	case !f.n.isDir():
		return nil, ENOTDIR
	}
	if f.dirList == nil {
		f.dirList = f.n.listDir()
	}
	if f.dirPos >= int64(len(f.dirList)) {
		return nil, ESUCCESS
	}
	out := slices.Clone(f.dirList[f.dirPos:])
	f.dirPos = int64(len(f.dirList))
	return out, ESUCCESS
}

// listDir builds the entry list of a directory: ".", "..", then sorted
// names. A removed directory has no entries, not even "." and "..".
func (n *node) listDir() []DirEntry {
	if n.nlink == 0 || n.parent == nil {
		return []DirEntry{}
	}
	names := make([]string, 0, len(n.children))
	for name := range n.children {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make([]DirEntry, 0, len(names)+2)
	out = append(out,
		DirEntry{Name: ".", Ino: n.ino, Type: DT_DIR, Next: 1},
		DirEntry{Name: "..", Ino: n.parent.ino, Type: DT_DIR, Next: 2})
	for _, name := range names {
		c := n.children[name]
		out = append(out, DirEntry{Name: name, Ino: c.ino, Type: c.dirType(), Next: int64(len(out) + 1)})
	}
	return out
}

// DirPos returns the directory read cursor (the value telldir reports).
func (f *File) DirPos() int64 {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return f.dirPos
}

// SetDirPos moves the directory read cursor, for resuming getdents64 or
// seekdir. Position 0 also discards the captured entry list, so the next
// ReadDir sees the directory's current content. EINVAL for a negative
// position, ENOTDIR if the File is not a directory.
func (f *File) SetDirPos(pos int64) Errno {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	switch {
	case f.closed || f.flags&O_PATH != 0:
		return EBADF
	case !f.n.isDir():
		return ENOTDIR
	case pos < 0:
		return EINVAL
	}
	f.setDirPos(pos)
	return ESUCCESS
}

func (f *File) setDirPos(pos int64) {
	if pos == 0 {
		f.dirList = nil
	}
	f.dirPos = pos
}

// Flags returns the open flags, including O_APPEND/O_NONBLOCK as last set
// by SetFlags (F_GETFL).
func (f *File) Flags() int {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return f.flags
}

// SetFlags changes the O_APPEND and O_NONBLOCK flags to those in flags,
// ignoring every other bit, as F_SETFL does.
func (f *File) SetFlags(flags int) Errno {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return EBADF
	}
	const settable = O_APPEND | O_NONBLOCK
	f.flags = f.flags&^settable | flags&settable
	return ESUCCESS
}

// Path returns the path the File was opened with (not updated by renames).
func (f *File) Path() string {
	return f.path
}

// RealPath returns the current canonical path of the open node, following
// renames; ENOENT once it has been unlinked. Useful for fchdir and
// readlink("/proc/self/fd/N").
func (f *File) RealPath() (string, Errno) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return "", EBADF
	}
	return f.fs.pathOf(f.n)
}

// Device returns the driver of a character device File, or nil for other
// files (and for a device whose driver is not attached). Callers use it for
// device-specific requests such as ioctl.
func (f *File) Device() Device {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed || !f.n.isChr() {
		return nil
	}
	return f.n.dev
}

// State captures the File's flags and offsets for FS.Reopen.
func (f *File) State() FileState {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return FileState{Ino: f.n.ino, Path: f.path, Flags: f.flags, Pos: f.pos, DirPos: f.dirPos}
}
