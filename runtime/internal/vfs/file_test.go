package vfs

import (
	"bytes"
	"strings"
	"sync"
	"testing"
)

func TestOpenFlags(t *testing.T) {
	spec := []string{"d:/d", "f:/f=content", "l:/lf=/f", "l:/ld=/d", "l:/dangling=/d/created"}
	tests := []struct {
		name  string
		path  string
		flags int
		want  Errno
		after func(t *testing.T, fs *FS, f *File)
	}{
		{"read existing", "/f", O_RDONLY, ESUCCESS, nil},
		{"missing", "/none", O_RDONLY, ENOENT, nil},
		{"missing parent", "/none/x", O_CREAT | O_WRONLY, ENOENT, nil},
		{"create", "/d/new", O_CREAT | O_WRONLY, ESUCCESS, func(t *testing.T, fs *FS, f *File) {
			st, e := fs.Stat("/d/new")
			if e != ESUCCESS || st.Mode != S_IFREG|0o640 || st.Size != 0 || st.Nlink != 1 {
				t.Errorf("created: %v %+v", e, st)
			}
		}},
		{"create existing keeps content", "/f", O_CREAT | O_RDWR, ESUCCESS, func(t *testing.T, fs *FS, f *File) {
			if readAll(t, fs, "/f") != "content" {
				t.Error("content changed")
			}
		}},
		{"excl existing", "/f", O_CREAT | O_EXCL | O_WRONLY, EEXIST, nil},
		{"excl dangling symlink", "/dangling", O_CREAT | O_EXCL | O_WRONLY, EEXIST, nil},
		{"excl symlink to file", "/lf", O_CREAT | O_EXCL | O_WRONLY, EEXIST, nil},
		{"excl new", "/d/x", O_CREAT | O_EXCL | O_WRONLY, ESUCCESS, nil},
		{"create through dangling symlink", "/dangling", O_CREAT | O_WRONLY, ESUCCESS, func(t *testing.T, fs *FS, f *File) {
			if _, e := fs.Stat("/d/created"); e != ESUCCESS {
				t.Error("target not created")
			}
		}},
		{"directory flag on file", "/f", O_RDONLY | O_DIRECTORY, ENOTDIR, nil},
		{"directory flag on dir", "/d", O_RDONLY | O_DIRECTORY, ESUCCESS, nil},
		{"directory flag via symlink", "/ld", O_RDONLY | O_DIRECTORY, ESUCCESS, nil},
		{"creat|directory", "/d/y", O_CREAT | O_DIRECTORY, EINVAL, nil},
		{"dir for writing", "/d", O_WRONLY, EISDIR, nil},
		{"dir for rdwr", "/d", O_RDWR, EISDIR, nil},
		{"creat on dir", "/d", O_CREAT | O_RDONLY, EISDIR, nil},
		{"trailing slash on file", "/f/", O_RDONLY, ENOTDIR, nil},
		{"trailing slash create", "/d/z/", O_CREAT | O_WRONLY, EISDIR, nil},
		{"trailing slash dir", "/d/", O_RDONLY, ESUCCESS, nil},
		{"nofollow on symlink", "/lf", O_RDONLY | O_NOFOLLOW, ELOOP, nil},
		{"nofollow on file", "/f", O_RDONLY | O_NOFOLLOW, ESUCCESS, nil},
		{"nofollow intermediate symlink", "/ld/../f", O_RDONLY | O_NOFOLLOW, ESUCCESS, nil},
		{"path|nofollow opens link", "/lf", O_PATH | O_NOFOLLOW, ESUCCESS, func(t *testing.T, fs *FS, f *File) {
			st, _ := f.Stat()
			if st.Mode&S_IFMT != S_IFLNK {
				t.Errorf("O_PATH|O_NOFOLLOW opened %#o", st.Mode)
			}
			if _, e := f.Read(make([]byte, 1)); e != EBADF {
				t.Errorf("read on O_PATH: %v", e)
			}
			if e := f.Chmod(0); e != EBADF {
				t.Errorf("fchmod on O_PATH: %v", e)
			}
			if e := f.Utimens(1, 1); e != EBADF {
				t.Errorf("futimens on O_PATH: %v", e)
			}
			if _, e := f.Lseek(0, SEEK_SET); e != EBADF {
				t.Errorf("lseek on O_PATH: %v", e)
			}
		}},
		{"path ignores trunc and write", "/f", O_PATH | O_WRONLY | O_TRUNC, ESUCCESS, func(t *testing.T, fs *FS, f *File) {
			if readAll(t, fs, "/f") != "content" {
				t.Error("O_PATH truncated")
			}
			if _, e := f.Write([]byte("x")); e != EBADF {
				t.Errorf("write on O_PATH: %v", e)
			}
		}},
		{"accmode 3", "/f", 3, EINVAL, nil},
		{"trunc", "/f", O_WRONLY | O_TRUNC, ESUCCESS, func(t *testing.T, fs *FS, f *File) {
			if readAll(t, fs, "/f") != "" {
				t.Error("not truncated")
			}
		}},
		{"trunc via symlink", "/lf", O_RDWR | O_TRUNC, ESUCCESS, func(t *testing.T, fs *FS, f *File) {
			if readAll(t, fs, "/f") != "" {
				t.Error("not truncated")
			}
		}},
		{"trunc with rdonly ignored", "/f", O_RDONLY | O_TRUNC, ESUCCESS, func(t *testing.T, fs *FS, f *File) {
			if readAll(t, fs, "/f") != "content" {
				t.Error("truncated")
			}
		}},
		{"ignored flags", "/f", O_RDONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK | O_SYNC, ESUCCESS, func(t *testing.T, fs *FS, f *File) {
			if f.Flags() != O_RDONLY|O_NOCTTY|O_CLOEXEC|O_NONBLOCK|O_SYNC {
				t.Errorf("Flags = %#o", f.Flags())
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs, _ := newTestFS(t)
			build(t, fs, spec...)
			f, e := fs.Open(tt.path, tt.flags, 0o640)
			if e != tt.want {
				t.Fatalf("Open: %v, want %v", e, tt.want)
			}
			if e != ESUCCESS {
				if f != nil {
					t.Fatal("non-nil File with error")
				}
				return
			}
			if f.Path() != tt.path {
				t.Errorf("Path = %q", f.Path())
			}
			if tt.after != nil {
				tt.after(t, fs, f)
			}
			ok(t, f.Close(), "Close")
			wantErr(t, f.Close(), EBADF, "second Close")
			mustInvariants(t, fs)
		})
	}
}

func TestReadWriteSeek(t *testing.T) {
	fs, _ := newTestFS(t)
	f := mustOpen(t, fs, "/f", O_RDWR|O_CREAT, 0o644)
	defer f.Close()

	step := func(what string, got int64, e Errno, want int64, wantE Errno) {
		t.Helper()
		if got != want || e != wantE {
			t.Errorf("%s = %d, %v; want %d, %v", what, got, e, want, wantE)
		}
	}
	n, e := f.Write([]byte("hello world"))
	step("Write", int64(n), e, 11, ESUCCESS)
	pos, e := f.Lseek(0, SEEK_CUR)
	step("Lseek CUR", pos, e, 11, ESUCCESS)

	buf := make([]byte, 5)
	n, e = f.Read(buf)
	step("Read at EOF", int64(n), e, 0, ESUCCESS)

	pos, e = f.Lseek(-5, SEEK_END)
	step("Lseek END", pos, e, 6, ESUCCESS)
	n, _ = f.Read(buf)
	if string(buf[:n]) != "world" {
		t.Errorf("Read = %q", buf[:n])
	}
	pos, e = f.Lseek(0, SEEK_SET)
	step("Lseek SET", pos, e, 0, ESUCCESS)
	n, _ = f.Read(buf[:3])
	if string(buf[:n]) != "hel" {
		t.Errorf("Read = %q", buf[:n])
	}
	pos, e = f.Lseek(2, SEEK_CUR)
	step("Lseek CUR+2", pos, e, 5, ESUCCESS)
	_, e = f.Lseek(-6, SEEK_CUR)
	wantErr(t, e, EINVAL, "Lseek negative")
	_, e = f.Lseek(0, 7)
	wantErr(t, e, EINVAL, "Lseek bad whence")
	_, e = f.Lseek(1<<62, SEEK_SET)
	ok(t, e, "Lseek far")
	_, e = f.Lseek(1<<62-1, SEEK_CUR)
	ok(t, e, "Lseek farther")
	_, e = f.Lseek(1, SEEK_CUR)
	wantErr(t, e, EINVAL, "Lseek overflow")

	// pread/pwrite do not move the offset.
	f.Lseek(3, SEEK_SET)
	n, e = f.Pwrite([]byte("HELLO"), 0)
	step("Pwrite", int64(n), e, 5, ESUCCESS)
	n, e = f.Pread(buf, 6)
	if n != 5 || e != ESUCCESS || string(buf) != "world" {
		t.Errorf("Pread = %d %v %q", n, e, buf[:n])
	}
	n, e = f.Pread(buf, 100)
	step("Pread past EOF", int64(n), e, 0, ESUCCESS)
	_, e = f.Pread(buf, -1)
	wantErr(t, e, EINVAL, "Pread negative")
	_, e = f.Pwrite(buf, -1)
	wantErr(t, e, EINVAL, "Pwrite negative")
	pos, _ = f.Lseek(0, SEEK_CUR)
	step("offset after p*", pos, ESUCCESS, 3, ESUCCESS)

	// Writing past the end leaves a zero-filled hole.
	f.Lseek(13, SEEK_SET)
	f.Write([]byte("!"))
	if got := readAll(t, fs, "/f"); got != "HELLO world\x00\x00!" {
		t.Errorf("content = %q", got)
	}
	n, e = f.Pwrite([]byte("?"), 20)
	step("Pwrite hole", int64(n), e, 1, ESUCCESS)
	st, _ := f.Stat()
	if st.Size != 21 || st.Blocks != 1 || st.Blksize != BlockSize {
		t.Errorf("Stat = %+v", st)
	}

	// Shrinking and regrowing exposes zeros, not stale bytes.
	ok(t, f.Truncate(2), "Truncate")
	ok(t, f.Truncate(6), "Truncate grow")
	if got := readAll(t, fs, "/f"); got != "HE\x00\x00\x00\x00" {
		t.Errorf("content = %q", got)
	}
	f.Lseek(0, SEEK_END)
	f.Write([]byte("x"))
	ok(t, f.Truncate(4), "Truncate")
	f.Pwrite([]byte("y"), 6)
	if got := readAll(t, fs, "/f"); got != "HE\x00\x00\x00\x00y" {
		t.Errorf("content = %q", got)
	}
	wantErr(t, f.Truncate(-1), EINVAL, "Truncate negative")
	n, e = f.Write(nil)
	step("empty Write", int64(n), e, 0, ESUCCESS)
	_, e = f.Pwrite([]byte("x"), MaxFileSize)
	wantErr(t, e, EFBIG, "Pwrite at MaxFileSize")
}

func TestAccessModeChecks(t *testing.T) {
	fs, _ := newTestFS(t)
	build(t, fs, "f:/f=abc", "d:/d")
	r := mustOpen(t, fs, "/f", O_RDONLY, 0)
	w := mustOpen(t, fs, "/f", O_WRONLY, 0)
	d := mustOpen(t, fs, "/d", O_RDONLY, 0)
	buf := make([]byte, 4)
	_, e := r.Write(buf)
	wantErr(t, e, EBADF, "Write on O_RDONLY")
	_, e = r.Pwrite(buf, 0)
	wantErr(t, e, EBADF, "Pwrite on O_RDONLY")
	_, e = w.Read(buf)
	wantErr(t, e, EBADF, "Read on O_WRONLY")
	_, e = w.Pread(buf, 0)
	wantErr(t, e, EBADF, "Pread on O_WRONLY")
	_, e = d.Read(buf)
	wantErr(t, e, EISDIR, "Read on dir")
	_, e = d.Pread(buf, 0)
	wantErr(t, e, EISDIR, "Pread on dir")
	wantErr(t, d.Truncate(0), EINVAL, "Truncate on dir fd")
	_, e = r.ReadDir()
	wantErr(t, e, ENOTDIR, "ReadDir on file")
	wantErr(t, r.SetDirPos(0), ENOTDIR, "SetDirPos on file")
	for _, f := range []*File{r, w, d} {
		ok(t, f.Close(), "Close")
	}
	// Everything fails with EBADF after Close.
	_, e = r.Read(buf)
	wantErr(t, e, EBADF, "Read after Close")
	_, e = w.Write(buf)
	wantErr(t, e, EBADF, "Write after Close")
	_, e = r.Pread(buf, 0)
	wantErr(t, e, EBADF, "Pread after Close")
	_, e = r.Lseek(0, SEEK_SET)
	wantErr(t, e, EBADF, "Lseek after Close")
	_, e = r.Stat()
	wantErr(t, e, EBADF, "Stat after Close")
	wantErr(t, w.Truncate(0), EBADF, "Truncate after Close")
	_, e = d.ReadDir()
	wantErr(t, e, EBADF, "ReadDir after Close")
	wantErr(t, r.SetFlags(O_APPEND), EBADF, "SetFlags after Close")
	wantErr(t, r.Chmod(0), EBADF, "Chmod after Close")
	wantErr(t, r.Utimens(0, 0), EBADF, "Utimens after Close")
	_, e = r.RealPath()
	wantErr(t, e, EBADF, "RealPath after Close")
	mustInvariants(t, fs)
}

func TestAppend(t *testing.T) {
	fs, _ := newTestFS(t)
	build(t, fs, "f:/log=start")
	a := mustOpen(t, fs, "/log", O_WRONLY|O_APPEND, 0)
	b := mustOpen(t, fs, "/log", O_RDWR, 0)
	defer a.Close()
	defer b.Close()
	a.Write([]byte("-a1"))
	b.Write([]byte("XX")) // at offset 0
	a.Write([]byte("-a2"))
	if got := readAll(t, fs, "/log"); got != "XXart-a1-a2" {
		t.Errorf("content = %q", got)
	}
	// Pwrite ignores O_APPEND.
	a.Pwrite([]byte("P"), 0)
	if got := readAll(t, fs, "/log"); got != "PXart-a1-a2" {
		t.Errorf("content = %q", got)
	}
	// F_SETFL can toggle O_APPEND but nothing else.
	ok(t, b.SetFlags(O_APPEND|O_NONBLOCK|O_WRONLY|O_TRUNC), "SetFlags")
	if b.Flags() != O_RDWR|O_APPEND|O_NONBLOCK {
		t.Errorf("Flags = %#o", b.Flags())
	}
	b.Write([]byte("!"))
	ok(t, a.SetFlags(0), "SetFlags off")
	a.Lseek(0, SEEK_SET)
	a.Write([]byte("Q"))
	if got := readAll(t, fs, "/log"); got != "QXart-a1-a2!" {
		t.Errorf("content = %q", got)
	}
}

func TestUnlinkWhileOpen(t *testing.T) {
	fs, _ := newTestFS(t)
	fs.SetLimit(100)
	build(t, fs, "f:/tmp=secret", "d:/dir")
	f := mustOpen(t, fs, "/tmp", O_RDWR, 0)
	g := mustOpen(t, fs, "/tmp", O_RDONLY, 0)
	ok(t, fs.Unlink("/tmp"), "Unlink")
	if _, e := fs.Stat("/tmp"); e != ENOENT {
		t.Errorf("Stat after unlink: %v", e)
	}
	buf := make([]byte, 16)
	n, e := f.Read(buf)
	if e != ESUCCESS || string(buf[:n]) != "secret" {
		t.Errorf("Read = %q, %v", buf[:n], e)
	}
	f.Write([]byte("!!"))
	n, _ = g.Pread(buf, 0)
	if string(buf[:n]) != "secret!!" {
		t.Errorf("second File reads %q", buf[:n])
	}
	st, _ := f.Stat()
	if st.Nlink != 0 || st.Size != 8 {
		t.Errorf("Stat = %+v", st)
	}
	if _, e := f.RealPath(); e != ENOENT {
		t.Errorf("RealPath of unlinked: %v", e)
	}
	// The name can be reused while the old node is open.
	ok(t, fs.WriteFile("/tmp", []byte("new"), 0o644), "WriteFile")
	if used, nodes := fs.Usage(); used != 11 || nodes != 4 {
		t.Errorf("usage %d bytes %d nodes, want 11, 4", used, nodes)
	}
	mustInvariants(t, fs)
	f.Close()
	mustInvariants(t, fs)
	g.Close()
	if used, nodes := fs.Usage(); used != 3 || nodes != 3 {
		t.Errorf("after close: %d bytes %d nodes, want 3, 3", used, nodes)
	}
	mustInvariants(t, fs)

	// A removed directory that is still open reads as empty.
	d := mustOpen(t, fs, "/dir", O_RDONLY|O_DIRECTORY, 0)
	ok(t, fs.Rmdir("/dir"), "Rmdir")
	ents, e := d.ReadDir()
	if e != ESUCCESS || len(ents) != 0 {
		t.Errorf("ReadDir of removed dir = %v, %v", ents, e)
	}
	st, _ = d.Stat()
	if st.Nlink != 0 {
		t.Errorf("nlink of removed dir = %d", st.Nlink)
	}
	d.Close()
	mustInvariants(t, fs)
}

func names(ents []DirEntry) string {
	var s []string
	for _, e := range ents {
		s = append(s, e.Name)
	}
	return strings.Join(s, ",")
}

func TestReadDir(t *testing.T) {
	fs, _ := newTestFS(t)
	build(t, fs, "d:/d/sub", "f:/d/b=", "f:/d/a=", "l:/d/C=a", "f:/d/z=")
	ok(t, fs.AddDevice("/d/tty", NullDevice{}, 0o620), "AddDevice")
	dst, _ := fs.Stat("/d")
	rootSt, _ := fs.Stat("/")
	f := mustOpen(t, fs, "/d", O_RDONLY|O_DIRECTORY, 0)
	defer f.Close()
	ents, e := f.ReadDir()
	ok(t, e, "ReadDir")
	if got := names(ents); got != ".,..,C,a,b,sub,tty,z" {
		t.Fatalf("order = %s", got)
	}
	wantTypes := []uint8{DT_DIR, DT_DIR, DT_LNK, DT_REG, DT_REG, DT_DIR, DT_CHR, DT_REG}
	for i, ent := range ents {
		if ent.Type != wantTypes[i] || ent.Next != int64(i+1) {
			t.Errorf("entry %d = %+v", i, ent)
		}
		if ent.Name != "." && ent.Name != ".." {
			st, _ := fs.Lstat("/d/" + ent.Name)
			if st.Ino != ent.Ino {
				t.Errorf("%s: ino %d, want %d", ent.Name, ent.Ino, st.Ino)
			}
		}
	}
	if ents[0].Ino != dst.Ino || ents[1].Ino != rootSt.Ino {
		t.Errorf(". and .. inodes = %d, %d", ents[0].Ino, ents[1].Ino)
	}
	if f.DirPos() != 8 {
		t.Errorf("DirPos = %d", f.DirPos())
	}
	ents, e = f.ReadDir()
	if e != ESUCCESS || len(ents) != 0 {
		t.Errorf("ReadDir at end = %v, %v", ents, e)
	}

	// Resume after a partial read (getdents64 with a small buffer), while
	// the directory changes: entries that exist throughout are returned
	// exactly once.
	ok(t, f.SetDirPos(0), "rewind")
	ents, _ = f.ReadDir()
	ok(t, f.SetDirPos(ents[3].Next), "SetDirPos") // consumed . .. C a
	ok(t, fs.Unlink("/d/a"), "Unlink")
	ok(t, fs.Unlink("/d/C"), "Unlink")
	ok(t, fs.WriteFile("/d/0", nil, 0o644), "WriteFile")
	ents, _ = f.ReadDir()
	if got := names(ents); got != "b,sub,tty,z" {
		t.Errorf("resumed = %s", got)
	}
	// Rewinding sees the current content.
	pos, e := f.Lseek(0, SEEK_SET)
	if pos != 0 || e != ESUCCESS {
		t.Errorf("Lseek dir = %d, %v", pos, e)
	}
	ents, _ = f.ReadDir()
	if got := names(ents); got != ".,..,0,b,sub,tty,z" {
		t.Errorf("after rewind = %s", got)
	}
	// seekdir/telldir through Lseek.
	pos, _ = f.Lseek(5, SEEK_SET)
	ents, _ = f.ReadDir()
	if pos != 5 || names(ents) != "tty,z" {
		t.Errorf("seekdir 5: %d %s", pos, names(ents))
	}
	pos, _ = f.Lseek(0, SEEK_CUR)
	if pos != 7 {
		t.Errorf("telldir = %d", pos)
	}
	_, e = f.Lseek(-8, SEEK_CUR)
	wantErr(t, e, EINVAL, "Lseek dir negative")
	_, e = f.Lseek(0, SEEK_END)
	wantErr(t, e, EINVAL, "Lseek dir SEEK_END")
	wantErr(t, f.SetDirPos(-1), EINVAL, "SetDirPos negative")
	ok(t, f.SetDirPos(100), "SetDirPos past end")
	ents, e = f.ReadDir()
	if e != ESUCCESS || len(ents) != 0 {
		t.Errorf("ReadDir past end = %v, %v", ents, e)
	}

	// The root's ".." is the root.
	r := mustOpen(t, fs, "/", O_RDONLY, 0)
	defer r.Close()
	ents, _ = r.ReadDir()
	if ents[0].Ino != rootSt.Ino || ents[1].Ino != rootSt.Ino || names(ents) != ".,..,d" {
		t.Errorf("root entries %+v", ents)
	}
	// The returned slice is a copy.
	ents[2].Name = "mutated"
	r.SetDirPos(2)
	ents, _ = r.ReadDir()
	if ents[0].Name != "d" {
		t.Error("ReadDir exposed its internal list")
	}
}

// bufDevice records writes and serves reads from a buffer.
type bufDevice struct {
	mu  sync.Mutex
	in  bytes.Buffer
	out bytes.Buffer
}

func (d *bufDevice) Read(p []byte) (int, Errno) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.in.Len() == 0 {
		return 0, EAGAIN
	}
	n, _ := d.in.Read(p)
	return n, ESUCCESS
}

func (d *bufDevice) Write(p []byte) (int, Errno) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, _ := d.out.Write(p)
	return n, ESUCCESS
}

func TestDevices(t *testing.T) {
	fs, _ := newTestFS(t)
	tty := &bufDevice{}
	tty.in.WriteString("input")
	ok(t, fs.AddDevice("/dev/null", NullDevice{}, 0o666), "AddDevice null")
	ok(t, fs.AddDevice("/dev/zero", ZeroDevice{}, 0o666), "AddDevice zero")
	ok(t, fs.AddDevice("/dev/tty", tty, 0o620), "AddDevice tty")
	wantErr(t, fs.AddDevice("/dev", NullDevice{}, 0), EEXIST, "AddDevice on dir")
	build(t, fs, "f:/file=")
	wantErr(t, fs.AddDevice("/file", NullDevice{}, 0), EEXIST, "AddDevice on file")

	nst, _ := fs.Stat("/dev/null")
	zst, _ := fs.Stat("/dev/zero")
	if nst.Mode != S_IFCHR|0o666 || nst.Rdev == 0 || nst.Rdev == zst.Rdev || nst.Size != 0 {
		t.Errorf("Stat /dev/null = %+v, /dev/zero rdev %d", nst, zst.Rdev)
	}

	null := mustOpen(t, fs, "/dev/null", O_RDWR|O_TRUNC, 0)
	n, e := null.Write([]byte("discard"))
	if n != 7 || e != ESUCCESS {
		t.Errorf("null Write = %d, %v", n, e)
	}
	n, e = null.Read(make([]byte, 4))
	if n != 0 || e != ESUCCESS {
		t.Errorf("null Read = %d, %v", n, e)
	}
	_, e = null.Lseek(0, SEEK_SET)
	wantErr(t, e, ESPIPE, "Lseek on device")
	_, e = null.Pread(make([]byte, 1), 0)
	wantErr(t, e, ESPIPE, "Pread on device")
	_, e = null.Pwrite([]byte("x"), 0)
	wantErr(t, e, ESPIPE, "Pwrite on device")
	wantErr(t, null.Truncate(0), EINVAL, "ftruncate on device")
	if _, isNull := null.Device().(NullDevice); !isNull {
		t.Error("Device() did not return the driver")
	}
	null.Close()

	zero := mustOpen(t, fs, "/dev/zero", O_RDONLY, 0)
	buf := []byte("xxxx")
	zero.Read(buf)
	if !bytes.Equal(buf, make([]byte, 4)) {
		t.Errorf("zero Read = %q", buf)
	}
	zero.Close()

	f := mustOpen(t, fs, "/dev/tty", O_RDWR, 0)
	n, _ = f.Read(buf)
	if string(buf[:n]) != "inpu" {
		t.Errorf("tty Read = %q", buf[:n])
	}
	f.Read(buf)
	_, e = f.Read(buf)
	wantErr(t, e, EAGAIN, "tty Read empty")
	f.Write([]byte("out"))
	if tty.out.String() != "out" {
		t.Errorf("tty got %q", tty.out.String())
	}

	// Re-attaching keeps the inode; open Files see the new driver.
	before, _ := fs.Stat("/dev/tty")
	tty2 := &bufDevice{}
	ok(t, fs.AddDevice("/dev/tty", tty2, 0o600), "re-attach")
	after, _ := fs.Stat("/dev/tty")
	if after.Ino != before.Ino || after.Rdev != before.Rdev || after.Mode != S_IFCHR|0o600 {
		t.Errorf("re-attach: %+v -> %+v", before, after)
	}
	f.Write([]byte("2"))
	if tty2.out.String() != "2" {
		t.Error("open File did not see the new driver")
	}
	if (&File{fs: fs, n: fs.root}).Device() != nil {
		t.Error("Device() of a directory is not nil")
	}
	f.Close()
	mustInvariants(t, fs)
}

// blockingDevice blocks in Read until released; the FS must stay usable.
type blockingDevice struct{ release chan struct{} }

func (d blockingDevice) Read(p []byte) (int, Errno) {
	<-d.release
	return 0, ESUCCESS
}
func (d blockingDevice) Write(p []byte) (int, Errno) { return len(p), ESUCCESS }

func TestDeviceCalledWithoutLock(t *testing.T) {
	fs, _ := newTestFS(t)
	dev := blockingDevice{release: make(chan struct{})}
	ok(t, fs.AddDevice("/dev/stdin", dev, 0o444), "AddDevice")
	f := mustOpen(t, fs, "/dev/stdin", O_RDONLY, 0)
	done := make(chan struct{})
	go func() {
		f.Read(make([]byte, 1))
		close(done)
	}()
	// These would deadlock if Read held the FS lock.
	if _, e := fs.Stat("/dev/stdin"); e != ESUCCESS {
		t.Error(e)
	}
	ok(t, fs.WriteFile("/x", []byte("y"), 0o644), "WriteFile")
	close(dev.release)
	<-done
	f.Close()
}

func TestQuota(t *testing.T) {
	fs, _ := newTestFS(t)
	fs.SetLimit(100)
	ok(t, fs.AddFile("/ro", make([]byte, 1000), true), "read-only files are free")
	ok(t, fs.WriteFile("/a", make([]byte, 60), 0o644), "WriteFile")
	wantErr(t, fs.WriteFile("/b", make([]byte, 41), 0o644), ENOSPC, "WriteFile over quota")
	if _, e := fs.Stat("/b"); e != ENOENT {
		t.Error("failed WriteFile created the file")
	}
	wantErr(t, fs.AddFile("/c", make([]byte, 41), false), ENOSPC, "AddFile over quota")
	ok(t, fs.WriteFile("/a", make([]byte, 100), 0o644), "rewrite within quota")
	ok(t, fs.WriteFile("/a", make([]byte, 60), 0o644), "shrink")

	f := mustOpen(t, fs, "/b", O_CREAT|O_RDWR, 0o644)
	n, e := f.Write(make([]byte, 30))
	if n != 30 || e != ESUCCESS {
		t.Errorf("Write = %d, %v", n, e)
	}
	// A write that only partly fits is cut short, then ENOSPC.
	n, e = f.Write(make([]byte, 30))
	if n != 10 || e != ESUCCESS {
		t.Errorf("partial Write = %d, %v", n, e)
	}
	n, e = f.Write([]byte("x"))
	if n != 0 || e != ENOSPC {
		t.Errorf("full Write = %d, %v", n, e)
	}
	// Overwriting inside the file needs no space.
	n, e = f.Pwrite([]byte("overwrite"), 0)
	if n != 9 || e != ESUCCESS {
		t.Errorf("overwrite = %d, %v", n, e)
	}
	_, e = f.Pwrite([]byte("x"), 1000)
	wantErr(t, e, ENOSPC, "Pwrite hole over quota")
	wantErr(t, f.Truncate(41), ENOSPC, "Truncate over quota")
	wantErr(t, fs.Truncate("/a", 61), ENOSPC, "truncate path over quota")
	ok(t, f.Truncate(0), "Truncate frees")
	if used, _ := fs.Usage(); used != 60 {
		t.Errorf("used = %d", used)
	}
	ok(t, fs.Unlink("/a"), "Unlink frees")
	if used, _ := fs.Usage(); used != 0 {
		t.Errorf("used = %d", used)
	}
	f.Lseek(0, SEEK_SET)
	n, e = f.Write(make([]byte, 100))
	if n != 100 || e != ESUCCESS {
		t.Errorf("Write after freeing = %d, %v", n, e)
	}
	f.Close()
	fs.SetLimit(0)
	ok(t, fs.WriteFile("/big", make([]byte, 1<<20), 0o644), "unlimited")
	mustInvariants(t, fs)
}

func TestGrowthIsAmortised(t *testing.T) {
	fs, _ := newTestFS(t)
	f := mustOpen(t, fs, "/f", O_CREAT|O_WRONLY, 0o644)
	defer f.Close()
	reallocs := 0
	last := -1
	chunk := []byte("0123456789abcdef")
	for i := 0; i < 1<<16; i++ {
		f.Write(chunk)
		if c := cap(f.n.data); c != last {
			reallocs++
			last = c
		}
		if slack := cap(f.n.data) - len(f.n.data); int64(slack) > slackFor(int64(len(f.n.data))) {
			t.Fatalf("slack %d at size %d", slack, len(f.n.data))
		}
	}
	if reallocs > 40 {
		t.Errorf("%d reallocations for 1 MiB of 16-byte writes", reallocs)
	}
	// Truncating far below the capacity gives the memory back.
	ok(t, f.Truncate(10), "Truncate")
	if cap(f.n.data) > 10+minSlack {
		t.Errorf("cap after truncate = %d", cap(f.n.data))
	}
	// Quota bounds the slack too.
	fs.SetLimit(int64(len(f.n.data)) + 100)
	f.Lseek(0, SEEK_END)
	f.Write(make([]byte, 90))
	if used, _ := fs.Usage(); int64(cap(f.n.data)) > fs.limit || used != 100 {
		t.Errorf("cap %d with limit %d", cap(f.n.data), fs.limit)
	}
	mustInvariants(t, fs)
}

func TestReopen(t *testing.T) {
	fs, _ := newTestFS(t)
	build(t, fs, "f:/f=abcdef", "d:/d", "f:/d/x=")
	f := mustOpen(t, fs, "/f", O_RDWR|O_APPEND, 0)
	f.Lseek(2, SEEK_SET)
	d := mustOpen(t, fs, "/d", O_RDONLY, 0)
	d.SetDirPos(2)
	fst, dst := f.State(), d.State()
	f.Close()
	d.Close()

	f2, e := fs.Reopen(fst)
	ok(t, e, "Reopen")
	buf := make([]byte, 2)
	f2.Read(buf)
	if string(buf) != "cd" || f2.Flags() != O_RDWR|O_APPEND || f2.Path() != "/f" {
		t.Errorf("reopened: %q %#o %q", buf, f2.Flags(), f2.Path())
	}
	d2, e := fs.Reopen(dst)
	ok(t, e, "Reopen dir")
	ents, _ := d2.ReadDir()
	if names(ents) != "x" {
		t.Errorf("reopened dir reads %s", names(ents))
	}
	f2.Close()
	d2.Close()
	_, e = fs.Reopen(FileState{Ino: 999})
	wantErr(t, e, ENOENT, "Reopen missing")
	_, e = fs.Reopen(FileState{Ino: fst.Ino, Pos: -1})
	wantErr(t, e, EINVAL, "Reopen bad pos")
	mustInvariants(t, fs)
}

func TestConcurrentInspection(t *testing.T) {
	fs, _ := newTestFS(t)
	build(t, fs, "d:/d")
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		f := mustOpen(t, fs, "/d/f", O_CREAT|O_RDWR, 0o644)
		for i := 0; i < 500; i++ {
			f.Write([]byte("data"))
			fs.Mkdir("/d/sub", 0o755)
			fs.Rmdir("/d/sub")
		}
		f.Close()
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < 500; i++ {
			fs.Stat("/d/f")
			fs.Usage()
			if d, e := fs.Open("/d", O_RDONLY, 0); e == ESUCCESS {
				d.ReadDir()
				d.Close()
			}
			if _, err := fs.Snapshot(); err != nil {
				t.Error(err)
			}
		}
	}()
	wg.Wait()
	mustInvariants(t, fs)
	if st, _ := fs.Stat("/d/f"); st.Size != 2000 {
		t.Errorf("size %d, want 2000", st.Size)
	}
}

// BenchmarkAppend: a 200 MiB file written 1 MiB at a time, in a file
// system with the guest's 256 MiB quota (growing the capacity by 8 MiB
// at a time past 8 MiB, this took 3 s in a sandbox).
func BenchmarkAppend(b *testing.B) {
	chunk := make([]byte, 1<<20)
	for b.Loop() {
		fs, _ := newTestFS(b)
		fs.SetLimit(256 << 20)
		f := mustOpen(b, fs, "/f", O_WRONLY|O_CREAT, 0o644)
		for range 200 {
			if _, e := f.Write(chunk); e != ESUCCESS {
				b.Fatal(e)
			}
		}
		f.Close()
	}
	b.SetBytes(200 << 20)
}
