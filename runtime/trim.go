package runtime

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/distload"
)

// The cache directory keeps what one build of rlm-sandbox needs (see
// Config.CacheDir): the compiled code (17–26 MB per build and mode), a
// boot snapshot (31 MB), the bytecode standard library (20 MB), Pyodide's
// files. Every new build, and every Pyodide, leaves the last one's behind,
// so entries are marked when used (see distload's MarkUsed: a small file
// beside each, at most once an hour) and, at most once a day, the first
// process to start an interpreter removes what no process used in
// trimAge, as the go command trims its build cache. It trims once its
// interpreter is running, so that what the process uses is marked first.
//
//	wazero/<flavor>/           the compiled code of a module, a build and a mode
//	wazero/<flavor>/compiled   its marker: written once compiled, marked when used
//	snapshot/boot-<key>.img    a boot snapshot, marked by boot-<key>.img.used
//	stdlib/python_stdlib-*.zip the bytecode standard library, marked the same way
//	pyodide-npm-<version>/     make's copy of a Pyodide (this one's is kept)
//	dist/                      downloads and the translated module (distload.Cache)
//	trim.txt                   its modification time: the last trim's
const (
	trimAge   = 14 * 24 * time.Hour
	trimEvery = 24 * time.Hour
	trimStamp = "trim.txt"
	// compiledMarker, in a flavor's directory, says its compile finished.
	compiledMarker = "compiled"
)

// trimmed holds the cache directories this process trimmed or found
// trimmed.
var trimmed sync.Map

// trimCache trims cacheDir when it was not trimmed in trimEvery (once per
// process). A cache this user cannot write is left alone. Processes that
// start together may both trim: they remove the same files.
func trimCache(cacheDir string) {
	if cacheDir == "" {
		return
	}
	if _, done := trimmed.LoadOrStore(cacheDir, true); done {
		return
	}
	stamp := filepath.Join(cacheDir, trimStamp)
	now := time.Now()
	if st, err := os.Stat(stamp); err == nil {
		if age := now.Sub(st.ModTime()); age < trimEvery && age > -time.Minute {
			return
		}
	} else if f, err := os.OpenFile(stamp, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
		f.Close() // empty: a full disk has room for it
	}
	if err := os.Chtimes(stamp, now, now); err != nil {
		return
	}
	trimBefore(cacheDir, now.Add(-trimAge))
}

// trimBefore removes from cacheDir what no process used since cutoff.
func trimBefore(cacheDir string, cutoff time.Time) {
	trimCompiled(filepath.Join(cacheDir, "wazero"), cutoff)
	distload.TrimFiles(filepath.Join(cacheDir, "snapshot"), cutoff)
	distload.TrimFiles(filepath.Join(cacheDir, "stdlib"), cutoff)
	ents, _ := os.ReadDir(cacheDir)
	for _, de := range ents {
		// The Pyodide files of other versions (make's copy of this one
		// is what RLM_SANDBOX_PYODIDE names in the docs: kept).
		if name := de.Name(); de.IsDir() && strings.HasPrefix(name, "pyodide-npm-") && name != "pyodide-npm-"+PyodideVersion {
			dir := filepath.Join(cacheDir, name)
			if lastUseIn(dir).Before(cutoff) {
				_ = os.RemoveAll(dir)
			}
		}
	}
	distCache(cacheDir).Trim(cutoff)
}

// trimCompiled removes the flavors' directories whose marker was not used
// since cutoff, or, without a marker (a compile that did not finish, or
// the layout of earlier builds: wazero's own directories and
// compiled-<flavor> files), whose files were not.
func trimCompiled(dir string, cutoff time.Time) {
	ents, _ := os.ReadDir(dir)
	for _, de := range ents {
		p := filepath.Join(dir, de.Name())
		if !de.IsDir() {
			if st, err := de.Info(); err == nil && distload.LastUse(st).Before(cutoff) {
				_ = os.Remove(p)
			}
			continue
		}
		marker := filepath.Join(p, compiledMarker)
		last := distload.LastUseOf(marker)
		if last.IsZero() {
			last = lastUseIn(p)
		}
		if last.Before(cutoff) {
			_ = os.Remove(marker) // first: a flavor with its marker is complete
			_ = os.RemoveAll(p)
		}
	}
}

// lastUseIn is the latest use of a file under dir (not of a directory:
// listing one is an access).
func lastUseIn(dir string) time.Time {
	var last time.Time
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if st, err := d.Info(); err == nil {
			if t := distload.LastUse(st); t.After(last) {
				last = t
			}
		}
		return nil
	})
	return last
}
