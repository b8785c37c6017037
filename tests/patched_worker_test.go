package tests

import (
	"bytes"
	"debug/buildinfo"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/runtime"
)

// `make build` builds the binaries with wazero patched by patches/wazero/
// (see its README and RATIONALE.md). These tests catch a build that fell
// back to stock wazero, and check what the patches promise about the
// compilation cache.

const wazeroPath = "github.com/tetratelabs/wazero"

// TestBinariesUsePatchedWazero reads the build information of the binaries:
// wazero must be replaced by the patched copy scripts/patch-wazero.sh
// writes.
func TestBinariesUsePatchedWazero(t *testing.T) {
	for _, name := range []string{"rlm-worker", "rlm-sandbox"} {
		bin, err := filepath.Abs("../bin/" + name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := buildinfo.ReadFile(bin)
		if err != nil {
			t.Fatalf("%v (run `make build`)", err)
		}
		found := false
		for _, dep := range info.Deps {
			if dep.Path != wazeroPath {
				continue
			}
			found = true
			want := "./build/wazero-" + dep.Version + "-rlm-" // and the patches' hash
			if dep.Replace == nil || !strings.HasPrefix(dep.Replace.Path, want) {
				t.Errorf("bin/%s uses %s %s replaced by %+v, want %s: build it with `make build`",
					name, dep.Path, dep.Version, dep.Replace, want)
			}
		}
		if !found {
			t.Errorf("bin/%s does not depend on %s", name, wazeroPath)
		}
	}
}

// TestPatchedCompilationCache compiles Pyodide into an empty cache with the
// patched binaries, then checks that the entry keeps its native code at a
// page-aligned offset, that a worker maps that code from the file rather
// than copying it, and that an entry whose code was corrupted or cut short
// is refused with an error, never run.
func TestPatchedCompilationCache(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles Pyodide (about 10 s)")
	}
	shared := runtime.CacheDir()
	cache := filepath.Join(t.TempDir(), "cache")
	// The Pyodide files and their exnref translation, not the compiled code.
	copyDir(t, filepath.Join(shared, "dist", "blobs"), filepath.Join(cache, "dist", "blobs"))
	copyDir(t, filepath.Join(shared, "dist", "refs"), filepath.Join(cache, "dist", "refs"))
	env := []string{
		"RLM_SANDBOX_CACHE=" + cache,
		"RLM_SANDBOX_PYODIDE=" + string(runtime.DefaultDistribution()),
	}
	run := func() (string, string, int) {
		t.Helper()
		return runCLIEnv(t, env, "", "exec", "-c", "print(6 * 7)")
	}

	if out, errs, code := run(); code != 0 || out != "42\n" {
		t.Fatalf("cold run: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	entry, codeAt, codeLen := largestCacheEntry(t, filepath.Join(cache, "wazero"))
	if codeAt%(64<<10) != 0 {
		t.Fatalf("%s: native code at offset %d, want a multiple of 64 KiB", entry, codeAt)
	}

	t.Run("mapped from the file", func(t *testing.T) {
		p := startCLIEnv(t, env, "exec", "-c", "print('ready', flush=True)\nimport time\ntime.sleep(120)")
		p.stdout.waitFor(t, "ready\n", time.Minute)
		workers := childPIDs(t, p.cmd.Process.Pid)
		if len(workers) != 1 {
			t.Fatalf("rlm-sandbox has children %v, want one worker", workers)
		}
		maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", workers[0]))
		if err != nil {
			t.Skipf("cannot read the worker's mappings: %v", err)
		}
		var mapped []string
		for _, line := range strings.Split(string(maps), "\n") {
			if strings.HasSuffix(line, " "+entry) {
				mapped = append(mapped, line)
			}
		}
		if len(mapped) != 1 || !strings.Contains(mapped[0], " r-xp ") {
			t.Fatalf("the worker maps %s as %q, want one private read+exec mapping", entry, mapped)
		}
	})

	original, err := os.ReadFile(entry)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		entry  func() []byte
		errHas string
	}{
		{"corrupt code", func() []byte {
			b := bytes.Clone(original)
			b[codeAt+codeLen/2] ^= 0xff
			return b
		}, "checksum mismatch"},
		{"truncated code", func() []byte { return original[:codeAt+codeLen/2] }, "error reading executable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(entry, tc.entry(), 0o600); err != nil {
				t.Fatal(err)
			}
			out, errs, code := run()
			if code == 0 || out != "" || !strings.Contains(errs, tc.errHas) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want a failure that says %q", code, out, errs, tc.errHas)
			}
		})
	}
}

// largestCacheEntry finds the largest file in wazero's compilation cache
// under dir (the Pyodide module's) and returns its path and the offset and
// length of its native code. The layout is that of
// internal/engine/wazevo/engine_cache.go with the padding patch 0002 adds:
// "WAZEVO", version length and version, function count, 8 bytes per
// function, code length, zeros up to a multiple of 64 KiB, code, ...
func largestCacheEntry(t *testing.T, dir string) (path string, codeAt, codeLen int) {
	t.Helper()
	var size int64
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() && fi.Size() > size {
			path, size = p, fi.Size()
		}
		return err
	})
	if err != nil || path == "" {
		t.Fatalf("no compilation cache entry under %s (%v)", dir, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 7 || string(b[:6]) != "WAZEVO" {
		t.Fatalf("%s is not a wazero cache entry", path)
	}
	at := 7 + int(b[6])
	if len(b) < at+4 {
		t.Fatalf("%s: short header", path)
	}
	at += 4 + 8*int(binary.LittleEndian.Uint32(b[at:]))
	if len(b) < at+8 {
		t.Fatalf("%s: short header", path)
	}
	codeLen = int(binary.LittleEndian.Uint64(b[at:]))
	at += 8
	codeAt = (at + 64<<10 - 1) &^ (64<<10 - 1)
	if codeLen <= 0 || len(b) < codeAt+codeLen || !bytes.Equal(b[at:codeAt], make([]byte, codeAt-at)) {
		t.Fatalf("%s: no native code at the first multiple of 64 KiB after the header (stock wazero's layout?)", path)
	}
	return path, codeAt, codeLen
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		t.Fatalf("%v (run `make` first)", err)
	}
}
