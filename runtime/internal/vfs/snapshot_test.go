package vfs

import (
	"bytes"
	"encoding/gob"
	"testing"
)

func TestSnapshotRoundTrip(t *testing.T) {
	fs, clk := newTestFS(t)
	fs.SetLimit(1 << 20)
	fs.SetNodeLimit(1000)
	build(t, fs,
		"d:/home/user/.cache",
		"f:/home/user/a.txt=alpha",
		"f:/home/user/empty=",
		"l:/home/user/link=a.txt",
		"l:/abs=/home/user",
		"l:/dangling=/nowhere",
	)
	ok(t, fs.Chmod("/home/user/a.txt", 0o4750), "Chmod")
	ok(t, fs.Chmod("/home/user/.cache", 0o700), "Chmod")
	clk.set(42)
	ok(t, fs.Utimens("/home/user/a.txt", -7, 123456789, true), "Utimens")
	ok(t, fs.Utimens("/home/user/link", 5, 6, false), "Utimens link")
	ok(t, fs.AddFile("/lib/python.zip", []byte("PK\x03\x04"), true), "AddFile")
	ok(t, fs.AddDevice("/dev/null", NullDevice{}, 0o666), "AddDevice")
	ok(t, fs.SetReadOnly("/lib", true), "SetReadOnly")
	// An unlinked open file is not part of the snapshot.
	tmp := mustOpen(t, fs, "/home/tmp", O_CREAT|O_RDWR, 0o600)
	tmp.Write([]byte("gone"))
	ok(t, fs.Unlink("/home/tmp"), "Unlink")
	f := mustOpen(t, fs, "/home/user/a.txt", O_RDWR, 0)
	f.Lseek(3, SEEK_SET)
	fstate := f.State()

	data, err := fs.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	data2, _ := fs.Snapshot()
	if !bytes.Equal(data, data2) {
		t.Error("Snapshot is not deterministic")
	}
	fs2, err := Restore(data)
	if err != nil {
		t.Fatal(err)
	}
	fs2.SetClock(clk.now)
	mustInvariants(t, fs2)

	paths := []string{
		"/", "/home", "/home/user", "/home/user/.cache", "/home/user/a.txt",
		"/home/user/empty", "/home/user/link", "/abs", "/dangling",
		"/lib", "/lib/python.zip", "/dev", "/dev/null",
	}
	for _, p := range paths {
		want, e1 := fs.Lstat(p)
		got, e2 := fs2.Lstat(p)
		if e1 != ESUCCESS || e2 != ESUCCESS || got != want {
			t.Errorf("%s: %+v (%v), want %+v (%v)", p, got, e2, want, e1)
		}
	}
	for _, p := range []string{"/home/user/a.txt", "/home/user/link", "/lib/python.zip"} {
		if readAll(t, fs, p) != readAll(t, fs2, p) {
			t.Errorf("%s: content differs", p)
		}
	}
	if tgt, _ := fs2.Readlink("/dangling"); tgt != "/nowhere" {
		t.Errorf("symlink target %q", tgt)
	}
	u1, n1 := fs.Usage()
	u2, n2 := fs2.Usage()
	if u1-4 != u2 || n1-1 != n2 { // minus the unlinked open file
		t.Errorf("usage %d/%d nodes, want %d/%d", u2, n2, u1-4, n1-1)
	}
	if fs2.limit != 1<<20 || fs2.nodeLimit != 1000 {
		t.Errorf("limits %d %d", fs2.limit, fs2.nodeLimit)
	}
	// Flags survive: read-only file and directory.
	wantErr(t, fs2.Unlink("/lib/python.zip"), EROFS, "read-only after restore")
	wantErr(t, fs2.Mkdir("/lib/x", 0o755), EROFS, "read-only dir after restore")
	// New inodes do not collide with restored ones.
	ok(t, fs2.WriteFile("/new", nil, 0o644), "WriteFile")
	st, _ := fs2.Stat("/new")
	for _, p := range paths {
		if old, _ := fs2.Lstat(p); old.Ino == st.Ino {
			t.Errorf("inode %d reused", st.Ino)
		}
	}
	// Devices come back detached until re-attached.
	_, e := fs2.Open("/dev/null", O_WRONLY, 0)
	wantErr(t, e, ENXIO, "detached device")
	ok(t, fs2.AddDevice("/dev/null", NullDevice{}, 0o666), "re-attach")
	dn := mustOpen(t, fs2, "/dev/null", O_WRONLY, 0)
	if n, e := dn.Write([]byte("x")); n != 1 || e != ESUCCESS {
		t.Errorf("re-attached Write = %d, %v", n, e)
	}
	dn.Close()
	// Open files are re-opened from their state.
	f2, e := fs2.Reopen(fstate)
	ok(t, e, "Reopen")
	buf := make([]byte, 10)
	n, _ := f2.Read(buf)
	if string(buf[:n]) != "ha" {
		t.Errorf("reopened read %q", buf[:n])
	}
	f2.Close()
	// The restored FS is independent of the original.
	ok(t, fs2.WriteFile("/home/user/a.txt", []byte("changed"), 0), "WriteFile")
	if readAll(t, fs, "/home/user/a.txt") != "alpha" {
		t.Error("restored FS shares content with the original")
	}
	f.Close()
	tmp.Close()
	mustInvariants(t, fs)
	mustInvariants(t, fs2)
}

func TestRestoreRejectsBadInput(t *testing.T) {
	encode := func(img snapshotImage) []byte {
		var buf bytes.Buffer
		if err := gob.NewEncoder(&buf).Encode(&img); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	root := snapshotNode{Ino: 1, Parent: 1, Mode: S_IFDIR | 0o755}
	file := func(ino, parent uint64, name string) snapshotNode {
		return snapshotNode{Ino: ino, Parent: parent, Name: name, Mode: S_IFREG | 0o644}
	}
	tests := []struct {
		name string
		data []byte
	}{
		{"garbage", []byte("not a snapshot")},
		{"empty", nil},
		{"bad version", encode(snapshotImage{Version: 99, Nodes: []snapshotNode{root}})},
		{"no nodes", encode(snapshotImage{Version: snapshotVersion})},
		{"root not dir", encode(snapshotImage{Version: snapshotVersion, Nodes: []snapshotNode{file(1, 1, "")}})},
		{"orphan", encode(snapshotImage{Version: snapshotVersion, Nodes: []snapshotNode{root, file(2, 7, "x")}})},
		{"parent is file", encode(snapshotImage{Version: snapshotVersion, Nodes: []snapshotNode{root, file(2, 1, "x"), file(3, 2, "y")}})},
		{"duplicate ino", encode(snapshotImage{Version: snapshotVersion, Nodes: []snapshotNode{root, file(1, 1, "x")}})},
		{"zero ino", encode(snapshotImage{Version: snapshotVersion, Nodes: []snapshotNode{root, file(0, 1, "x")}})},
		{"duplicate name", encode(snapshotImage{Version: snapshotVersion, Nodes: []snapshotNode{root, file(2, 1, "x"), file(3, 1, "x")}})},
		{"bad name", encode(snapshotImage{Version: snapshotVersion, Nodes: []snapshotNode{root, file(2, 1, "a/b")}})},
		{"dotdot name", encode(snapshotImage{Version: snapshotVersion, Nodes: []snapshotNode{root, file(2, 1, "..")}})},
		{"fifo", encode(snapshotImage{Version: snapshotVersion, Nodes: []snapshotNode{root, {Ino: 2, Parent: 1, Name: "p", Mode: S_IFIFO}}})},
		{"empty symlink", encode(snapshotImage{Version: snapshotVersion, Nodes: []snapshotNode{root, {Ino: 2, Parent: 1, Name: "l", Mode: S_IFLNK}}})},
	}
	for _, tt := range tests {
		if fs, err := Restore(tt.data); err == nil || fs != nil {
			t.Errorf("%s: Restore succeeded", tt.name)
		}
	}
	// A minimal valid image with a low NextIno still allocates fresh inodes.
	fs, err := Restore(encode(snapshotImage{Version: snapshotVersion, Nodes: []snapshotNode{root, file(5, 1, "x")}}))
	if err != nil {
		t.Fatal(err)
	}
	ok(t, fs.WriteFile("/y", nil, 0o644), "WriteFile")
	if st, _ := fs.Stat("/y"); st.Ino != 6 {
		t.Errorf("new ino %d, want 6", st.Ino)
	}
	mustInvariants(t, fs)
}
