package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/internal/refused"
	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/distload"
)

// Loading Pyodide from index URLs, on the real distribution `make` fetched.

// realDist returns the files of the distribution `make` fetched, and the
// Config.Integrity to load them with: nil when they are the stock files of
// PyodideVersion (the built-in hashes apply), their own hashes when the
// module is an older build's binaryen translation.
func realDist(t testing.TB) (files map[string][]byte, integrity map[string]string) {
	t.Helper()
	dir := string(DefaultDistribution())
	files = map[string][]byte{}
	stock := true
	for _, name := range distFiles {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("%v (run `make` to fetch Pyodide)", err)
		}
		files[name] = b
		stock = stock && distload.SHA256(b) == pinnedSHA256[name]
	}
	if stock {
		return files, nil
	}
	integrity = map[string]string{}
	for name, b := range files {
		integrity[name] = distload.SHA256(b)
	}
	return files, integrity
}

// writeFiles writes files to a new directory, after change (when set) has
// had a chance to alter or drop (return nil) each one.
func writeFiles(t testing.TB, files map[string][]byte, change func(name string, b []byte) []byte) string {
	t.Helper()
	dir := t.TempDir()
	for name, b := range files {
		if change != nil {
			b = change(name, bytes.Clone(b))
		}
		if b == nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// testCache returns an empty cache directory whose compilation cache is
// the machine's, so that tests do not compile Pyodide again.
func testCache(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	shared := filepath.Join(CacheDir(), "wazero")
	if err := os.MkdirAll(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(shared, filepath.Join(dir, "wazero")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// httpDist serves files over loopback HTTP, counting requests; with
// forbid set, any request fails the test.
type httpDist struct {
	*httptest.Server
	requests atomic.Int64
	forbid   atomic.Bool
}

func serveFiles(t testing.TB, h http.Handler) *httpDist {
	s := &httpDist{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		if s.forbid.Load() {
			t.Errorf("unexpected request for %s", r.URL)
			http.Error(w, "forbidden by the test", http.StatusTeapot)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func serveDistDir(t testing.TB, dir string) *httpDist {
	return serveFiles(t, http.StripPrefix("/pyodide/", http.FileServer(http.Dir(dir))))
}

func (s *httpDist) index() string { return s.URL + "/pyodide/" }

// checkPython boots an interpreter from cfg and runs a line of Python.
func checkPython(t *testing.T, cfg Config) {
	t.Helper()
	in, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var out strings.Builder
	res, err := in.Exec(context.Background(), "import sys; print(sys.version_info[:2])", Output{Stdout: &out})
	if err != nil || res.Error != nil {
		t.Fatalf("%v %v", err, res.Error)
	}
	if got := strings.TrimSpace(out.String()); got != "(3, 14)" {
		t.Fatalf("printed %q", got)
	}
}

func TestLoadFromIndexURL(t *testing.T) {
	files, integrity := realDist(t)
	dir := writeFiles(t, files, nil)
	for _, tc := range []struct {
		name  string
		entry func(*httpDist) string
		want  int64 // requests
	}{
		{"directory", func(*httpDist) string { return dir }, 0},
		{"file URL", func(*httpDist) string { return (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String() }, 0},
		{"http URL", (*httpDist).index, int64(len(distFiles))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := serveDistDir(t, dir)
			var notice strings.Builder
			checkPython(t, Config{IndexURL: []string{tc.entry(srv)}, Integrity: integrity, CacheDir: testCache(t), Notice: &notice})
			if n := srv.requests.Load(); n != tc.want {
				t.Fatalf("%d requests, want %d", n, tc.want)
			}
			if strings.Contains(notice.String(), "cannot load") {
				t.Fatalf("notice: %s", notice.String())
			}
		})
	}
}

// Each entry fails in its own way; want is part of the reason it must give.
type badEntry struct{ entry, want string }

// badEntries returns index URLs that fail, one per kind of failure. They
// are meant for a Config with AllowUnverified and only pyodide-lock.json's
// hash, so that a corrupt zip and a wasm that does not validate get past
// the hash check and are caught by what follows.
func badEntries(t *testing.T, files map[string][]byte) []badEntry {
	closedURL := "http://" + refused.Addr(t) + "/pyodide/"
	hang := serveFiles(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	alter := func(file string, to func([]byte) []byte) string {
		return serveDistDir(t, writeFiles(t, files, func(name string, b []byte) []byte {
			if name == file {
				return to(b)
			}
			return b
		})).index()
	}
	return []badEntry{
		{closedURL, "connection refused"},
		{serveFiles(t, http.NotFoundHandler()).URL + "/pyodide/", "404 Not Found"},
		{hang.URL + "/pyodide/", "timed out"},
		{alter(fileLock, func(b []byte) []byte { b[len(b)/2] ^= 1; return b }), fileLock + ": SHA-256 mismatch"},
		{alter(fileStdlib, func(b []byte) []byte { return []byte("not a zip at all") }), fileStdlib + ": zip: not a valid zip file"},
		{alter(fileWasm, func([]byte) []byte { return invalidWasm }), "compile " + fileWasm},
	}
}

// invalidWasm is a well-formed module whose only function body holds an
// opcode that does not exist: it parses, and wazero rejects it.
var invalidWasm = []byte{
	0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
	0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // type section: () -> ()
	0x03, 0x02, 0x01, 0x00, // function section: one function of type 0
	0x0a, 0x05, 0x01, 0x03, 0x00, 0xff, 0x0b, // code section: no locals, 0xff, end
}

func unverifiedConfig(t *testing.T, files map[string][]byte, entries []string, notice *strings.Builder) Config {
	return Config{
		IndexURL:        entries,
		Integrity:       map[string]string{fileLock: "sha256-" + distload.SHA256(files[fileLock])},
		AllowUnverified: true,
		FetchTimeout:    2 * time.Second,
		CacheDir:        testCache(t),
		Notice:          notice,
	}
}

func TestIndexURLFallback(t *testing.T) {
	files, _ := realDist(t)
	bad := badEntries(t, files)
	good := serveDistDir(t, writeFiles(t, files, nil))
	var entries []string
	for _, b := range bad {
		entries = append(entries, b.entry)
	}
	var notice strings.Builder
	checkPython(t, unverifiedConfig(t, files, append(entries, good.index()), &notice))
	lines := strings.Split(strings.TrimSpace(notice.String()), "\n")
	var failures []string
	for _, l := range lines {
		if strings.Contains(l, "cannot load Pyodide") {
			failures = append(failures, l)
		}
	}
	if len(failures) != len(bad) {
		t.Fatalf("%d failures reported, want %d:\n%s", len(failures), len(bad), notice.String())
	}
	for i, b := range bad {
		if !strings.Contains(failures[i], b.entry+": ") || !strings.Contains(failures[i], b.want) {
			t.Errorf("failure %d: %s\nwant %s with %q", i, failures[i], b.entry, b.want)
		}
	}
	// pyodide-lock.json, whose hash is known, came from the cache (the
	// entries with a bad zip or module downloaded it); the other two files,
	// unverified, must come from the entry that worked.
	if n := good.requests.Load(); n != int64(len(distFiles))-1 {
		t.Errorf("good entry: %d requests, want %d", n, len(distFiles)-1)
	}
}

func TestIndexURLAllFail(t *testing.T) {
	files, _ := realDist(t)
	bad := badEntries(t, files)
	var entries []string
	for _, b := range bad {
		entries = append(entries, b.entry)
	}
	var notice strings.Builder
	_, err := New(context.Background(), unverifiedConfig(t, files, entries, &notice))
	if !errors.Is(err, ErrDistribution) {
		t.Fatalf("err = %v", err)
	}
	var all *distload.Error
	if !errors.As(err, &all) || len(all.Entries) != len(bad) {
		t.Fatalf("err = %v", err)
	}
	msg := err.Error()
	for i, b := range bad {
		if !strings.Contains(msg, "\n\t"+b.entry+": ") || !strings.Contains(all.Entries[i].Err.Error(), b.want) {
			t.Errorf("entry %d (%s, want %q) in:\n%s", i, b.entry, b.want, msg)
		}
	}
}

func TestTamperedFileRejected(t *testing.T) {
	files, integrity := realDist(t)
	for _, name := range distFiles {
		t.Run(name, func(t *testing.T) {
			srv := serveDistDir(t, writeFiles(t, files, func(n string, b []byte) []byte {
				if n == name {
					b[len(b)-100] ^= 0x20
				}
				return b
			}))
			_, err := New(context.Background(), Config{IndexURL: []string{srv.index()}, Integrity: integrity, CacheDir: testCache(t), Notice: new(strings.Builder)})
			if !errors.Is(err, ErrDistribution) || !errors.Is(err, distload.ErrHashMismatch) || !strings.Contains(err.Error(), name) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

func TestPinnedHashesRejectOtherFiles(t *testing.T) {
	files, _ := realDist(t)
	dir := writeFiles(t, files, func(name string, b []byte) []byte {
		if name == fileLock {
			return append(b, '\n') // still valid JSON, not the published file
		}
		return b
	})
	_, err := New(context.Background(), Config{IndexURL: []string{dir}, CacheDir: testCache(t), Notice: new(strings.Builder)})
	if !errors.Is(err, distload.ErrHashMismatch) || !strings.Contains(err.Error(), pinnedSHA256[fileLock]) {
		t.Fatalf("err = %v", err)
	}
}

func TestWarmCacheNeedsNoNetwork(t *testing.T) {
	files, integrity := realDist(t)
	cache := testCache(t)
	src := serveDistDir(t, writeFiles(t, files, nil))
	checkPython(t, Config{IndexURL: []string{src.index()}, Integrity: integrity, CacheDir: cache, Notice: new(strings.Builder)})
	src.forbid.Store(true)
	closed := refused.Addr(t)
	// A new list, so that this process loads again rather than reuse the
	// engine it has: every file must come from the cache.
	var notice strings.Builder
	checkPython(t, Config{IndexURL: []string{"http://" + closed + "/", src.index()}, Integrity: integrity, CacheDir: cache, Notice: &notice})
	if notice.Len() != 0 {
		t.Fatalf("notice: %s", notice.String())
	}
}

func TestConfigErrors(t *testing.T) {
	for _, integrity := range []map[string]string{
		{"pyodide.js": strings.Repeat("0", 64)},
		{fileWasm: "md5-abc"},
	} {
		_, err := New(context.Background(), Config{IndexURL: []string{t.TempDir()}, Integrity: integrity, CacheDir: "-"})
		if !errors.Is(err, ErrDistribution) || !strings.Contains(err.Error(), "Integrity") {
			t.Errorf("Integrity %v: err = %v", integrity, err)
		}
	}
}

// TestDistHelperProcess is the child of TestTwoProcessesFillEmptyCache; it
// does nothing unless run by it.
func TestDistHelperProcess(t *testing.T) {
	if os.Getenv("RLM_DIST_HELPER") != "1" {
		t.Skip("helper process")
	}
	distload.TestHookLockWait = func(key string) { fmt.Println("waiting", key) }
	var integrity map[string]string
	if s := os.Getenv("RLM_DIST_INTEGRITY"); s != "" {
		integrity = map[string]string{}
		for _, kv := range strings.Split(s, ",") {
			name, h, _ := strings.Cut(kv, "=")
			integrity[name] = h
		}
	}
	checkPython(t, Config{
		IndexURL:  []string{os.Getenv("RLM_DIST_URL")},
		Integrity: integrity,
		CacheDir:  os.Getenv("RLM_DIST_CACHE"),
		Notice:    os.Stderr,
	})
}

// TestTwoProcessesFillEmptyCache starts two processes at once on an empty
// cache. The server holds the first download until the other process is
// waiting for the lock the first holds, so they really contend. Both must
// boot Python, each file must be downloaded once, and the cache must hold
// one complete copy of each, plus at most the translated module.
func TestTwoProcessesFillEmptyCache(t *testing.T) {
	files, integrity := realDist(t)
	cache := testCache(t)
	waiting := make(chan struct{})
	var waitOnce, first sync.Once
	fs := http.StripPrefix("/pyodide/", http.FileServer(http.Dir(writeFiles(t, files, nil))))
	srv := serveFiles(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first.Do(func() {
			select {
			case <-waiting:
			case <-time.After(2 * time.Minute):
				t.Error("the second process never waited for the first's lock")
			}
		})
		fs.ServeHTTP(w, r)
	}))
	var kv []string
	for name, h := range integrity {
		kv = append(kv, name+"="+h)
	}
	helperProcesses(t, 2, "TestDistHelperProcess", []string{"RLM_DIST_HELPER=1", "RLM_DIST_URL=" + srv.index(),
		"RLM_DIST_CACHE=" + cache, "RLM_DIST_INTEGRITY=" + strings.Join(kv, ",")}, func(line string) {
		if strings.HasPrefix(line, "waiting ") {
			waitOnce.Do(func() { close(waiting) })
		}
	})
	if n := srv.requests.Load(); n != int64(len(distFiles)) {
		t.Errorf("%d downloads, want %d", n, len(distFiles))
	}
	blobs, err := os.ReadDir(filepath.Join(cache, "dist", "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range blobs {
		if !strings.HasSuffix(b.Name(), ".crc") { // each blob's size and CRC
			names = append(names, b.Name())
		}
	}
	c := distload.OpenCache(filepath.Join(cache, "dist"))
	for _, name := range distFiles {
		if _, ok := c.Get(distload.SHA256(files[name])); !ok {
			t.Errorf("%s is not in the cache: %v", name, names)
		}
	}
	// The three files, and the translated module unless the module had
	// nothing to translate; no temporary or partial file.
	if len(names) < len(distFiles) || len(names) > len(distFiles)+1 {
		t.Errorf("cache holds %v", names)
	}
	for _, n := range names {
		if !strings.HasPrefix(n, "sha256-") {
			t.Errorf("cache holds %s", n)
		}
	}
}
