package runtime

import (
	"context"
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
		"wazero/wazero-v1/aaa":                      old, // listed by an old marker
		"wazero/wazero-v1/bbb":                      old, // listed by a recent marker
		"wazero/wazero-v1/ccc":                      old,
		"wazero/wazero-v1/ddd":                      recent,
		"wazero/wazero-v0/eee":                      old,
		"snapshot/boot-old.img":                     old,
		"snapshot/boot-new.img":                     recent,
		"stdlib/python_stdlib-o.zp":                 old,
		"stdlib/python_stdlib-n.zp":                 recent,
		"pyodide-npm-0.0.1/a.wasm":                  old,
		"pyodide-npm-0.0.2/a.wasm":                  old,
		"pyodide-npm-0.0.2/b.json":                  recent,
		"pyodide-npm-" + PyodideVersion + "/a.wasm": old,
		"dist/blobs/sha256-" + h('1'):               old, // a kept ref's result
		"dist/blobs/sha256-" + h('1') + ".crc":      old,
		"dist/blobs/sha256-" + h('2'):               old,
		"dist/blobs/sha256-" + h('2') + ".crc":      old,
		"dist/blobs/sha256-" + h('3'):               recent,
		"dist/blobs/sha256-" + h('4'):               old, // a kept ref's input
		"dist/blobs/sha256-" + h('5'):               old, // an old ref's result
		"dist/blobs/.sha256-x.123.tmp":              48 * time.Hour,
		"dist/locks/a.lock":                         48 * time.Hour,
		"dist/locks/b.lock":                         recent,
	}
	for rel, age := range files {
		cacheFile(t, dir, rel, "x", age)
	}
	cacheFile(t, dir, "wazero/compiled-old", "9s\nfile "+filepath.Join("wazero-v1", "aaa")+"\n", old)
	cacheFile(t, dir, "wazero/compiled-new", "9s\nfile "+filepath.Join("wazero-v1", "bbb")+"\n", recent)
	cacheFile(t, dir, "dist/refs/kind-"+h('4'), h('1')+"\n", recent)
	cacheFile(t, dir, "dist/refs/kind-"+h('6'), h('5')+"\n", old)
	// Read recently, written long ago: in use.
	used := cacheFile(t, dir, "wazero/wazero-v1/fff", "x", old)
	if err := os.Chtimes(used, time.Now(), time.Now().Add(-old)); err != nil {
		t.Fatal(err)
	}

	trimBefore(dir, time.Now().Add(-trimAge))

	for rel, kept := range map[string]bool{
		"wazero/compiled-old":                       false,
		"wazero/compiled-new":                       true,
		"wazero/wazero-v1/aaa":                      false,
		"wazero/wazero-v1/bbb":                      true,
		"wazero/wazero-v1/ccc":                      false,
		"wazero/wazero-v1/ddd":                      true,
		"wazero/wazero-v1/fff":                      true,
		"wazero/wazero-v0":                          false,
		"snapshot/boot-old.img":                     false,
		"snapshot/boot-new.img":                     true,
		"stdlib/python_stdlib-o.zp":                 false,
		"stdlib/python_stdlib-n.zp":                 true,
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

// A trim runs at most once a day per cache: its stamp says when.
func TestTrimCacheOncePerDay(t *testing.T) {
	dir := t.TempDir()
	stale := func() string { return cacheFile(t, dir, "snapshot/boot-x.img", "x", 30*24*time.Hour) }
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }

	p := stale()
	trimCache(dir)
	if exists(p) {
		t.Fatal("the first trim kept an entry unused for 30 days")
	}
	p = stale()
	trimCache(dir)
	if !exists(p) {
		t.Fatal("a second trim on the same day removed an entry")
	}
	day := time.Now().Add(-trimEvery - time.Minute)
	if err := os.Chtimes(filepath.Join(dir, trimStamp), day, day); err != nil {
		t.Fatal(err)
	}
	trimCache(dir)
	if exists(p) {
		t.Fatal("a trim a day after the last kept an entry unused for 30 days")
	}
}

// A compile's marker lists the wazero cache files it wrote; using the
// marker marks them, so they stay while it is used, whatever the file
// system does with access times.
func TestCompileMarker(t *testing.T) {
	dir := t.TempDir()
	before := cacheFile(t, dir, "wazero-v1/before", "x", time.Hour)
	start := time.Now()
	mine := cacheFile(t, dir, "wazero-v1/mine", "x", 0)
	marker := filepath.Join(dir, "compiled-x")
	writeMarker(marker, start, 9*time.Second)
	got := markerFiles(marker)
	if len(got) != 1 || got[0] != filepath.Join("wazero-v1", "mine") {
		t.Fatalf("marker lists %q, want only wazero-v1/mine", got)
	}

	long := time.Now().Add(-30 * 24 * time.Hour)
	for _, p := range []string{marker, mine, before} {
		if err := os.Chtimes(p, long, long); err != nil {
			t.Fatal(err)
		}
	}
	markCompiled(marker, long)
	for p, marked := range map[string]bool{marker: true, mine: true, before: false} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := time.Since(st.ModTime()) < time.Hour; got != marked {
			t.Errorf("%s: marked %v, want %v", filepath.Base(p), got, marked)
		}
	}
}

// MarkUsed writes a file's time only when its mark is stale.
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
}

// Loading the runtime with a cache trims it (or finds it trimmed today).
func TestLoadTrimsCache(t *testing.T) {
	cfg := Config{}.withDefaults()
	if cfg.CacheDir == "" {
		t.Skip("caches are off")
	}
	if _, err := loadEngine(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(cfg.CacheDir, trimStamp))
	if err != nil {
		t.Fatalf("loading the runtime did not trim its cache: %v", err)
	}
	if age := time.Since(st.ModTime()); age > trimEvery {
		t.Errorf("the cache was last trimmed %v ago", age)
	}
}
