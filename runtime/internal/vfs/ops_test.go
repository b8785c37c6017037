package vfs

import (
	"testing"
)

func TestMkdir(t *testing.T) {
	fs, _ := newTestFS(t)
	build(t, fs, "d:/d", "f:/f=", "l:/dangling=/nowhere", "l:/dl=/d")
	tests := []struct {
		path string
		want Errno
	}{
		{"/new", ESUCCESS},
		{"/new2/", ESUCCESS},
		{"/d", EEXIST},
		{"/f", EEXIST},
		{"/dangling", EEXIST},
		{"/dl", EEXIST},
		{"/", EEXIST},
		{"/d/.", EEXIST},
		{"/none/x", ENOENT},
		{"/f/x", ENOTDIR},
		{"/dl/sub", ESUCCESS},
	}
	for _, tt := range tests {
		wantErr(t, fs.Mkdir(tt.path, 0o750), tt.want, "Mkdir "+tt.path)
	}
	st, e := fs.Stat("/d/sub")
	ok(t, e, "Stat /d/sub")
	if st.Mode != S_IFDIR|0o750 || st.Nlink != 2 || st.Size != BlockSize {
		t.Errorf("Stat /d/sub = %+v", st)
	}
	st, _ = fs.Stat("/d")
	if st.Nlink != 3 {
		t.Errorf("nlink of /d = %d, want 3", st.Nlink)
	}
	mustInvariants(t, fs)
}

func TestMkdirAll(t *testing.T) {
	fs, _ := newTestFS(t)
	build(t, fs, "d:/d", "f:/f=", "l:/dl=/d")
	tests := []struct {
		path string
		want Errno
	}{
		{"/x/y/z", ESUCCESS},
		{"/x/y/z", ESUCCESS},
		{"//p//q//", ESUCCESS},
		{"/dl/a/b", ESUCCESS},
		{"/d/a/../c", ESUCCESS},
		{"/f", EEXIST},
		{"/f/a", ENOTDIR},
		{"/", ESUCCESS},
		{"", ENOENT},
	}
	for _, tt := range tests {
		wantErr(t, fs.MkdirAll(tt.path, 0o755), tt.want, "MkdirAll "+tt.path)
	}
	for _, p := range []string{"/x/y/z", "/p/q", "/d/a/b", "/d/c"} {
		if st, e := fs.Stat(p); e != ESUCCESS || st.Mode&S_IFMT != S_IFDIR {
			t.Errorf("%s: %v %+v", p, e, st)
		}
	}
	mustInvariants(t, fs)
}

func TestUnlinkRmdir(t *testing.T) {
	fs, _ := newTestFS(t)
	build(t, fs, "d:/d/sub", "f:/d/f=x", "d:/empty", "l:/ld=/empty", "f:/file=")
	tests := []struct {
		op, path string
		want     Errno
	}{
		{"unlink", "/d", EISDIR},
		{"unlink", "/none", ENOENT},
		{"unlink", "/d/f/", ENOTDIR},
		{"unlink", "/ld/", ENOTDIR},
		{"rmdir", "/d", ENOTEMPTY},
		{"rmdir", "/file", ENOTDIR},
		{"rmdir", "/ld", ENOTDIR},
		{"rmdir", "/ld/", ENOTDIR},
		{"rmdir", "/", EBUSY},
		{"rmdir", "/empty/.", EINVAL},
		{"rmdir", "/d/sub/..", ENOTEMPTY},
		{"rmdir", "/none", ENOENT},
		{"unlink", "/ld", ESUCCESS}, // removes the link, not the directory
		{"rmdir", "/empty/", ESUCCESS},
		{"unlink", "/d/f", ESUCCESS},
		{"unlink", "/d/f", ENOENT},
		{"rmdir", "/d/sub", ESUCCESS},
		{"rmdir", "/d", ESUCCESS},
	}
	for _, tt := range tests {
		var e Errno
		if tt.op == "unlink" {
			e = fs.Unlink(tt.path)
		} else {
			e = fs.Rmdir(tt.path)
		}
		wantErr(t, e, tt.want, tt.op+" "+tt.path)
	}
	st, _ := fs.Stat("/")
	if st.Nlink != 2 {
		t.Errorf("root nlink = %d, want 2", st.Nlink)
	}
	mustInvariants(t, fs)
}

func TestRename(t *testing.T) {
	spec := []string{
		"d:/a/sub", "f:/a/f=A", "f:/a/g=G", "d:/b", "d:/full/x", "d:/emptydir",
		"l:/link=/a", "f:/ro=R",
	}
	tests := []struct {
		name     string
		old, new string
		want     Errno
		check    func(t *testing.T, fs *FS)
	}{
		{"file to new name", "/a/f", "/b/f2", ESUCCESS, func(t *testing.T, fs *FS) {
			if readAll(t, fs, "/b/f2") != "A" {
				t.Error("content lost")
			}
			if _, e := fs.Stat("/a/f"); e != ENOENT {
				t.Error("old name still exists")
			}
		}},
		{"file replaces file", "/a/f", "/a/g", ESUCCESS, func(t *testing.T, fs *FS) {
			if readAll(t, fs, "/a/g") != "A" {
				t.Error("not replaced")
			}
		}},
		{"same file", "/a/f", "/a/../a/f", ESUCCESS, func(t *testing.T, fs *FS) {
			if readAll(t, fs, "/a/f") != "A" {
				t.Error("file lost")
			}
		}},
		{"dir to new name", "/a", "/b/a2", ESUCCESS, func(t *testing.T, fs *FS) {
			if readAll(t, fs, "/b/a2/f") != "A" {
				t.Error("content lost")
			}
			if st, _ := fs.Stat("/b"); st.Nlink != 3 {
				t.Errorf("/b nlink %d", st.Nlink)
			}
			if st, _ := fs.Stat("/"); st.Nlink != 5 { // b, full, emptydir + 2
				t.Errorf("/ nlink %d", st.Nlink)
			}
			if p, _ := fs.RealPath("/b/a2/sub/.."); p != "/b/a2" {
				t.Errorf("parent of moved dir = %q", p)
			}
		}},
		{"dir replaces empty dir", "/a", "/emptydir", ESUCCESS, func(t *testing.T, fs *FS) {
			if readAll(t, fs, "/emptydir/f") != "A" {
				t.Error("content lost")
			}
		}},
		{"dir with trailing slashes", "/a/", "/c/", ESUCCESS, nil},
		{"dir onto non-empty dir", "/a", "/full", ENOTEMPTY, nil},
		{"dir onto file", "/a", "/ro", ENOTDIR, nil},
		{"file onto dir", "/a/f", "/b", EISDIR, nil},
		{"file with trailing slash", "/a/f/", "/b/x", ENOTDIR, nil},
		{"file to trailing slash", "/a/f", "/b/x/", ENOTDIR, nil},
		{"dir into itself", "/a", "/a/sub/a", EINVAL, nil},
		{"dir onto own child", "/a", "/a/sub", EINVAL, nil},
		{"dir into itself via link", "/a", "/link/new", EINVAL, nil},
		{"parent onto child", "/a/sub", "/a", ENOTEMPTY, nil},
		{"root", "/", "/x", EBUSY, nil},
		{"dot", "/a/.", "/x", EBUSY, nil},
		{"onto dotdot", "/a/f", "/b/..", EBUSY, nil},
		{"missing", "/none", "/x", ENOENT, nil},
		{"missing target dir", "/a/f", "/none/x", ENOENT, nil},
		{"symlink itself", "/link", "/b/link2", ESUCCESS, func(t *testing.T, fs *FS) {
			if tgt, _ := fs.Readlink("/b/link2"); tgt != "/a" {
				t.Errorf("link target %q", tgt)
			}
			if _, e := fs.Stat("/a/f"); e != ESUCCESS {
				t.Error("link target moved")
			}
		}},
		{"read-only source", "/ro", "/x", EROFS, nil},
		{"onto read-only", "/a/f", "/ro", EROFS, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs, _ := newTestFS(t)
			build(t, fs, spec...)
			ok(t, fs.SetReadOnly("/ro", true), "SetReadOnly")
			wantErr(t, fs.Rename(tt.old, tt.new), tt.want, "Rename")
			if tt.check != nil {
				tt.check(t, fs)
			}
			mustInvariants(t, fs)
		})
	}
}

func TestRenameKeepsOpenReplacedFile(t *testing.T) {
	fs, _ := newTestFS(t)
	build(t, fs, "f:/a=new", "f:/b=old")
	f := mustOpen(t, fs, "/b", O_RDONLY, 0)
	ok(t, fs.Rename("/a", "/b"), "Rename")
	buf := make([]byte, 10)
	n, _ := f.Read(buf)
	if string(buf[:n]) != "old" {
		t.Errorf("open replaced file reads %q", buf[:n])
	}
	if st, _ := f.Stat(); st.Nlink != 0 {
		t.Errorf("nlink of replaced file = %d", st.Nlink)
	}
	if readAll(t, fs, "/b") != "new" {
		t.Error("rename did not replace")
	}
	mustInvariants(t, fs)
	f.Close()
	mustInvariants(t, fs)
}

func TestTimestamps(t *testing.T) {
	fs, clk := newTestFS(t)
	clk.set(100)
	ok(t, fs.Mkdir("/d", 0o755), "Mkdir")
	clk.set(200)
	ok(t, fs.WriteFile("/d/f", []byte("x"), 0o644), "WriteFile")
	st, _ := fs.Stat("/d")
	if st.Mtime != 200 || st.Ctime != 200 || st.Atime != 100 {
		t.Errorf("dir times after create: %+v", st)
	}
	st, _ = fs.Stat("/d/f")
	if st.Atime != 200 || st.Mtime != 200 || st.Ctime != 200 {
		t.Errorf("file times: %+v", st)
	}

	clk.set(300)
	ok(t, fs.Chmod("/d/f", 0o600), "Chmod")
	st, _ = fs.Stat("/d/f")
	if st.Mode != S_IFREG|0o600 || st.Ctime != 300 || st.Mtime != 200 {
		t.Errorf("after chmod: %+v", st)
	}

	clk.set(400)
	ok(t, fs.Utimens("/d/f", 7, UtimeOmit, true), "Utimens")
	st, _ = fs.Stat("/d/f")
	if st.Atime != 7 || st.Mtime != 200 || st.Ctime != 400 {
		t.Errorf("after utimens(7, omit): %+v", st)
	}
	clk.set(500)
	ok(t, fs.Utimens("/d/f", UtimeOmit, UtimeNow, true), "Utimens")
	st, _ = fs.Stat("/d/f")
	if st.Atime != 7 || st.Mtime != 500 || st.Ctime != 500 {
		t.Errorf("after utimens(omit, now): %+v", st)
	}
	clk.set(600)
	ok(t, fs.Utimens("/d/f", UtimeOmit, UtimeOmit, true), "Utimens")
	st, _ = fs.Stat("/d/f")
	if st.Ctime != 500 {
		t.Errorf("utimens(omit, omit) changed ctime: %+v", st)
	}
	ok(t, fs.Utimens("/d/f", -5e18, 5e18, true), "Utimens")
	st, _ = fs.Stat("/d/f")
	if st.Atime != -5e18 || st.Mtime != 5e18 {
		t.Errorf("extreme times: %+v", st)
	}

	// follow=false sets the link's own times.
	ok(t, fs.Symlink("f", "/d/l"), "Symlink")
	ok(t, fs.Utimens("/d/l", 1, 2, false), "Utimens nofollow")
	lst, _ := fs.Lstat("/d/l")
	st, _ = fs.Stat("/d/l")
	if lst.Atime != 1 || lst.Mtime != 2 || st.Mtime == 2 {
		t.Errorf("nofollow: link %+v, target %+v", lst, st)
	}

	clk.set(700)
	f := mustOpen(t, fs, "/d/f", O_RDWR, 0)
	buf := make([]byte, 1)
	f.Read(buf)
	st, _ = fs.Stat("/d/f")
	if st.Atime != -5e18 {
		t.Error("read updated atime (noatime expected)")
	}
	f.Write([]byte("y"))
	st, _ = fs.Stat("/d/f")
	if st.Mtime != 700 || st.Ctime != 700 {
		t.Errorf("write times: %+v", st)
	}
	clk.set(800)
	ok(t, f.Utimens(UtimeNow, 3), "File.Utimens")
	ok(t, f.Chmod(0o4755), "File.Chmod")
	st, _ = f.Stat()
	if st.Atime != 800 || st.Mtime != 3 || st.Mode != S_IFREG|0o4755 {
		t.Errorf("futimens/fchmod: %+v", st)
	}
	f.Close()

	clk.set(900)
	ok(t, fs.Rename("/d/f", "/g"), "Rename")
	st, _ = fs.Stat("/d")
	if st.Mtime != 900 {
		t.Errorf("rename did not touch old parent: %+v", st)
	}
	st, _ = fs.Stat("/g")
	if st.Ctime != 900 || st.Mtime != 3 {
		t.Errorf("renamed file: %+v", st)
	}
}

func TestTruncatePath(t *testing.T) {
	fs, _ := newTestFS(t)
	build(t, fs, "f:/f=hello", "d:/d", "l:/l=/f")
	ok(t, fs.AddDevice("/dev/null", NullDevice{}, 0o666), "AddDevice")
	tests := []struct {
		path string
		size int64
		want Errno
		data string
	}{
		{"/f", 2, ESUCCESS, "he"},
		{"/l", 4, ESUCCESS, "he\x00\x00"},
		{"/f", 0, ESUCCESS, ""},
		{"/f", -1, EINVAL, ""},
		{"/d", 0, EISDIR, ""},
		{"/dev/null", 0, EINVAL, ""},
		{"/none", 0, ENOENT, ""},
		{"/f", MaxFileSize + 1, EFBIG, ""},
	}
	for _, tt := range tests {
		wantErr(t, fs.Truncate(tt.path, tt.size), tt.want, "Truncate "+tt.path)
		if tt.want == ESUCCESS {
			if got := readAll(t, fs, "/f"); got != tt.data {
				t.Errorf("after Truncate(%s, %d): %q", tt.path, tt.size, got)
			}
		}
	}
	mustInvariants(t, fs)
}

func TestAccess(t *testing.T) {
	fs, _ := newTestFS(t)
	build(t, fs, "f:/f=", "d:/d", "f:/x=")
	ok(t, fs.Chmod("/f", 0o644), "chmod")
	ok(t, fs.Chmod("/x", 0o100), "chmod")
	ok(t, fs.Chmod("/d", 0o000), "chmod")
	ok(t, fs.AddFile("/ro", []byte("r"), true), "AddFile")
	tests := []struct {
		path string
		mode int
		want Errno
	}{
		{"/f", F_OK, ESUCCESS},
		{"/f", R_OK | W_OK, ESUCCESS}, // root ignores permission bits
		{"/f", X_OK, EACCES},
		{"/x", X_OK, ESUCCESS},
		{"/d", R_OK | W_OK | X_OK, ESUCCESS},
		{"/ro", R_OK, ESUCCESS},
		{"/ro", W_OK, EROFS},
		{"/none", F_OK, ENOENT},
		{"/f", 8, EINVAL},
	}
	for _, tt := range tests {
		wantErr(t, fs.Access(tt.path, tt.mode), tt.want, "Access "+tt.path)
	}
}

func TestReadOnly(t *testing.T) {
	fs, _ := newTestFS(t)
	data := []byte("zipdata")
	ok(t, fs.AddFile("/lib/python.zip", data, true), "AddFile")
	st, e := fs.Stat("/lib/python.zip")
	ok(t, e, "Stat")
	if st.Mode != S_IFREG|0o444 || st.Size != int64(len(data)) {
		t.Errorf("Stat = %+v", st)
	}
	if used, _ := fs.Usage(); used != 0 {
		t.Errorf("read-only file counted in quota: %d", used)
	}
	const p = "/lib/python.zip"
	f := mustOpen(t, fs, p, O_RDONLY, 0)
	defer f.Close()
	wantErr(t, f.Truncate(0), EINVAL, "ftruncate of O_RDONLY")

	tests := []struct {
		name string
		op   func() Errno
		want Errno
	}{
		{"open O_WRONLY", func() Errno { _, e := fs.Open(p, O_WRONLY, 0); return e }, EROFS},
		{"open O_RDWR", func() Errno { _, e := fs.Open(p, O_RDWR, 0); return e }, EROFS},
		{"open O_TRUNC", func() Errno { _, e := fs.Open(p, O_WRONLY|O_TRUNC, 0); return e }, EROFS},
		{"open O_RDONLY|O_CREAT", func() Errno { _, e := fs.Open(p, O_RDONLY|O_CREAT, 0); return e }, ESUCCESS},
		{"truncate", func() Errno { return fs.Truncate(p, 0) }, EROFS},
		{"WriteFile", func() Errno { return fs.WriteFile(p, nil, 0) }, EROFS},
		{"unlink", func() Errno { return fs.Unlink(p) }, EROFS},
		{"chmod", func() Errno { return fs.Chmod(p, 0o777) }, EROFS},
		{"utimens", func() Errno { return fs.Utimens(p, 1, 1, true) }, EROFS},
		{"rename", func() Errno { return fs.Rename(p, "/x") }, EROFS},
	}
	for _, tt := range tests {
		wantErr(t, tt.op(), tt.want, tt.name)
	}
	if readAll(t, fs, p) != "zipdata" {
		t.Error("content changed")
	}
	// The content is shared, not copied.
	data[0] = 'Z'
	if readAll(t, fs, p) != "Zipdata" {
		t.Error("read-only content was copied")
	}

	// A read-only directory refuses new and removed entries.
	ok(t, fs.SetReadOnly("/lib", true), "SetReadOnly dir")
	_, e = fs.Open("/lib/new", O_CREAT|O_WRONLY, 0o644)
	wantErr(t, e, EROFS, "create in read-only dir")
	wantErr(t, fs.Mkdir("/lib/d", 0o755), EROFS, "mkdir in read-only dir")
	wantErr(t, fs.Symlink("x", "/lib/l"), EROFS, "symlink in read-only dir")
	ok(t, fs.AddFile("/lib/host.txt", []byte("h"), false), "host installs into read-only dir")
	wantErr(t, fs.Unlink("/lib/host.txt"), EROFS, "unlink in read-only dir")
	ok(t, fs.SetReadOnly("/lib", false), "SetReadOnly dir off")

	// Making it writable copies the content and starts counting it.
	ok(t, fs.SetReadOnly(p, false), "SetReadOnly off")
	w := mustOpen(t, fs, p, O_WRONLY, 0)
	_, e = w.Write([]byte("X"))
	ok(t, e, "Write")
	w.Close()
	if string(data) != "Zipdata" || readAll(t, fs, p) != "Xipdata" {
		t.Errorf("copy-on-writable failed: shared %q", data)
	}
	if used, _ := fs.Usage(); used != 8 { // 7 + host.txt
		t.Errorf("usage = %d, want 8", used)
	}
	// A File opened for writing before SetReadOnly gets EROFS.
	w = mustOpen(t, fs, p, O_RDWR, 0)
	ok(t, fs.SetReadOnly(p, true), "SetReadOnly on")
	_, e = w.Write([]byte("Y"))
	wantErr(t, e, EROFS, "write after SetReadOnly")
	wantErr(t, w.Truncate(0), EROFS, "ftruncate after SetReadOnly")
	_, e = w.Pwrite([]byte("Y"), 0)
	wantErr(t, e, EROFS, "pwrite after SetReadOnly")
	w.Close()
	if used, _ := fs.Usage(); used != 1 {
		t.Errorf("usage = %d, want 1", used)
	}
	mustInvariants(t, fs)
}

func TestAddFile(t *testing.T) {
	fs, _ := newTestFS(t)
	ok(t, fs.AddFile("/a/b/c.txt", []byte("one"), false), "AddFile")
	old, _ := fs.Stat("/a/b/c.txt")
	src := []byte("two")
	ok(t, fs.AddFile("/a/b/c.txt", src, false), "AddFile replace")
	src[0] = 'X'
	if readAll(t, fs, "/a/b/c.txt") != "two" {
		t.Error("writable AddFile did not copy")
	}
	st, _ := fs.Stat("/a/b/c.txt")
	if st.Ino == old.Ino || st.Mode != S_IFREG|0o644 {
		t.Errorf("replace: %+v (old ino %d)", st, old.Ino)
	}
	wantErr(t, fs.AddFile("/a/b", nil, false), EISDIR, "AddFile onto dir")
	wantErr(t, fs.AddFile("/a/b/c.txt/x", nil, false), ENOTDIR, "AddFile under file")
	wantErr(t, fs.AddFile("/", nil, false), EISDIR, "AddFile root")
	if used, _ := fs.Usage(); used != 3 {
		t.Errorf("usage %d", used)
	}
	mustInvariants(t, fs)
}

func TestSymlinkErrors(t *testing.T) {
	fs, _ := newTestFS(t)
	build(t, fs, "f:/f=", "l:/l=/f")
	long := make([]byte, PathMax)
	for i := range long {
		long[i] = 'a'
	}
	tests := []struct {
		target, path string
		want         Errno
	}{
		{"/f", "/f", EEXIST},
		{"/f", "/l", EEXIST},
		{"", "/x", ENOENT},
		{string(long), "/x", ENAMETOOLONG},
		{"/f", "/none/x", ENOENT},
		{"/f", "/new/", ENOENT},
		{"anything", "/new", ESUCCESS},
	}
	for _, tt := range tests {
		wantErr(t, fs.Symlink(tt.target, tt.path), tt.want, "Symlink "+tt.path)
	}
}

func TestNodeLimit(t *testing.T) {
	fs, _ := newTestFS(t)
	fs.SetNodeLimit(3) // root + 2
	ok(t, fs.Mkdir("/a", 0o755), "mkdir")
	ok(t, fs.WriteFile("/b", nil, 0o644), "WriteFile")
	wantErr(t, fs.Mkdir("/c", 0o755), ENOSPC, "mkdir over limit")
	wantErr(t, fs.Symlink("x", "/c"), ENOSPC, "symlink over limit")
	_, e := fs.Open("/c", O_CREAT|O_WRONLY, 0o644)
	wantErr(t, e, ENOSPC, "create over limit")
	ok(t, fs.Unlink("/b"), "unlink")
	ok(t, fs.Mkdir("/c", 0o755), "mkdir after unlink")
	if _, n := fs.Usage(); n != 3 {
		t.Errorf("nodes = %d", n)
	}
	mustInvariants(t, fs)
}
