package distload

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Entries are marked when used, and trimmed when unused: every build of
// rlm-sandbox, and every Pyodide it loads, leaves files in the cache that
// later builds do not read. A large entry is marked through a small file
// beside it (a blob through its .crc, a file through its SidecarSuffix
// file, compiled code through its marker), never by changing its own
// times: on an overlay file system (a container image that holds a warm
// cache) that would copy the whole file into the container's layer, and
// the containers would no longer share its pages. An entry's last use is
// the latest modification or access time of the entry and its mark; marks
// move at most once an hour per file, as the go command marks its build
// cache, so a file system mounted noatime still tells entries in use from
// the others.

// MarkEvery is how stale a mark must be before MarkUsed writes it again.
const MarkEvery = time.Hour

// SidecarSuffix names the empty file that marks the file beside it.
const SidecarSuffix = ".used"

// MarkUsed records that the entry that the small file at path marks (or
// is) was used now. Errors are ignored: a cache this user cannot write is
// still read.
func MarkUsed(path string) {
	st, err := os.Stat(path)
	if err != nil || time.Since(st.ModTime()) < MarkEvery && st.ModTime().Before(time.Now().Add(time.Minute)) {
		return
	}
	now := time.Now()
	_ = os.Chtimes(path, now, now)
}

// MarkBeside records that the file at path was used now, in its
// SidecarSuffix file (made when missing).
func MarkBeside(path string) {
	mark := path + SidecarSuffix
	if _, err := os.Stat(mark); errors.Is(err, fs.ErrNotExist) {
		if f, err := os.OpenFile(mark, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			f.Close()
		}
		return
	}
	MarkUsed(mark)
}

// IgnoreAccessTimes makes LastUse read modification times only, as a
// file system mounted noatime gives: for tests of the marks.
var IgnoreAccessTimes bool

// LastUse is the later of st's modification and access times.
func LastUse(st os.FileInfo) time.Time {
	t := st.ModTime()
	if IgnoreAccessTimes {
		return t
	}
	if a, ok := accessTime(st); ok && a.After(t) {
		t = a
	}
	return t
}

// LastUseOf is the last use of the file at path and of the files that
// mark it (marks: paths, which may be missing); zero when none exists.
func LastUseOf(path string, marks ...string) time.Time {
	var last time.Time
	for _, p := range append([]string{path}, marks...) {
		if st, err := os.Stat(p); err == nil {
			if t := LastUse(st); t.After(last) {
				last = t
			}
		}
	}
	return last
}

// Trim removes from the cache what no process used since cutoff: blobs
// (with their .crc, which marks them) and refs, but a blob that a kept ref
// names, as the result or as the input of a derivation, stays with it. It
// also removes lock files and temporary files made over a day ago: a lock
// is a flock(2) target, made again when next taken (and held for the
// seconds a compile or a write takes, so that removing an old one at
// worst lets two processes do the same work, each writing the same file
// by a rename); a temporary file that old was left by a process that died
// writing it.
func (c *Cache) Trim(cutoff time.Time) {
	if c == nil {
		return
	}
	dayAgo := time.Now().Add(-24 * time.Hour)
	keep := map[string]bool{}
	refs := filepath.Join(c.dir, "refs")
	forEntry(refs, func(name string, st os.FileInfo) {
		p := filepath.Join(refs, name)
		switch {
		case isTemp(name):
			removeIfBefore(p, st.ModTime(), dayAgo)
		case LastUse(st).Before(cutoff):
			_ = os.Remove(p)
		default:
			if b, err := os.ReadFile(p); err == nil { // not Ref: not a use
				keep[strings.TrimSpace(string(b))] = true
			}
			if i := strings.LastIndexByte(name, '-'); i >= 0 {
				keep[name[i+1:]] = true
			}
		}
	})
	blobs := filepath.Join(c.dir, "blobs")
	forEntry(blobs, func(name string, st os.FileInfo) {
		p := filepath.Join(blobs, name)
		hex, isBlob := strings.CutPrefix(name, "sha256-")
		switch {
		case isTemp(name):
			removeIfBefore(p, st.ModTime(), dayAgo)
		case !isBlob || strings.HasSuffix(name, ".crc") || keep[hex]:
		case LastUseOf(p, p+".crc").Before(cutoff):
			_ = os.Remove(p + ".crc") // first: a blob without one is checked, not trusted
			_ = os.Remove(p)
		}
	})
	locks := filepath.Join(c.dir, "locks")
	forEntry(locks, func(name string, st os.FileInfo) {
		if strings.HasSuffix(name, ".lock") {
			removeIfBefore(filepath.Join(locks, name), st.ModTime(), dayAgo)
		}
	})
}

// TrimFiles removes the files of dir that no process used since cutoff,
// each with its SidecarSuffix file, which counts as a use of it; a
// sidecar whose file is gone goes when it is as old.
func TrimFiles(dir string, cutoff time.Time) {
	forEntry(dir, func(name string, st os.FileInfo) {
		p := filepath.Join(dir, name)
		if strings.HasSuffix(name, SidecarSuffix) {
			if _, err := os.Stat(strings.TrimSuffix(p, SidecarSuffix)); errors.Is(err, fs.ErrNotExist) && LastUse(st).Before(cutoff) {
				_ = os.Remove(p)
			}
			return
		}
		if LastUseOf(p, p+SidecarSuffix).Before(cutoff) {
			_ = os.Remove(p)
			_ = os.Remove(p + SidecarSuffix)
		}
	})
}

// forEntry calls f with each regular file of dir.
func forEntry(dir string, f func(name string, st os.FileInfo)) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, de := range ents {
		if !de.Type().IsRegular() {
			continue
		}
		if st, err := de.Info(); err == nil {
			f(de.Name(), st)
		}
	}
}

// isTemp reports whether name is one of WriteAtomic's temporary files.
func isTemp(name string) bool { return strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".tmp") }

func removeIfBefore(path string, t, cutoff time.Time) {
	if t.Before(cutoff) {
		_ = os.Remove(path)
	}
}
