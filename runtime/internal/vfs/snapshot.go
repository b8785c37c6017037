package vfs

import (
	"bytes"
	"encoding/gob"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// snapshotVersion identifies the encoding written by Snapshot.
const snapshotVersion = 1

// snapshotImage is the gob-encoded form of an FS.
type snapshotImage struct {
	Version   int
	NextIno   uint64
	NextMinor uint64
	Limit     int64
	NodeLimit int
	Nodes     []snapshotNode // breadth-first from the root: parents precede children
}

// snapshotNode is one linked node of a snapshotImage.
type snapshotNode struct {
	Ino      uint64
	Parent   uint64 // equal to Ino for the root
	Name     string // "" for the root
	Mode     uint32
	Atime    int64
	Mtime    int64
	Ctime    int64
	ReadOnly bool
	Data     []byte // regular files
	Target   string // symlinks
	Rdev     uint64 // character devices
}

// Snapshot serialises the whole tree with encoding/gob: every linked node
// with its inode number, mode, times, read-only flag and content (including
// read-only content shared by AddFile, which is copied into the snapshot),
// plus the quota and node limit. The output is deterministic for a given
// state.
//
// Not serialised: the clock, device drivers (a device node is kept with its
// mode and Rdev but comes back detached; re-attach drivers with AddDevice
// on the same path), open Files (capture them with File.State and re-open
// them with Reopen), and unlinked files that are still open.
func (fs *FS) Snapshot() ([]byte, error) {
	fs.mu.Lock()
	img := snapshotImage{
		Version:   snapshotVersion,
		NextIno:   fs.nextIno,
		NextMinor: fs.nextMinor,
		Limit:     fs.limit,
		NodeLimit: fs.nodeLimit,
	}
	queue := []*node{fs.root}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		sn := snapshotNode{
			Ino:      n.ino,
			Parent:   n.parent.ino,
			Name:     n.name,
			Mode:     n.mode,
			Atime:    n.atime,
			Mtime:    n.mtime,
			Ctime:    n.ctime,
			ReadOnly: n.readOnly,
			Target:   n.target,
			Rdev:     n.rdev,
		}
		if n.isReg() {
			sn.Data = n.data
		}
		img.Nodes = append(img.Nodes, sn)
		if n.isDir() {
			names := make([]string, 0, len(n.children))
			for name := range n.children {
				names = append(names, name)
			}
			slices.Sort(names)
			for _, name := range names {
				queue = append(queue, n.children[name])
			}
		}
	}
	var buf bytes.Buffer
	err := gob.NewEncoder(&buf).Encode(&img)
	fs.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("vfs: snapshot: %w", err)
	}
	return buf.Bytes(), nil
}

// Restore rebuilds an FS from the output of Snapshot. The result uses the
// host's wall clock (see SetClock), has no open Files, and its device nodes
// have no driver until AddDevice re-attaches one. Malformed input gives an
// error, never a panic.
func Restore(data []byte) (*FS, error) {
	var img snapshotImage
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(&img); err != nil {
		return nil, fmt.Errorf("vfs: restore: %w", err)
	}
	fs, err := restoreImage(&img)
	if err != nil {
		return nil, fmt.Errorf("vfs: restore: %w", err)
	}
	return fs, nil
}

func restoreImage(img *snapshotImage) (*FS, error) {
	if img.Version != snapshotVersion {
		return nil, fmt.Errorf("unsupported snapshot version %d", img.Version)
	}
	if len(img.Nodes) == 0 {
		return nil, errors.New("no root directory")
	}
	fs := &FS{
		clock:     wallClock,
		nextIno:   img.NextIno,
		nextMinor: img.NextMinor,
		limit:     max(img.Limit, 0),
		nodeLimit: max(img.NodeLimit, 0),
		inodes:    make(map[uint64]*node, len(img.Nodes)),
	}
	for i := range img.Nodes {
		sn := &img.Nodes[i]
		if sn.Ino == 0 || fs.inodes[sn.Ino] != nil {
			return nil, fmt.Errorf("node %d: bad or duplicate inode number %d", i, sn.Ino)
		}
		n := &node{
			ino:      sn.Ino,
			mode:     sn.Mode,
			atime:    sn.Atime,
			mtime:    sn.Mtime,
			ctime:    sn.Ctime,
			readOnly: sn.ReadOnly,
		}
		switch n.typ() {
		case S_IFREG:
			if int64(len(sn.Data)) > MaxFileSize {
				return nil, fmt.Errorf("node %d: file too large", i)
			}
			n.data = sn.Data
		case S_IFDIR:
			n.children = make(map[string]*node)
			n.nlink = 2
		case S_IFLNK:
			if sn.Target == "" || len(sn.Target) >= PathMax {
				return nil, fmt.Errorf("node %d: bad symlink target", i)
			}
			n.target = sn.Target
		case S_IFCHR:
			n.rdev = sn.Rdev
		default:
			return nil, fmt.Errorf("node %d: unsupported mode %#o", i, sn.Mode)
		}
		if i == 0 {
			if !n.isDir() || sn.Parent != sn.Ino || sn.Name != "" {
				return nil, errors.New("first node is not the root directory")
			}
			n.parent = n
			fs.root = n
		} else {
			parent := fs.inodes[sn.Parent]
			switch {
			case parent == nil || !parent.isDir():
				return nil, fmt.Errorf("node %d: parent %d is not an earlier directory", i, sn.Parent)
			case !validName(sn.Name):
				return nil, fmt.Errorf("node %d: invalid name %q", i, sn.Name)
			case parent.children[sn.Name] != nil:
				return nil, fmt.Errorf("node %d: duplicate name %q", i, sn.Name)
			}
			parent.children[sn.Name] = n
			n.parent, n.name = parent, sn.Name
			if n.isDir() {
				parent.nlink++
			} else {
				n.nlink = 1
			}
		}
		fs.inodes[n.ino] = n
		if n.counted() {
			fs.used += int64(len(n.data))
		}
		fs.nextIno = max(fs.nextIno, n.ino+1)
	}
	fs.nextMinor = max(fs.nextMinor, 1)
	return fs, nil
}

// validName reports whether s can be a directory entry name.
func validName(s string) bool {
	return s != "" && s != "." && s != ".." && len(s) <= NameMax &&
		!strings.ContainsAny(s, "/\x00")
}
