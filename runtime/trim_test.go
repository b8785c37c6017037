package runtime

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/distload"
)

// cacheFile writes a file under dir, last used age ago (access and
// modification times).
func cacheFile(t *testing.T, dir, rel, content string, age time.Duration) string {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-age)
	if err := os.Chtimes(p, at, at); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTrimBefore(t *testing.T) {
	dir := t.TempDir()
	const old, recent = 30 * 24 * time.Hour, time.Hour
	h := func(c byte) string { return strings.Repeat(string(c), 64) }
	files := map[string]time.Duration{ // the files to make, and their age
		"wazero/f1/compiled":                        old,
		"wazero/f1/wazero-v1/aaa":                   recent, // read lately, but the flavor's marker is old
		"wazero/f2/compiled":                        recent,
		"wazero/f2/wazero-v1/bbb":                   old,
		"wazero/f3/wazero-v1/ccc":                   old, // no marker: by its files
		"wazero/f4/wazero-v1/ddd":                   recent,
		"wazero/compiled-f0":                        old, // the layout of earlier builds
		"wazero/wazero-v1.12.0-amd64-linux/eee":     old,
		"snapshot/boot-old.img":                     old,
		"snapshot/boot-new.img":                     recent,
		"snapshot/boot-marked.img":                  old,
		"snapshot/boot-marked.img.used":             recent,
		"snapshot/boot-gone.img.used":               old,
		"stdlib/python_stdlib-o.zip":                old,
		"stdlib/python_stdlib-n.zip":                old,
		"stdlib/python_stdlib-n.zip.used":           recent,
		"pyodide-npm-0.0.1/a.wasm":                  old,
		"pyodide-npm-0.0.2/a.wasm":                  old,
		"pyodide-npm-0.0.2/b.json":                  recent,
		"pyodide-npm-" + PyodideVersion + "/a.wasm": old,
		"dist/blobs/sha256-" + h('1'):               old, // a kept ref's result
		"dist/blobs/sha256-" + h('1') + ".crc":      old,
		"dist/blobs/sha256-" + h('2'):               old,
		"dist/blobs/sha256-" + h('2') + ".crc":      old,
		"dist/blobs/sha256-" + h('3'):               old, // marked through its .crc
		"dist/blobs/sha256-" + h('3') + ".crc":      recent,
		"dist/blobs/sha256-" + h('4'):               old, // a kept ref's input
		"dist/blobs/sha256-" + h('5'):               old, // an old ref's result
		"dist/blobs/.sha256-x.123.tmp":              48 * time.Hour,
		"dist/locks/a.lock":                         48 * time.Hour,
		"dist/locks/b.lock":                         recent,
	}
	for rel, age := range files {
		cacheFile(t, dir, rel, "x", age)
	}
	cacheFile(t, dir, "dist/refs/kind-"+h('4'), h('1')+"\n", recent)
	cacheFile(t, dir, "dist/refs/kind-"+h('6'), h('5')+"\n", old)
	// Read recently, written long ago: in use.
	used := cacheFile(t, dir, "snapshot/boot-read.img", "x", old)
	if err := os.Chtimes(used, time.Now(), time.Now().Add(-old)); err != nil {
		t.Fatal(err)
	}

	trimBefore(dir, time.Now().Add(-trimAge))

	for rel, kept := range map[string]bool{
		"wazero/f1":                                 false,
		"wazero/f2/compiled":                        true,
		"wazero/f2/wazero-v1/bbb":                   true,
		"wazero/f3":                                 false,
		"wazero/f4/wazero-v1/ddd":                   true,
		"wazero/compiled-f0":                        false,
		"wazero/wazero-v1.12.0-amd64-linux":         false,
		"snapshot/boot-old.img":                     false,
		"snapshot/boot-new.img":                     true,
		"snapshot/boot-marked.img":                  true,
		"snapshot/boot-marked.img.used":             true,
		"snapshot/boot-gone.img.used":               false,
		"snapshot/boot-read.img":                    true,
		"stdlib/python_stdlib-o.zip":                false,
		"stdlib/python_stdlib-n.zip":                true,
		"pyodide-npm-0.0.1":                         false,
		"pyodide-npm-0.0.2/a.wasm":                  true,
		"pyodide-npm-" + PyodideVersion + "/a.wasm": true,
		"dist/blobs/sha256-" + h('1'):               true,
		"dist/blobs/sha256-" + h('1') + ".crc":      true,
		"dist/blobs/sha256-" + h('2'):               false,
		"dist/blobs/sha256-" + h('2') + ".crc":      false,
		"dist/blobs/sha256-" + h('3'):               true,
		"dist/blobs/sha256-" + h('4'):               true,
		"dist/blobs/sha256-" + h('5'):               false,
		"dist/blobs/.sha256-x.123.tmp":              false,
		"dist/refs/kind-" + h('4'):                  true,
		"dist/refs/kind-" + h('6'):                  false,
		"dist/locks/a.lock":                         false,
		"dist/locks/b.lock":                         true,
	} {
		_, err := os.Stat(filepath.Join(dir, rel))
		if got := err == nil; got != kept {
			t.Errorf("%s: kept %v, want %v (%v)", rel, got, kept, err)
		}
	}
}

// A trim runs at most once a day per cache: its stamp says when (and
// once per process: trimmed).
func TestTrimCacheOncePerDay(t *testing.T) {
	dir := t.TempDir()
	stale := func() string { return cacheFile(t, dir, "snapshot/boot-x.img", "x", 30*24*time.Hour) }
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	trim := func() { trimmed.Delete(dir); trimCache(dir) }
	stampAt := func(at time.Time) {
		if err := os.Chtimes(filepath.Join(dir, trimStamp), at, at); err != nil {
			t.Fatal(err)
		}
	}

	p := stale()
	trim()
	if exists(p) {
		t.Fatal("the first trim kept an entry unused for 30 days")
	}
	p = stale()
	trim()
	if !exists(p) {
		t.Fatal("a second trim on the same day removed an entry")
	}
	stampAt(time.Now().Add(-trimEvery - time.Minute))
	trim()
	if exists(p) {
		t.Fatal("a trim a day after the last kept an entry unused for 30 days")
	}
	p = stale()
	stampAt(time.Now().Add(365 * 24 * time.Hour)) // a clock that was wrong
	trim()
	if exists(p) {
		t.Fatal("a stamp in the future put the trim off")
	}
}

// MarkUsed writes a file's time only when its mark is stale; MarkBeside
// marks a file in a file of its own, made when missing.
func TestMarkUsed(t *testing.T) {
	dir := t.TempDir()
	fresh := cacheFile(t, dir, "fresh", "x", distload.MarkEvery/2)
	stale := cacheFile(t, dir, "stale", "x", 2*distload.MarkEvery)
	st0, _ := os.Stat(fresh)
	distload.MarkUsed(fresh)
	distload.MarkUsed(stale)
	if st, _ := os.Stat(fresh); !st.ModTime().Equal(st0.ModTime()) {
		t.Errorf("a file marked %v ago was marked again", distload.MarkEvery/2)
	}
	if st, _ := os.Stat(stale); time.Since(st.ModTime()) > time.Minute {
		t.Errorf("a file marked %v ago was not marked", 2*distload.MarkEvery)
	}
	big := cacheFile(t, dir, "big", "x", 30*24*time.Hour)
	distload.MarkBeside(big)
	if st, _ := os.Stat(big); time.Since(st.ModTime()) < time.Hour {
		t.Error("MarkBeside changed the marked file's time")
	}
	if last := distload.LastUseOf(big, big+distload.SidecarSuffix); time.Since(last) > time.Minute {
		t.Errorf("after MarkBeside, the file's last use is %v ago", time.Since(last))
	}
}

// The first interpreter of a process trims its cache, and keeps what it
// uses however long ago that was last used: the compiled code, the
// bytecode standard library, the snapshot, the downloads and their
// translation. A copy of the warm cache, every file aged 30 days, loses
// only what no process uses, and keeps what this one uses as it was (not
// removed and made again), by its marks alone (access times ignored, as
// on a file system mounted noatime).
func TestTrimKeepsWhatTheProcessUses(t *testing.T) {
	ctx := context.Background()
	warm := Config{}.withDefaults()
	if warm.CacheDir == "" || !snapshotsEnabled(warm) {
		t.Skip("caches or snapshots are off")
	}
	in, err := New(ctx, Config{}) // the default cache, warm
	if err != nil {
		t.Fatal(err)
	}
	flavor, key := in.eng.flavor, in.eng.snapshotKey(in.stdlib)[:32]
	in.Close()

	dir := t.TempDir()
	for _, sub := range []string{filepath.Join("wazero", flavor), "stdlib", "dist/blobs", "dist/refs"} {
		copyTree(t, filepath.Join(warm.CacheDir, sub), filepath.Join(dir, sub))
	}
	snap := filepath.Join("snapshot", "boot-"+key+".img")
	copyTree(t, filepath.Join(warm.CacheDir, snap), filepath.Join(dir, snap))
	cacheFile(t, dir, "wazero/0123456789abcdef-other/compiled", "9s\n", 0)
	cacheFile(t, dir, "stdlib/python_stdlib-other.zip", "x", 0)
	old := time.Now().Add(-30 * 24 * time.Hour)
	kept := map[string]os.FileInfo{}
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			kept[p] = st
		}
		return nil
	})
	distload.IgnoreAccessTimes = true
	defer func() { distload.IgnoreAccessTimes = false }()

	in, err = New(ctx, Config{CacheDir: dir, Notice: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if _, err := os.Stat(filepath.Join(dir, trimStamp)); err != nil {
		t.Fatalf("the interpreter did not trim its cache: %v", err)
	}
	for _, gone := range []string{"wazero/0123456789abcdef-other", "stdlib/python_stdlib-other.zip"} {
		if _, err := os.Stat(filepath.Join(dir, gone)); err == nil {
			t.Errorf("%s, unused for 30 days, was kept", gone)
		}
	}
	var removed []string
	for p, before := range kept {
		rel, _ := filepath.Rel(dir, p)
		// A mark's time moves; any other file's must not: one that
		// changed was removed and made again.
		mark := filepath.Base(p) == compiledMarker || strings.HasSuffix(p, ".crc") || strings.HasSuffix(p, distload.SidecarSuffix) ||
			strings.HasPrefix(rel, filepath.Join("dist", "refs"))
		if st, err := os.Stat(p); !strings.Contains(rel, "other") && (err != nil || !mark && !st.ModTime().Equal(before.ModTime())) {
			removed = append(removed, rel)
		}
	}
	if len(removed) > 0 {
		t.Errorf("the trim removed what the interpreter uses: %q", removed)
	}
}

// copyTree copies the regular files under src (or the file src) to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, rel)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
