package distload

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/internal/refused"
)

// A small synthetic distribution: the loader does not look inside files.
var testFiles = []string{"lock.json", "lib.zip", "mod.wasm"}

func testContent(name string) []byte {
	return bytes.Repeat([]byte(name+" contents\n"), 1000)
}

func testHashes() map[string]string {
	h := map[string]string{}
	for _, name := range testFiles {
		h[name] = sum(testContent(name))
	}
	return h
}

// writeDist writes the synthetic files to a new directory; change, when
// set, may alter them first.
func writeDist(t *testing.T, change func(name string, b []byte) []byte) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range testFiles {
		b := testContent(name)
		if change != nil {
			b = change(name, b)
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

// server serves over loopback HTTP and counts requests; once forbid is
// set, a request fails the test.
type server struct {
	*httptest.Server
	requests atomic.Int64
	forbid   atomic.Bool
}

func serve(t *testing.T, h http.Handler) *server {
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		if s.forbid.Load() {
			t.Errorf("unexpected request %s", r.URL)
			http.Error(w, "no", http.StatusTeapot)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func serveDir(t *testing.T, dir string) *server {
	return serve(t, http.StripPrefix("/dist/", http.FileServer(http.Dir(dir))))
}

func (s *server) index() string { return s.URL + "/dist/" }

// forbidden is a server that fails the test on any request.
func forbidden(t *testing.T) *server {
	s := serve(t, http.NotFoundHandler())
	s.forbid.Store(true)
	return s
}

// closedPort returns an http URL on loopback where nothing listens.
func closedPort(t *testing.T) string { return "http://" + refused.Addr(t) + "/" }

// hanging is a server that never answers (until the client gives up).
func hanging(t *testing.T) *server {
	return serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
}

func opts(cacheDir string, entries ...string) Options {
	return Options{Entries: entries, Files: testFiles, SHA256: testHashes(), Cache: OpenCache(cacheDir)}
}

func checkFiles(t *testing.T, d *Dist) {
	t.Helper()
	for _, name := range testFiles {
		if !bytes.Equal(d.Files[name], testContent(name)) || d.SHA256[name] != sum(testContent(name)) {
			t.Fatalf("%s: wrong contents or hash", name)
		}
	}
}

func TestLoadEachKind(t *testing.T) {
	dir := writeDist(t, nil)
	fileURL := (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String()
	for _, tc := range []struct {
		name, entry string
		requests    int64
	}{
		{"directory", dir, 0},
		{"file URL", fileURL, 0},
		{"http URL", "", int64(len(testFiles))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := serveDir(t, dir)
			entry := tc.entry
			if entry == "" {
				entry = strings.TrimSuffix(srv.index(), "/") // no trailing slash: one is added
			}
			d, err := Load(context.Background(), opts(t.TempDir(), entry))
			if err != nil {
				t.Fatal(err)
			}
			checkFiles(t, d)
			if d.Entry != entry {
				t.Fatalf("entry %q, want %q", d.Entry, entry)
			}
			if n := srv.requests.Load(); n != tc.requests {
				t.Fatalf("%d requests, want %d", n, tc.requests)
			}
		})
	}
}

// failingEntries returns entries that each fail in a different way, with a
// piece of the reason each must report.
func failingEntries(t *testing.T) (entries, reasons []string) {
	good := writeDist(t, nil)
	add := func(entry, reason string) {
		entries = append(entries, entry)
		reasons = append(reasons, reason)
	}
	add(closedPort(t), "connection refused")
	add(serve(t, http.NotFoundHandler()).URL+"/dist/", "404")
	add(hanging(t).URL+"/", "timed out")
	add(serveDir(t, writeDist(t, func(name string, b []byte) []byte {
		if name == "lib.zip" {
			b[10] ^= 1
		}
		return b
	})).index(), "lib.zip: SHA-256 mismatch")
	add(writeDist(t, func(name string, b []byte) []byte {
		if name == "mod.wasm" {
			return nil
		}
		return b
	}), "no mod.wasm in")
	add(good+"-missing", "no lock.json in")
	add("ftp://example.com/pyodide/", "unsupported URL scheme")
	return entries, reasons
}

func TestFallback(t *testing.T) {
	entries, reasons := failingEntries(t)
	good := serveDir(t, writeDist(t, nil))
	o := opts(t.TempDir(), append(entries, good.index())...)
	o.Timeout = 500 * time.Millisecond
	var logged []string
	o.Log = func(entry string, err error) { logged = append(logged, entry+": "+err.Error()) }
	d, err := Load(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	checkFiles(t, d)
	if d.Entry != good.index() {
		t.Fatalf("loaded from %s", d.Entry)
	}
	if len(logged) != len(entries) {
		t.Fatalf("logged %d failures, want %d: %q", len(logged), len(entries), logged)
	}
	for i, e := range entries {
		if !strings.HasPrefix(logged[i], e+": ") || !strings.Contains(logged[i], reasons[i]) {
			t.Errorf("failure %d = %q, want %s with %q", i, logged[i], e, reasons[i])
		}
	}
}

func TestAllFail(t *testing.T) {
	entries, reasons := failingEntries(t)
	o := opts(t.TempDir(), entries...)
	o.Timeout = 500 * time.Millisecond
	_, err := Load(context.Background(), o)
	var all *Error
	if !errors.As(err, &all) || len(all.Entries) != len(entries) {
		t.Fatalf("err = %v", err)
	}
	msg := err.Error()
	for i, e := range entries {
		if all.Entries[i].Entry != e || !strings.Contains(all.Entries[i].Err.Error(), reasons[i]) {
			t.Errorf("entry %d: %v, want %s with %q", i, &all.Entries[i], e, reasons[i])
		}
		if !strings.Contains(msg, e+": ") {
			t.Errorf("message does not list %s:\n%s", e, msg)
		}
	}
	if !errors.Is(err, ErrHashMismatch) {
		t.Errorf("errors.Is(err, ErrHashMismatch) = false")
	}
}

func TestCheckFailureFallsBack(t *testing.T) {
	bad, good := writeDist(t, nil), writeDist(t, nil)
	o := opts(t.TempDir(), bad, good)
	o.Check = func(d *Dist) error {
		if d.Entry == bad {
			return errors.New("does not validate")
		}
		return nil
	}
	d, err := Load(context.Background(), o)
	if err != nil || d.Entry != good {
		t.Fatalf("got %v, %v", d, err)
	}
}

func TestWarmCacheNeedsNoNetwork(t *testing.T) {
	cache := t.TempDir()
	src := serveDir(t, writeDist(t, nil))
	if _, err := Load(context.Background(), opts(cache, src.index())); err != nil {
		t.Fatal(err)
	}
	d, err := Load(context.Background(), opts(cache, forbidden(t).index(), closedPort(t)))
	if err != nil {
		t.Fatal(err)
	}
	checkFiles(t, d)
	if d.Entry != "cache" {
		t.Fatalf("loaded from %s", d.Entry)
	}
}

func TestDamagedCacheEntryRefetched(t *testing.T) {
	cache := t.TempDir()
	src := serveDir(t, writeDist(t, nil))
	if _, err := Load(context.Background(), opts(cache, src.index())); err != nil {
		t.Fatal(err)
	}
	blob := filepath.Join(cache, "blobs", "sha256-"+sum(testContent("mod.wasm")))
	if err := os.WriteFile(blob, []byte("half-writ"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := Load(context.Background(), opts(cache, src.index()))
	if err != nil {
		t.Fatal(err)
	}
	checkFiles(t, d)
	if n := src.requests.Load(); n != int64(len(testFiles))+1 {
		t.Fatalf("%d requests, want %d (the damaged file again)", n, len(testFiles)+1)
	}
}

// TestDamagedSameSizeEntryRejected: a cached blob whose bytes changed in
// place (same size, its .crc untouched) is detected and not used.
func TestDamagedSameSizeEntryRejected(t *testing.T) {
	c := OpenCache(t.TempDir())
	b := bytes.Repeat([]byte("pyodide"), 1000)
	h, err := c.Put(b)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := c.Get(h); !ok || !bytes.Equal(got, b) {
		t.Fatal("a fresh blob is not readable")
	}
	blob := c.blobPath(h)
	damaged := bytes.Clone(b)
	damaged[3000] ^= 1
	if err := os.WriteFile(blob, damaged, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Get(h); ok {
		t.Fatal("a damaged blob was used")
	}
	if _, err := os.Stat(blob); !os.IsNotExist(err) {
		t.Fatalf("the damaged blob is still there: %v", err)
	}
}

// TestLocalEntryVerifiedOnce: files loaded from a local directory enter
// the cache once verified, and later loads take them from there.
func TestLocalEntryVerifiedOnce(t *testing.T) {
	cache := t.TempDir()
	dir := writeDist(t, nil)
	d, err := Load(context.Background(), opts(cache, dir))
	if err != nil || d.Entry != dir {
		t.Fatalf("first load from %v: %v", d, err)
	}
	d, err = Load(context.Background(), opts(cache, dir))
	if err != nil || d.Entry != "cache" {
		t.Fatalf("second load from %v: %v", d, err)
	}
	checkFiles(t, d)
}

func TestTamperedDownloadNotCached(t *testing.T) {
	cache := t.TempDir()
	bad := serveDir(t, writeDist(t, func(name string, b []byte) []byte { return append(b, '!') }))
	if _, err := Load(context.Background(), opts(cache, bad.index())); !errors.Is(err, ErrHashMismatch) {
		t.Fatalf("err = %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(cache, "blobs")); len(ents) != 0 {
		t.Fatalf("cache holds %d files", len(ents))
	}
}

func TestUnverified(t *testing.T) {
	dir := writeDist(t, nil)
	o := opts(t.TempDir(), dir)
	o.SHA256 = map[string]string{"lock.json": sum(testContent("lock.json"))}
	if _, err := Load(context.Background(), o); !errors.Is(err, ErrNoHash) {
		t.Fatalf("without AllowUnverified: %v", err)
	}
	o.AllowUnverified = true
	d, err := Load(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	checkFiles(t, d)
}

func TestUnverifiedDownloadCachedByURL(t *testing.T) {
	cache := t.TempDir()
	src := serveDir(t, writeDist(t, nil))
	o := opts(cache, src.index())
	o.SHA256, o.AllowUnverified = nil, true
	rejected := errors.New("rejected")
	o.Check = func(*Dist) error { return rejected }
	if _, err := Load(context.Background(), o); !errors.Is(err, rejected) {
		t.Fatalf("err = %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(cache, "blobs")); len(ents) != 0 {
		t.Fatalf("a rejected entry left %d files in the cache", len(ents))
	}
	o.Check = nil // so it is fetched again
	if _, err := Load(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if n := src.requests.Load(); n != 2*int64(len(testFiles)) {
		t.Fatalf("%d requests, want %d", n, 2*len(testFiles))
	}
	src.forbid.Store(true)
	d, err := Load(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	checkFiles(t, d)
}

func TestParseSHA256(t *testing.T) {
	h := sum([]byte("x"))
	b64 := "sha256-LXEWQrcmsEQBYnyp+6wy9chTD7GQPMTbAiWHF5IaSIE="
	for _, tc := range []struct{ in, want string }{
		{h, h},
		{strings.ToUpper(h), h},
		{"sha256-" + h, h},
		{b64, h},
		{"LXEWQrcmsEQBYnyp+6wy9chTD7GQPMTbAiWHF5IaSIE=", ""}, // base64 needs the prefix
		{"sha512-" + h, ""},
		{h[:60], ""},
	} {
		got, err := ParseSHA256(tc.in)
		if got != tc.want || (err != nil) != (tc.want == "") {
			t.Errorf("ParseSHA256(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestLockHonoursContext(t *testing.T) {
	c := OpenCache(t.TempDir())
	unlock, err := c.Lock(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	TestHookLockWait = func(string) { cancel() }
	defer func() { TestHookLockWait = nil }()
	if _, err := c.Lock(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("second Lock: %v", err)
	}
	TestHookLockWait = nil
	unlock()
	unlock2, err := c.Lock(context.Background(), "k") // the abandoned wait gave it back
	if err != nil {
		t.Fatal(err)
	}
	unlock2()
}

func TestDerive(t *testing.T) {
	cacheDir := t.TempDir()
	c := OpenCache(cacheDir)
	in := []byte("input")
	calls := 0
	upper := func() ([]byte, error) { calls++; return bytes.ToUpper(in), nil }
	same := func() ([]byte, error) { calls++; return in, nil }
	for range 2 {
		b, h, err := c.Derive(context.Background(), "upper", in, "", upper)
		if err != nil || string(b) != "INPUT" || h != sum(b) {
			t.Fatalf("Derive = %q, %s, %v", b, h, err)
		}
		b, h, err = c.Derive(context.Background(), "same", in, sum(in), same)
		if err != nil || string(b) != "input" || h != sum(in) {
			t.Fatalf("Derive = %q, %s, %v", b, h, err)
		}
	}
	if calls != 2 {
		t.Fatalf("computed %d times, want 2", calls)
	}
	blobs, _ := os.ReadDir(filepath.Join(cacheDir, "blobs"))
	if len(blobs) != 2 || blobs[0].Name() != "sha256-"+sum([]byte("INPUT")) || blobs[1].Name() != blobs[0].Name()+".crc" {
		t.Fatalf("blobs: %v (an unchanged result is not copied)", blobs)
	}
}
