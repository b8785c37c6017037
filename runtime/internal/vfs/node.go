package vfs

// node is one inode. Exactly one of data, children, target, dev is
// meaningful, according to the type bits of mode. Directories and other
// nodes have a single name (no hard links), recorded in parent and name
// while the node is linked.
type node struct {
	ino                 uint64
	mode                uint32
	nlink               uint32
	atime, mtime, ctime int64
	readOnly            bool

	data     []byte           // S_IFREG content; shared with the caller if readOnly
	children map[string]*node // S_IFDIR entries, without "." and ".."
	target   string           // S_IFLNK target
	dev      Device           // S_IFCHR driver; nil until attached
	rdev     uint64           // S_IFCHR device number

	parent *node  // containing directory while linked; the root is its own parent
	name   string // name in parent while linked
	opens  int    // number of open File descriptions
}

func (n *node) typ() uint32  { return n.mode & S_IFMT }
func (n *node) isDir() bool  { return n.typ() == S_IFDIR }
func (n *node) isReg() bool  { return n.typ() == S_IFREG }
func (n *node) isLink() bool { return n.typ() == S_IFLNK }
func (n *node) isChr() bool  { return n.typ() == S_IFCHR }

// counted reports whether the node's content counts against the quota.
func (n *node) counted() bool { return n.isReg() && !n.readOnly }

func (n *node) size() int64 {
	switch n.typ() {
	case S_IFREG:
		return int64(len(n.data))
	case S_IFDIR:
		return BlockSize
	case S_IFLNK:
		return int64(len(n.target))
	}
	return 0
}

func (n *node) stat() Stat {
	st := Stat{
		Dev:     DevID,
		Ino:     n.ino,
		Mode:    n.mode,
		Nlink:   n.nlink,
		Rdev:    n.rdev,
		Size:    n.size(),
		Blksize: BlockSize,
		Atime:   n.atime,
		Mtime:   n.mtime,
		Ctime:   n.ctime,
	}
	if n.isReg() || n.isDir() {
		st.Blocks = (st.Size + 511) / 512
	}
	return st
}

// dirType returns the d_type of the node.
func (n *node) dirType() uint8 {
	switch n.typ() {
	case S_IFREG:
		return DT_REG
	case S_IFDIR:
		return DT_DIR
	case S_IFLNK:
		return DT_LNK
	case S_IFCHR:
		return DT_CHR
	case S_IFIFO:
		return DT_FIFO
	case S_IFSOCK:
		return DT_SOCK
	case S_IFBLK:
		return DT_BLK
	}
	return DT_UNKNOWN
}

// Stat describes a node, with the fields of struct stat.
type Stat struct {
	Dev     uint64 // Device of the file system: always DevID.
	Ino     uint64 // Inode number, unique within the FS.
	Mode    uint32 // Type bits (S_IF*) and permission bits.
	Nlink   uint32 // Link count: 0 for an unlinked open file, 2+subdirectories for a directory.
	UID     uint32 // Owner: always 0.
	GID     uint32 // Group: always 0.
	Rdev    uint64 // Device number of a character device, else 0.
	Size    int64  // Bytes of content; BlockSize for a directory; target length for a symlink.
	Blksize int32  // Preferred I/O size: BlockSize.
	Blocks  int64  // Number of 512-byte blocks.
	Atime   int64  // Last access, ns since the epoch.
	Mtime   int64  // Last modification, ns since the epoch.
	Ctime   int64  // Last status change, ns since the epoch.
}

// DirEntry is one directory entry as returned by File.ReadDir.
type DirEntry struct {
	Name string // Entry name; "." and ".." come first.
	Ino  uint64 // Inode number of the entry.
	Type uint8  // d_type: DT_DIR, DT_REG, DT_LNK, DT_CHR, ...
	// Next is the directory position just after this entry (d_off): pass it
	// to File.SetDirPos to resume reading after this entry.
	Next int64
}
