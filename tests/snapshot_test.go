package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlm-sandbox/rlm-sandbox/runtime"
	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
)

// sharedCache is a cache directory that shares the machine's downloads,
// compiled code and bytecode stdlib, but not its boot snapshots.
func sharedCache(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, sub := range []string{"dist", "wazero", "stdlib"} {
		if err := os.Symlink(filepath.Join(runtime.CacheDir(), sub), filepath.Join(dir, sub)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func snapshots(t *testing.T, cache string) []os.DirEntry {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(cache, "snapshot"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var images []os.DirEntry
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".used") { // a boot image's mark of use (runtime/trim.go)
			images = append(images, e)
		}
	}
	return images
}

// TestSnapshotSwitch: NoSnapshot reaches the interpreter in both modes
// (nothing is written); without it, the first sandbox writes the boot
// snapshot that later ones start from, and they behave the same.
func TestSnapshotSwitch(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		cache := sharedCache(t)
		off := newSandbox(t, m, supervisor.Config{CacheDir: cache, NoSnapshot: true}, "ctx")
		if got := exec(t, off, "print(context, 6 * 7)").Stdout; got != "ctx 42\n" {
			t.Errorf("stdout %q", got)
		}
		if ents := snapshots(t, cache); len(ents) != 0 {
			t.Fatalf("NoSnapshot wrote %v", ents)
		}
		for range 2 {
			sb := newSandbox(t, m, supervisor.Config{CacheDir: cache}, "ctx")
			if got := exec(t, sb, "print(context, 6 * 7)").Stdout; got != "ctx 42\n" {
				t.Errorf("stdout %q", got)
			}
			if ce := exec(t, sb, "1/0"); ce.ErrorType != "ZeroDivisionError" {
				t.Errorf("error %q %q", ce.ErrorType, ce.Traceback)
			}
		}
		if ents := snapshots(t, cache); len(ents) != 1 {
			t.Errorf("snapshot directory holds %v, want one boot image", ents)
		}
	})
}
