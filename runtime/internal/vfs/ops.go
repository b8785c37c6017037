package vfs

import "slices"

// Mkdir creates the directory path with permission bits perm (the caller
// applies the umask). It fails with EEXIST if the name exists, even as a
// dangling symlink, and with EROFS in a read-only directory.
func (fs *FS) Mkdir(path string, perm uint32) Errno {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.mkdir(path, perm)
}

func (fs *FS) mkdir(path string, perm uint32) Errno {
	l, e := fs.resolve(path, false, false)
	if e != ESUCCESS {
		return e
	}
	if l.node != nil {
		return EEXIST
	}
	if l.parent.readOnly {
		return EROFS
	}
	n, e := fs.newNode(S_IFDIR | perm&PermMask)
	if e != ESUCCESS {
		return e
	}
	fs.link(l.parent, l.name, n)
	return ESUCCESS
}

// MkdirAll creates path and any missing parents with permission bits perm.
// It succeeds if path already is a directory (or a symlink to one), and
// fails with ENOTDIR if a prefix is not a directory and with EEXIST if path
// itself exists as something else.
func (fs *FS) MkdirAll(path string, perm uint32) Errno {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.mkdirAll(path, perm)
}

func (fs *FS) mkdirAll(path string, perm uint32) Errno {
	if path == "" {
		return ENOENT
	}
	if len(path) >= PathMax {
		return ENAMETOOLONG
	}
	// Visit every prefix that ends at the end of a component.
	for i := 1; i <= len(path); i++ {
		if i < len(path) && (path[i] != '/' || path[i-1] == '/') {
			continue
		}
		prefix := path[:i]
		last := i == len(path) || len(splitPath(path[i:])) == 0
		l, e := fs.resolve(prefix, true, true)
		if e != ESUCCESS {
			return e
		}
		if l.node == nil {
			if e := fs.mkdir(prefix, perm); e != ESUCCESS {
				return e
			}
		} else if !l.node.isDir() {
			if last {
				return EEXIST
			}
			return ENOTDIR
		}
		if last {
			break
		}
	}
	return ESUCCESS
}

// WriteFile creates or truncates the regular file path and writes data to
// it, like open(O_WRONLY|O_CREAT|O_TRUNC) + write. perm applies only when
// the file is created. Parents must exist. If the data does not fit in the
// quota it fails with ENOSPC before changing anything. path must name (or
// create) a regular file: a device gives EINVAL.
func (fs *FS) WriteFile(path string, data []byte, perm uint32) Errno {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	l, e := fs.resolve(path, true, true)
	if e != ESUCCESS {
		return e
	}
	if l.node != nil {
		switch {
		case l.node.isDir():
			return EISDIR
		case !l.node.isReg():
			return EINVAL
		case l.node.readOnly:
			return EROFS
		}
		if l.node.isReg() && int64(len(data))-int64(len(l.node.data)) > fs.room() {
			return ENOSPC
		}
	} else if int64(len(data)) > fs.room() {
		return ENOSPC
	}
	f, e := fs.open(path, O_WRONLY|O_CREAT|O_TRUNC, perm)
	if e != ESUCCESS {
		return e
	}
	defer fs.close(f)
	_, e = fs.writeAt(f.n, data, 0)
	return e
}

// parentDir returns the lexical parent of an absolute path, for the
// host-side installers that create missing parents.
func parentDir(path string) string {
	i := len(path)
	for i > 0 && path[i-1] == '/' {
		i--
	}
	for i > 0 && path[i-1] != '/' {
		i--
	}
	if i == 0 {
		return "/"
	}
	return path[:i]
}

// installTarget creates the parents of path and resolves its final
// component without following it. Host-side installation ignores read-only
// flags.
func (fs *FS) installTarget(path string) (lookup, Errno) {
	if e := fs.mkdirAll(parentDir(path), 0o755); e != ESUCCESS {
		if e == EEXIST { // the parent exists but is not a directory
			e = ENOTDIR
		}
		return lookup{}, e
	}
	l, e := fs.resolve(path, false, false)
	if e != ESUCCESS {
		return lookup{}, e
	}
	if l.dot() || l.trailing {
		return lookup{}, EISDIR
	}
	return l, ESUCCESS
}

// AddFile installs a regular file at path on behalf of the host, creating
// missing parent directories (mode 0755) and replacing an existing
// non-directory (with a new inode). Read-only flags of the parents are
// ignored: this is how the host populates read-only trees.
//
// If readOnly is true the file gets mode 0444, its content is data itself
// (shared, not copied: the caller must not modify it afterwards), it is not
// counted against the quota, and every attempt to modify, truncate, chmod,
// rename or unlink it fails with EROFS. Otherwise data is copied, the file
// gets mode 0644 and the copy counts against the quota (ENOSPC if it does
// not fit).
func (fs *FS) AddFile(path string, data []byte, readOnly bool) Errno {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	l, e := fs.installTarget(path)
	if e != ESUCCESS {
		return e
	}
	if l.node != nil && l.node.isDir() {
		return EISDIR
	}
	if !readOnly {
		free := fs.room()
		if l.node != nil && l.node.counted() {
			free += int64(len(l.node.data))
		}
		if int64(len(data)) > free {
			return ENOSPC
		}
	}
	if int64(len(data)) > MaxFileSize {
		return EFBIG
	}
	if l.node != nil {
		fs.unlink(l.parent, l.name, l.node)
	}
	mode := uint32(S_IFREG | 0o644)
	if readOnly {
		mode = S_IFREG | 0o444
	}
	n, e := fs.newNode(mode)
	if e != ESUCCESS {
		return e
	}
	n.readOnly = readOnly
	if readOnly {
		n.data = data
	} else if len(data) > 0 {
		n.data = slices.Clip(slices.Clone(data))
		fs.used += int64(len(data))
	}
	fs.link(l.parent, l.name, n)
	return ESUCCESS
}

// AddDevice installs a character device at path on behalf of the host,
// creating missing parents (mode 0755). mode supplies the permission bits
// (type bits are ignored; the node is always S_IFCHR). If path already is a
// character device, dev and the permissions are re-attached to the existing
// node (same inode, open Files see the new driver): this is how devices are
// reconnected after Restore. Any other existing node gives EEXIST.
func (fs *FS) AddDevice(path string, dev Device, mode uint32) Errno {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	l, e := fs.installTarget(path)
	if e != ESUCCESS {
		return e
	}
	if n := l.node; n != nil {
		if !n.isChr() {
			return EEXIST
		}
		n.dev = dev
		n.mode = S_IFCHR | mode&PermMask
		n.ctime = fs.now()
		return ESUCCESS
	}
	n, e := fs.newNode(S_IFCHR | mode&PermMask)
	if e != ESUCCESS {
		return e
	}
	n.dev = dev
	n.rdev = makedev(1, fs.nextMinor)
	fs.nextMinor++
	fs.link(l.parent, l.name, n)
	return ESUCCESS
}

// makedev encodes a device number the way Linux's new_encode_dev does.
func makedev(major, minor uint64) uint64 {
	return minor&0xff | major<<8 | (minor&^0xff)<<12
}

// Stat returns the attributes of path, following symlinks.
func (fs *FS) Stat(path string) (Stat, Errno) {
	return fs.stat(path, true)
}

// Lstat returns the attributes of path without following a final symlink.
func (fs *FS) Lstat(path string) (Stat, Errno) {
	return fs.stat(path, false)
}

func (fs *FS) stat(path string, follow bool) (Stat, Errno) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	l, e := fs.resolve(path, follow, true)
	if e != ESUCCESS {
		return Stat{}, e
	}
	if l.node == nil {
		return Stat{}, ENOENT
	}
	return l.node.stat(), ESUCCESS
}

// Readlink returns the target of the symlink path; EINVAL if path is not a
// symlink.
func (fs *FS) Readlink(path string) (string, Errno) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	l, e := fs.resolve(path, false, true)
	if e != ESUCCESS {
		return "", e
	}
	if l.node == nil {
		return "", ENOENT
	}
	if !l.node.isLink() {
		return "", EINVAL
	}
	return l.node.target, ESUCCESS
}

// Symlink creates a symbolic link linkpath whose content is target (not
// checked; it may dangle). An empty target gives ENOENT, a target of
// PathMax bytes or more ENAMETOOLONG.
func (fs *FS) Symlink(target, linkpath string) Errno {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if target == "" {
		return ENOENT
	}
	if len(target) >= PathMax {
		return ENAMETOOLONG
	}
	l, e := fs.resolve(linkpath, false, false)
	if e != ESUCCESS {
		return e
	}
	if l.node != nil {
		return EEXIST
	}
	if l.trailing {
		return ENOENT
	}
	if l.parent.readOnly {
		return EROFS
	}
	n, e := fs.newNode(S_IFLNK | 0o777)
	if e != ESUCCESS {
		return e
	}
	n.target = target
	fs.link(l.parent, l.name, n)
	return ESUCCESS
}

// Unlink removes the name path, which must not be a directory (EISDIR). A
// symlink is removed, not its target. An open File keeps the content alive
// until it is closed.
func (fs *FS) Unlink(path string) Errno {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	l, e := fs.resolve(path, false, false)
	if e != ESUCCESS {
		return e
	}
	n := l.node
	switch {
	case n == nil:
		return ENOENT
	case n.isDir():
		return EISDIR
	case n.readOnly || l.parent.readOnly:
		return EROFS
	}
	fs.unlink(l.parent, l.name, n)
	return ESUCCESS
}

// Rmdir removes the empty directory path: ENOTDIR if it is not a directory,
// ENOTEMPTY if it has entries, EBUSY for the root, EINVAL if the path ends
// in ".".
func (fs *FS) Rmdir(path string) Errno {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	l, e := fs.resolve(path, false, false)
	if e != ESUCCESS {
		return e
	}
	n := l.node
	switch {
	case n == nil:
		return ENOENT
	case !n.isDir():
		return ENOTDIR
	case n == fs.root || l.name == "":
		return EBUSY
	case l.name == ".":
		return EINVAL
	case l.name == "..":
		return ENOTEMPTY
	case len(n.children) > 0:
		return ENOTEMPTY
	case n.readOnly || l.parent.readOnly:
		return EROFS
	}
	fs.unlink(l.parent, l.name, n)
	return ESUCCESS
}

// Rename moves oldpath to newpath with POSIX semantics: an existing
// newpath is atomically replaced if it is a non-directory (and oldpath is
// not a directory: else ENOTDIR) or an empty directory (and oldpath is a
// directory: else EISDIR; non-empty gives ENOTEMPTY). Moving a directory
// into itself or a descendant gives EINVAL; renaming "/", "." or ".." gives
// EBUSY. If both names refer to the same node nothing happens. There is a
// single device, so EXDEV never occurs.
func (fs *FS) Rename(oldpath, newpath string) Errno {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	lo, e := fs.resolve(oldpath, false, false)
	if e != ESUCCESS {
		return e
	}
	src := lo.node
	if src == nil {
		return ENOENT
	}
	if lo.dot() {
		return EBUSY
	}
	ln, e := fs.resolve(newpath, false, false)
	if e != ESUCCESS {
		return e
	}
	dst := ln.node
	if ln.dot() {
		return EBUSY
	}
	if ln.trailing && !src.isDir() {
		return ENOTDIR
	}
	if dst == src {
		return ESUCCESS
	}
	if src.isDir() {
		for p := ln.parent; p != nil; p = p.parent {
			if p == src {
				return EINVAL
			}
			if p == fs.root {
				break
			}
		}
		if dst != nil {
			if !dst.isDir() {
				return ENOTDIR
			}
			if len(dst.children) > 0 {
				return ENOTEMPTY
			}
		}
	} else if dst != nil && dst.isDir() {
		return EISDIR
	}
	if src.readOnly || lo.parent.readOnly || ln.parent.readOnly || (dst != nil && dst.readOnly) {
		return EROFS
	}
	if dst != nil {
		fs.unlink(ln.parent, ln.name, dst)
	}
	// Move src without touching its own link count.
	now := fs.now()
	delete(lo.parent.children, lo.name)
	ln.parent.children[ln.name] = src
	if src.isDir() {
		lo.parent.nlink--
		ln.parent.nlink++
	}
	src.parent, src.name = ln.parent, ln.name
	src.ctime = now
	lo.parent.mtime, lo.parent.ctime = now, now
	ln.parent.mtime, ln.parent.ctime = now, now
	return ESUCCESS
}

// Chmod sets the permission bits (mode & 07777) of path, following
// symlinks.
func (fs *FS) Chmod(path string, mode uint32) Errno {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n, e := fs.existing(path, true)
	if e != ESUCCESS {
		return e
	}
	return fs.chmod(n, mode)
}

func (fs *FS) chmod(n *node, mode uint32) Errno {
	if n.readOnly {
		return EROFS
	}
	n.mode = n.typ() | mode&PermMask
	n.ctime = fs.now()
	return ESUCCESS
}

// Utimens sets the access and modification times of path (ns since the
// epoch). Either may be UtimeNow or UtimeOmit. follow says whether a final
// symlink is followed (false = AT_SYMLINK_NOFOLLOW). The change time is set
// to now unless both are UtimeOmit.
func (fs *FS) Utimens(path string, atime, mtime int64, follow bool) Errno {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n, e := fs.existing(path, follow)
	if e != ESUCCESS {
		return e
	}
	return fs.utimens(n, atime, mtime)
}

func (fs *FS) utimens(n *node, atime, mtime int64) Errno {
	if atime == UtimeOmit && mtime == UtimeOmit {
		return ESUCCESS
	}
	if n.readOnly {
		return EROFS
	}
	now := fs.now()
	switch atime {
	case UtimeNow:
		n.atime = now
	case UtimeOmit:
	default:
		n.atime = atime
	}
	switch mtime {
	case UtimeNow:
		n.mtime = now
	case UtimeOmit:
	default:
		n.mtime = mtime
	}
	n.ctime = now
	return ESUCCESS
}

// Truncate sets the size of the regular file path, zero-filling any
// growth: EISDIR for a directory, EINVAL for other non-regular files or a
// negative size, EFBIG beyond MaxFileSize, ENOSPC beyond the quota, EROFS
// for a read-only file.
func (fs *FS) Truncate(path string, size int64) Errno {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n, e := fs.existing(path, true)
	if e != ESUCCESS {
		return e
	}
	return fs.truncate(n, size)
}

func (fs *FS) truncate(n *node, size int64) Errno {
	switch {
	case n.isDir():
		return EISDIR
	case !n.isReg() || size < 0:
		return EINVAL
	case n.readOnly:
		return EROFS
	case size > MaxFileSize:
		return EFBIG
	case size-int64(len(n.data)) > fs.room():
		return ENOSPC
	}
	fs.resize(n, size)
	now := fs.now()
	n.mtime, n.ctime = now, now
	return ESUCCESS
}

// Access checks whether path exists (F_OK) and may be read (R_OK), written
// (W_OK) or executed/searched (X_OK). The guest runs as root, so only two
// checks can fail: W_OK on a read-only node (EROFS) and X_OK on a
// non-directory with no execute bit (EACCES). Unknown mode bits give EINVAL.
func (fs *FS) Access(path string, mode int) Errno {
	if mode&^(R_OK|W_OK|X_OK) != 0 {
		return EINVAL
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	l, e := fs.resolve(path, true, true)
	if e != ESUCCESS {
		return e
	}
	n := l.node
	switch {
	case n == nil:
		return ENOENT
	case mode&W_OK != 0 && n.readOnly:
		return EROFS
	case mode&X_OK != 0 && !n.isDir() && n.mode&0o111 == 0:
		return EACCES
	}
	return ESUCCESS
}

// SetReadOnly sets or clears the read-only flag of path (following
// symlinks) on behalf of the host. A read-only node can not be modified,
// chmod-ed, renamed or unlinked (EROFS), and a read-only directory accepts
// no new or removed entries. Making a read-only regular file writable copies
// its content (which may have been shared with the host by AddFile) and
// counts it against the quota (ENOSPC if it does not fit); making a
// writable file read-only stops counting it.
func (fs *FS) SetReadOnly(path string, readOnly bool) Errno {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	l, e := fs.resolve(path, true, true)
	if e != ESUCCESS {
		return e
	}
	n := l.node
	if n == nil {
		return ENOENT
	}
	if n.readOnly == readOnly {
		return ESUCCESS
	}
	if n.isReg() {
		size := int64(len(n.data))
		if readOnly {
			fs.used -= size
		} else {
			if size > fs.room() {
				return ENOSPC
			}
			n.data = slices.Clip(slices.Clone(n.data))
			fs.used += size
		}
	}
	n.readOnly = readOnly
	n.ctime = fs.now()
	return ESUCCESS
}

// RealPath returns the canonical absolute path of path: every symlink
// followed, no ".", ".." or repeated slashes. Useful for chdir, which must
// remember the directory it entered.
func (fs *FS) RealPath(path string) (string, Errno) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n, e := fs.existing(path, true)
	if e != ESUCCESS {
		return "", e
	}
	return fs.pathOf(n)
}

// existing resolves path to a node that must exist (ENOENT otherwise);
// follow says whether a final symlink is followed. The caller holds fs.mu.
func (fs *FS) existing(path string, follow bool) (*node, Errno) {
	l, e := fs.resolve(path, follow, true)
	if e != ESUCCESS {
		return nil, e
	}
	if l.node == nil {
		return nil, ENOENT
	}
	return l.node, ESUCCESS
}
