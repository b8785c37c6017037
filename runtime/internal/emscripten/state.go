package emscripten

import (
	"fmt"

	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/vfs"
)

// State is the part of a Host that a booted guest depends on beyond its
// linear memory: its open descriptors, working directory and umask. A
// boot snapshot records it, so that a Host built from the same Config can
// be put back in the same state for a restored memory image.
type State struct {
	Cwd   string
	Umask uint32
	Files []OpenFile
}

// OpenFile is a descriptor above stdio, open on a file system path.
type OpenFile struct {
	FD      int32
	Path    string
	Flags   int
	Offset  int64
	Cloexec bool
}

// State returns the Host's state. It fails when a descriptor cannot be
// reopened by path (a pipe, a socket, a descriptor shared by dup, stdio
// replaced), since such a state cannot be recreated.
func (h *Host) State() (State, error) {
	st := State{Cwd: h.cwd, Umask: h.umask}
	seen := map[*description]bool{}
	for fd, e := range h.fds.fds {
		if e == nil {
			continue
		}
		if fd <= 2 {
			if e.d.path != "/dev/std"+[]string{"in", "out", "err"}[fd] {
				return State{}, fmt.Errorf("emscripten: descriptor %d is not stdio any more", fd)
			}
			continue
		}
		if seen[e.d] || e.d.refs != 1 {
			return State{}, fmt.Errorf("emscripten: descriptor %d is shared", fd)
		}
		seen[e.d] = true
		f, ok := e.d.s.(*vfs.File)
		if !ok {
			return State{}, fmt.Errorf("emscripten: descriptor %d (%s) is not a file", fd, e.d.path)
		}
		off, errno := f.Lseek(0, vfs.SEEK_CUR)
		if errno != ESUCCESS {
			off = 0 // a device: no position
		}
		st.Files = append(st.Files, OpenFile{FD: int32(fd), Path: e.d.path, Flags: e.d.flags, Offset: off, Cloexec: e.cloexec})
	}
	return st, nil
}

// Restore puts a fresh Host (one whose guest has run nothing) in state st.
func (h *Host) Restore(st State) error {
	for _, of := range st.Files {
		if of.FD <= 2 {
			return fmt.Errorf("emscripten: restore descriptor %d: stdio is not restored", of.FD)
		}
		f, errno := h.fs.Open(of.Path, of.Flags&^(vfs.O_CREAT|vfs.O_EXCL|vfs.O_TRUNC), 0)
		if errno != ESUCCESS {
			return fmt.Errorf("emscripten: restore descriptor %d: open %s: %w", of.FD, of.Path, errno)
		}
		if of.Offset != 0 {
			if _, errno := f.Lseek(of.Offset, vfs.SEEK_SET); errno != ESUCCESS {
				f.Close()
				return fmt.Errorf("emscripten: restore descriptor %d: seek %s: %w", of.FD, of.Path, errno)
			}
		}
		if errno := h.fds.place(&description{s: f, path: of.Path, flags: of.Flags}, of.FD, of.Cloexec); errno != ESUCCESS {
			f.Close()
			return fmt.Errorf("emscripten: restore descriptor %d: %w", of.FD, errno)
		}
	}
	h.cwd, h.umask = st.Cwd, st.Umask
	return nil
}
