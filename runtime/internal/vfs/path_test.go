package vfs

import (
	"fmt"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	fs, _ := newTestFS(t)
	build(t, fs,
		"d:/a/b",
		"f:/a/b/f=hello",
		"l:/a/abs=/a/b",
		"l:/a/rel=b",
		"l:/a/b/up=..",
		"l:/a/b/dotdot=../b/f",
		"l:/loop1=/loop2",
		"l:/loop2=/loop1",
		"l:/self=self",
		"l:/dangling=/nowhere",
		"l:/dangling2=/nodir/x",
		"l:/fl=/a/b/f",
		"l:/rootlink=/",
		"l:/dirslash=/a/b/",
		"l:/fileslash=/a/b/f/",
	)
	ino := func(p string) uint64 {
		st, e := fs.Lstat(p)
		ok(t, e, "Lstat "+p)
		return st.Ino
	}
	root, a, b, f := ino("/"), ino("/a"), ino("/a/b"), ino("/a/b/f")

	// A chain of symlinks /c0 -> /c1 -> ... -> /c40 -> /a/b/f: following
	// /c1 takes 40 links, /c0 takes 41.
	for i := 0; i <= MaxSymlinks; i++ {
		target := fmt.Sprintf("/c%d", i+1)
		if i == MaxSymlinks {
			target = "/a/b/f"
		}
		ok(t, fs.Symlink(target, fmt.Sprintf("/c%d", i)), "chain")
	}

	long := strings.Repeat("x", NameMax)
	tests := []struct {
		path    string
		follow  bool
		wantIno uint64
		want    Errno
	}{
		{"/", true, root, ESUCCESS},
		{"///", true, root, ESUCCESS},
		{"/.", true, root, ESUCCESS},
		{"/..", true, root, ESUCCESS},
		{"/../../a", true, a, ESUCCESS},
		{"//a///b//f", true, f, ESUCCESS},
		{"/a/./b/../b/f", true, f, ESUCCESS},
		{"/a/b/", true, b, ESUCCESS},
		{"/a/b/.", true, b, ESUCCESS},
		{"/a/b/..", true, a, ESUCCESS},
		{"/a/abs/f", true, f, ESUCCESS},
		{"/a/rel/f", true, f, ESUCCESS},
		{"/a/abs", true, b, ESUCCESS},
		{"/a/abs/", false, b, ESUCCESS},    // trailing slash follows even for lstat
		{"/a/abs/..", true, a, ESUCCESS},   // physical "..": parent of /a/b
		{"/a/b/up/b/f", true, f, ESUCCESS}, // relative ".." in a link
		{"/a/b/dotdot", true, f, ESUCCESS}, // link to ../b/f
		{"/a/abs/up/abs/up/rel/up/b/f", true, f, ESUCCESS},
		{"/rootlink/a/b/f", true, f, ESUCCESS},
		{"/rootlink", true, root, ESUCCESS},
		{"/dirslash", true, b, ESUCCESS},
		{"/fl", true, f, ESUCCESS},
		{"/c1", true, f, ESUCCESS},
		{"/c0", true, 0, ELOOP},
		{"/c0", false, ino("/c0"), ESUCCESS},
		{"/loop1", true, 0, ELOOP},
		{"/loop1/x", false, 0, ELOOP},
		{"/self", true, 0, ELOOP},
		{"/self/", false, 0, ELOOP},
		{"/dangling", true, 0, ENOENT},
		{"/dangling", false, ino("/dangling"), ESUCCESS},
		{"/dangling2", true, 0, ENOENT},
		{"/a/b/f/", true, 0, ENOTDIR},
		{"/a/b/f/", false, 0, ENOTDIR},
		{"/a/b/f/.", true, 0, ENOTDIR},
		{"/a/b/f/..", true, 0, ENOTDIR},
		{"/a/b/f/x", true, 0, ENOTDIR},
		{"/fl/", true, 0, ENOTDIR},
		{"/fl/", false, 0, ENOTDIR},
		{"/fileslash", true, 0, ENOTDIR},
		{"/a/missing/x", true, 0, ENOENT},
		{"/a/missing", true, 0, ENOENT},
		{"", true, 0, ENOENT},
		{"/a/" + long, true, 0, ENOENT},
		{"/a/" + long + "y", true, 0, ENAMETOOLONG},
		{"/" + strings.Repeat("a/", PathMax/2), true, 0, ENAMETOOLONG},
		{"/" + strings.Repeat("/", PathMax-3) + "a", true, a, ESUCCESS}, // 4095 bytes
		{"/a\x00b", true, 0, EINVAL},
		{"a/b/f", true, f, ESUCCESS}, // relative paths start at the root
	}
	for _, tt := range tests {
		name := tt.path
		if len(name) > 40 {
			name = name[:40] + "..."
		}
		t.Run(fmt.Sprintf("%q/follow=%v", name, tt.follow), func(t *testing.T) {
			var st Stat
			var e Errno
			if tt.follow {
				st, e = fs.Stat(tt.path)
			} else {
				st, e = fs.Lstat(tt.path)
			}
			if e != tt.want {
				t.Fatalf("errno %v, want %v", e, tt.want)
			}
			if e == ESUCCESS && st.Ino != tt.wantIno {
				t.Fatalf("ino %d, want %d", st.Ino, tt.wantIno)
			}
		})
	}
}

func TestReadlinkAndLstat(t *testing.T) {
	fs, _ := newTestFS(t)
	build(t, fs, "d:/d", "f:/d/f=x", "l:/d/l=f", "l:/d/dl=/d")
	target, e := fs.Readlink("/d/l")
	ok(t, e, "Readlink")
	if target != "f" {
		t.Errorf("Readlink = %q", target)
	}
	st, e := fs.Lstat("/d/l")
	ok(t, e, "Lstat")
	if st.Mode != S_IFLNK|0o777 || st.Size != 1 || st.Nlink != 1 {
		t.Errorf("Lstat = %+v", st)
	}
	for _, tt := range []struct {
		path string
		want Errno
	}{
		{"/d/f", EINVAL},
		{"/d", EINVAL},
		{"/d/none", ENOENT},
		{"/d/dl/", EINVAL}, // trailing slash follows the link
		{"/d/dl/l", ESUCCESS},
	} {
		_, e := fs.Readlink(tt.path)
		wantErr(t, e, tt.want, "Readlink "+tt.path)
	}
}

func TestJoin(t *testing.T) {
	tests := []struct{ cwd, path, want string }{
		{"/", "a", "/a"},
		{"/home", "a/b", "/home/a/b"},
		{"/home/", "a", "/home/a"},
		{"/home", "/etc", "/etc"},
		{"/home", "../x/", "/home/../x/"},
		{"/home", "", ""},
		{"", "a", "/a"},
	}
	for _, tt := range tests {
		if got := Join(tt.cwd, tt.path); got != tt.want {
			t.Errorf("Join(%q, %q) = %q, want %q", tt.cwd, tt.path, got, tt.want)
		}
	}
}

func TestRealPath(t *testing.T) {
	fs, _ := newTestFS(t)
	build(t, fs, "d:/a/b/c", "f:/a/b/f=", "l:/l=a/b", "l:/a/up=..")
	tests := []struct {
		path, want string
		errno      Errno
	}{
		{"/", "/", ESUCCESS},
		{"//a//b/", "/a/b", ESUCCESS},
		{"/l/c/..", "/a/b", ESUCCESS},
		{"/l/f", "/a/b/f", ESUCCESS},
		{"/a/up/l/c", "/a/b/c", ESUCCESS},
		{"/a/none", "", ENOENT},
	}
	for _, tt := range tests {
		got, e := fs.RealPath(tt.path)
		if got != tt.want || e != tt.errno {
			t.Errorf("RealPath(%q) = %q, %v; want %q, %v", tt.path, got, e, tt.want, tt.errno)
		}
	}
}
