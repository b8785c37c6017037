package vfs

import (
	"fmt"
	"sync/atomic"
	"testing"
)

// testClock is a deterministic clock for tests.
type testClock struct{ t atomic.Int64 }

func (c *testClock) now() int64     { return c.t.Load() }
func (c *testClock) set(ns int64)   { c.t.Store(ns) }
func (c *testClock) advance() int64 { return c.t.Add(1000) }

func newTestFS(t testing.TB) (*FS, *testClock) {
	t.Helper()
	c := &testClock{}
	c.set(1_000_000)
	return New(c.now), c
}

func ok(t testing.TB, e Errno, what string) {
	t.Helper()
	if e != ESUCCESS {
		t.Fatalf("%s: %v", what, e)
	}
}

func wantErr(t testing.TB, got, want Errno, what string) {
	t.Helper()
	if got != want {
		t.Errorf("%s: got %v, want %v", what, got, want)
	}
}

func mustOpen(t testing.TB, fs *FS, path string, flags int, perm uint32) *File {
	t.Helper()
	f, e := fs.Open(path, flags, perm)
	if e != ESUCCESS {
		t.Fatalf("Open(%q, %#o): %v", path, flags, e)
	}
	return f
}

func readAll(t testing.TB, fs *FS, path string) string {
	t.Helper()
	f := mustOpen(t, fs, path, O_RDONLY, 0)
	defer f.Close()
	var out []byte
	buf := make([]byte, 7)
	for {
		n, e := f.Read(buf)
		ok(t, e, "Read "+path)
		if n == 0 {
			return string(out)
		}
		out = append(out, buf[:n]...)
	}
}

// build creates a tree from a compact spec: "d:/path" directory,
// "f:/path=content" file, "l:/path=target" symlink.
func build(t testing.TB, fs *FS, spec ...string) {
	t.Helper()
	for _, s := range spec {
		kind, rest := s[:2], s[2:]
		path, arg := rest, ""
		for i := 0; i < len(rest); i++ {
			if rest[i] == '=' {
				path, arg = rest[:i], rest[i+1:]
				break
			}
		}
		var e Errno
		switch kind {
		case "d:":
			e = fs.MkdirAll(path, 0o755)
		case "f:":
			e = fs.WriteFile(path, []byte(arg), 0o644)
		case "l:":
			e = fs.Symlink(arg, path)
		default:
			t.Fatalf("bad spec %q", s)
		}
		ok(t, e, s)
	}
}

// checkInvariants verifies the internal consistency of fs. It returns an
// error rather than failing so the fuzzer can report the operation.
func checkInvariants(fs *FS) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.root.parent != fs.root || !fs.root.isDir() {
		return fmt.Errorf("bad root")
	}
	seen := map[uint64]bool{}
	var used int64
	var walk func(n *node) error
	walk = func(n *node) error {
		if seen[n.ino] {
			return fmt.Errorf("inode %d reachable twice", n.ino)
		}
		seen[n.ino] = true
		if fs.inodes[n.ino] != n {
			return fmt.Errorf("inode %d not registered", n.ino)
		}
		if n.ino >= fs.nextIno {
			return fmt.Errorf("inode %d >= nextIno %d", n.ino, fs.nextIno)
		}
		if n.counted() {
			used += int64(len(n.data))
			if slack := int64(cap(n.data) - len(n.data)); slack > slackFor(int64(len(n.data))) {
				return fmt.Errorf("inode %d: slack %d for size %d", n.ino, slack, len(n.data))
			}
		}
		if !n.isDir() {
			if n.nlink != 1 {
				return fmt.Errorf("inode %d: nlink %d", n.ino, n.nlink)
			}
			return nil
		}
		subdirs := 0
		for name, c := range n.children {
			if c.parent != n || c.name != name {
				return fmt.Errorf("inode %d: child %q has parent %v name %q", n.ino, name, c.parent, c.name)
			}
			if !validName(name) {
				return fmt.Errorf("inode %d: bad name %q", n.ino, name)
			}
			if c.isDir() {
				subdirs++
			}
			if err := walk(c); err != nil {
				return err
			}
		}
		if n.nlink != uint32(2+subdirs) {
			return fmt.Errorf("dir %d: nlink %d with %d subdirs", n.ino, n.nlink, subdirs)
		}
		return nil
	}
	if err := walk(fs.root); err != nil {
		return err
	}
	for ino, n := range fs.inodes {
		if seen[ino] {
			continue
		}
		if n.nlink != 0 || n.opens <= 0 {
			return fmt.Errorf("unreachable inode %d: nlink %d opens %d", ino, n.nlink, n.opens)
		}
		if n.counted() {
			used += int64(len(n.data))
		}
	}
	if used != fs.used {
		return fmt.Errorf("used %d, counted %d", fs.used, used)
	}
	return nil
}

func mustInvariants(t testing.TB, fs *FS) {
	t.Helper()
	if err := checkInvariants(fs); err != nil {
		t.Fatal(err)
	}
}
