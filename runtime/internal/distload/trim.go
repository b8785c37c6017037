package distload

import (
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Entries are marked when used, and trimmed when unused: every build of
// rlm-sandbox, and every Pyodide it loads, leaves files in the cache that
// later builds do not read. An entry's last use is the later of its
// modification and access times; MarkUsed moves the first forward, at most
// once an hour per file, as the go command does for its build cache, so a
// file system mounted noatime still tells entries in use from the others.

// MarkEvery is how stale an entry's mark must be before MarkUsed writes it.
const MarkEvery = time.Hour

// MarkUsed records that the file at path was used now. Errors are
// ignored: a cache this user cannot write is still read.
func MarkUsed(path string) {
	st, err := os.Stat(path)
	if err != nil || time.Since(st.ModTime()) < MarkEvery {
		return
	}
	now := time.Now()
	_ = os.Chtimes(path, now, now)
}

// LastUse is the later of st's modification and access times.
func LastUse(st os.FileInfo) time.Time {
	t := st.ModTime()
	if a, ok := accessTime(st); ok && a.After(t) {
		t = a
	}
	return t
}

// Trim removes from the cache what no process used since cutoff: blobs
// (with their .crc) and refs, but a blob that a kept ref names, as the
// result or as the input of a derivation, stays with it. It also removes
// lock files and temporary files made over a day ago: a lock is a flock(2)
// target, made again when next taken (and held for the seconds a compile
// or a write takes, so that removing an old one at worst lets two
// processes do the same work, each writing the same file by a rename); a
// temporary file that old was left by a process that died writing it.
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
		case LastUse(st).Before(cutoff):
			_ = os.Remove(p)
			_ = os.Remove(p + ".crc")
		}
	})
	locks := filepath.Join(c.dir, "locks")
	forEntry(locks, func(name string, st os.FileInfo) {
		if strings.HasSuffix(name, ".lock") {
			removeIfBefore(filepath.Join(locks, name), st.ModTime(), dayAgo)
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
