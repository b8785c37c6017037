package vfs

import (
	"strings"
	"sync"
	"time"
)

// FS is an in-memory POSIX-like file system. The zero value is not usable;
// create one with New or Restore.
//
// All methods are safe for concurrent use: one mutex guards the whole tree
// and every File opened from it. Device I/O runs without the mutex held, so
// a blocking device does not stall other callers.
type FS struct {
	mu        sync.Mutex
	clock     func() int64
	root      *node
	nextIno   uint64
	nextMinor uint64
	inodes    map[uint64]*node // live nodes: linked, or unlinked but open
	used      int64            // bytes of content of writable regular files
	limit     int64            // quota for used; 0 = unlimited
	nodeLimit int              // maximum len(inodes); 0 = unlimited
}

func wallClock() int64 { return time.Now().UnixNano() }

// New returns a file system holding only an empty root directory "/"
// (mode 0755). clock supplies timestamps in nanoseconds since the epoch; nil
// means the host's wall clock.
func New(clock func() int64) *FS {
	fs := &FS{nextIno: 1, nextMinor: 1, inodes: make(map[uint64]*node)}
	fs.SetClock(clock)
	now := fs.clock()
	root := &node{
		ino:      fs.nextIno,
		mode:     S_IFDIR | 0o755,
		nlink:    2,
		atime:    now,
		mtime:    now,
		ctime:    now,
		children: make(map[string]*node),
	}
	fs.nextIno++
	root.parent = root
	fs.root = root
	fs.inodes[root.ino] = root
	return fs
}

// SetClock replaces the source of timestamps; nil means the host's wall
// clock. A restored FS starts with the wall clock.
func (fs *FS) SetClock(clock func() int64) {
	if clock == nil {
		clock = wallClock
	}
	fs.mu.Lock()
	fs.clock = clock
	fs.mu.Unlock()
}

// SetLimit sets the quota: the total bytes of content of writable regular
// files (read-only files added with AddFile are not counted). Writes that
// would exceed it fail with ENOSPC (or are cut short, as on a full disk).
// Zero means unlimited. Lowering the limit below the current usage deletes
// nothing; it only makes further growth fail.
func (fs *FS) SetLimit(maxBytes int64) {
	if maxBytes < 0 {
		maxBytes = 0
	}
	fs.mu.Lock()
	fs.limit = maxBytes
	fs.mu.Unlock()
}

// SetNodeLimit caps the number of live nodes (files, directories, symlinks,
// devices, including the root and unlinked files still open). Creating a
// node beyond it fails with ENOSPC, as when a disk runs out of inodes. Zero
// means unlimited.
func (fs *FS) SetNodeLimit(maxNodes int) {
	if maxNodes < 0 {
		maxNodes = 0
	}
	fs.mu.Lock()
	fs.nodeLimit = maxNodes
	fs.mu.Unlock()
}

// Usage returns the bytes currently counted against the quota and the
// number of live nodes.
func (fs *FS) Usage() (bytes int64, nodes int) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.used, len(fs.inodes)
}

func (fs *FS) now() int64 { return fs.clock() }

// room returns how many more bytes of writable content fit under the quota.
func (fs *FS) room() int64 {
	if fs.limit == 0 {
		return MaxFileSize * 4 // effectively unlimited; avoids overflow
	}
	if r := fs.limit - fs.used; r > 0 {
		return r
	}
	return 0
}

// newNode allocates and registers an unlinked node of the given mode.
func (fs *FS) newNode(mode uint32) (*node, Errno) {
	if fs.nodeLimit > 0 && len(fs.inodes) >= fs.nodeLimit {
		return nil, ENOSPC
	}
	now := fs.now()
	n := &node{ino: fs.nextIno, mode: mode, atime: now, mtime: now, ctime: now}
	fs.nextIno++
	if n.isDir() {
		n.children = make(map[string]*node)
	}
	fs.inodes[n.ino] = n
	return n, ESUCCESS
}

// link enters n in dir under name.
func (fs *FS) link(dir *node, name string, n *node) {
	now := fs.now()
	dir.children[name] = n
	n.parent, n.name = dir, name
	if n.isDir() {
		n.nlink = 2
		dir.nlink++
	} else {
		n.nlink = 1
	}
	dir.mtime, dir.ctime = now, now
}

// unlink removes the entry name (which is n) from dir and frees n unless it
// is still open.
func (fs *FS) unlink(dir *node, name string, n *node) {
	now := fs.now()
	delete(dir.children, name)
	if n.isDir() {
		dir.nlink--
	}
	n.nlink = 0
	n.parent, n.name = nil, ""
	n.ctime = now
	dir.mtime, dir.ctime = now, now
	fs.release(n)
}

// release frees a node that is neither linked nor open.
func (fs *FS) release(n *node) {
	if n.nlink != 0 || n.opens != 0 {
		return
	}
	if n.counted() {
		fs.used -= int64(len(n.data))
	}
	delete(fs.inodes, n.ino)
	n.data, n.children, n.dev = nil, nil, nil
}

// lookup is the result of resolving a path: the directory that holds (or
// would hold) the final component, its name, and the node if it exists.
type lookup struct {
	parent   *node
	name     string // "" for the root, or "." / ".." when the path ends so
	node     *node
	trailing bool // the path (after symlink expansion) ends with "/"
}

// dot reports whether the final component is the root, "." or "..": such a
// name can not be created, removed or renamed.
func (l *lookup) dot() bool { return l.name == "" || l.name == "." || l.name == ".." }

// splitPath returns the non-empty components of p.
func splitPath(p string) []string {
	comps := make([]string, 0, strings.Count(p, "/")+1)
	for p != "" {
		i := strings.IndexByte(p, '/')
		if i < 0 {
			comps = append(comps, p)
			break
		}
		if i > 0 {
			comps = append(comps, p[:i])
		}
		p = p[i+1:]
	}
	return comps
}

// resolve walks path from the root. follow says whether a final symlink is
// followed; slashFollow says whether a trailing slash forces following it
// (POSIX pathname resolution; off for unlink, rmdir, rename and mkdir, which
// then see the link itself and fail with ENOTDIR). A missing final component
// is not an error: the result then has node == nil.
func (fs *FS) resolve(path string, follow, slashFollow bool) (lookup, Errno) {
	if path == "" {
		return lookup{}, ENOENT
	}
	if len(path) >= PathMax {
		return lookup{}, ENAMETOOLONG
	}
	if strings.IndexByte(path, 0) >= 0 {
		return lookup{}, EINVAL
	}
	trailing := path[len(path)-1] == '/'
	comps := splitPath(path)
	cur := fs.root
	links := 0
	for i := 0; i < len(comps); i++ {
		c := comps[i]
		last := i == len(comps)-1
		if !cur.isDir() {
			return lookup{}, ENOTDIR
		}
		if len(c) > NameMax {
			return lookup{}, ENAMETOOLONG
		}
		var child *node
		switch c {
		case ".":
			child = cur
		case "..":
			child = cur.parent
		default:
			child = cur.children[c]
		}
		if child == nil {
			if !last {
				return lookup{}, ENOENT
			}
			return lookup{parent: cur, name: c, trailing: trailing}, ESUCCESS
		}
		if child.isLink() && (!last || follow || (trailing && slashFollow)) {
			links++
			if links > MaxSymlinks {
				return lookup{}, ELOOP
			}
			t := child.target
			if t == "" {
				return lookup{}, ENOENT
			}
			if last && t[len(t)-1] == '/' {
				trailing = true
			}
			if t[0] == '/' {
				cur = fs.root
			}
			comps = append(splitPath(t), comps[i+1:]...)
			i = -1
			continue
		}
		if last {
			if trailing && !child.isDir() {
				return lookup{}, ENOTDIR
			}
			return lookup{parent: cur, name: c, node: child, trailing: trailing}, ESUCCESS
		}
		cur = child
	}
	// No components left: the path (or the last symlink) named the root, or
	// cur after a symlink whose target had no components.
	return lookup{parent: cur, name: "", node: cur, trailing: trailing}, ESUCCESS
}

// pathOf returns the absolute path of a linked node.
func (fs *FS) pathOf(n *node) (string, Errno) {
	if n == fs.root {
		return "/", ESUCCESS
	}
	var parts []string
	for ; n != fs.root; n = n.parent {
		if n == nil || n.nlink == 0 || len(parts) > PathMax {
			return "", ENOENT
		}
		parts = append(parts, n.name)
	}
	var b strings.Builder
	for i := len(parts) - 1; i >= 0; i-- {
		b.WriteByte('/')
		b.WriteString(parts[i])
	}
	return b.String(), ESUCCESS
}

// Join resolves a possibly relative guest path against the working
// directory cwd (an absolute path). It only concatenates: "." and ".." are
// left for the FS to resolve, because lexical cleaning is wrong in the
// presence of symlinks. An absolute path is returned unchanged; an empty
// path stays empty (and so fails with ENOENT), as POSIX requires.
func Join(cwd, path string) string {
	if path == "" || path[0] == '/' {
		return path
	}
	if cwd == "" {
		cwd = "/"
	}
	if cwd[len(cwd)-1] == '/' {
		return cwd + path
	}
	return cwd + "/" + path
}
