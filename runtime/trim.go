package runtime

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/distload"
)

// The cache directory keeps what one build of rlm-sandbox needs (see
// Config.CacheDir): the compiled code (17–26 MB per build and mode), a
// boot snapshot (31 MB), the bytecode standard library (20 MB), Pyodide's
// files. Every new build, and every Pyodide, leaves the last one's behind,
// so entries are marked when used (distload.MarkUsed: their modification
// time, at most once an hour) and, at most once a day, the first process
// to load the runtime removes what no process used in trimAge, as the go
// command trims its build cache.
const (
	trimAge   = 14 * 24 * time.Hour
	trimEvery = 24 * time.Hour
	// trimStamp, in the cache directory, was written by the last trim.
	trimStamp = "trim.txt"
)

// trimCache trims cacheDir when it was not trimmed in trimEvery. A cache
// this user cannot write is left alone. Processes that start together may
// both trim: they remove the same files.
func trimCache(cacheDir string) {
	stamp := filepath.Join(cacheDir, trimStamp)
	if st, err := os.Stat(stamp); err == nil && time.Since(st.ModTime()) < trimEvery {
		return
	}
	now := time.Now()
	if err := os.WriteFile(stamp, []byte(now.UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return
	}
	trimBefore(cacheDir, now.Add(-trimAge))
}

// trimBefore removes from cacheDir what no process used since cutoff.
func trimBefore(cacheDir string, cutoff time.Time) {
	trimCompiled(filepath.Join(cacheDir, "wazero"), cutoff)
	trimFiles(filepath.Join(cacheDir, "snapshot"), cutoff)
	trimFiles(filepath.Join(cacheDir, "stdlib"), cutoff)
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

// trimCompiled trims the compiled code: dir holds wazero's file caches
// (a directory per wazero version, a file per module) and this package's
// markers (compiled-<flavor>, which list the files their compile wrote;
// compile marks those when it uses the marker). A file is kept while a
// kept marker lists it or a process read it since cutoff.
func trimCompiled(dir string, cutoff time.Time) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	listed := map[string]bool{}
	for _, de := range ents {
		if !de.Type().IsRegular() || !strings.HasPrefix(de.Name(), "compiled-") {
			continue
		}
		p := filepath.Join(dir, de.Name())
		if st, err := de.Info(); err == nil && distload.LastUse(st).Before(cutoff) {
			_ = os.Remove(p)
			continue
		}
		for _, f := range markerFiles(p) {
			listed[f] = true
		}
	}
	for _, de := range ents {
		if !de.IsDir() {
			continue
		}
		sub := filepath.Join(dir, de.Name())
		files, _ := os.ReadDir(sub)
		for _, f := range files {
			rel := filepath.Join(de.Name(), f.Name())
			if st, err := f.Info(); err == nil && !listed[rel] && distload.LastUse(st).Before(cutoff) {
				_ = os.RemoveAll(filepath.Join(dir, rel))
			}
		}
		_ = os.Remove(sub) // when empty
	}
}

// trimFiles removes the files of dir unused since cutoff.
func trimFiles(dir string, cutoff time.Time) {
	ents, _ := os.ReadDir(dir)
	for _, de := range ents {
		if st, err := de.Info(); err == nil && de.Type().IsRegular() && distload.LastUse(st).Before(cutoff) {
			_ = os.Remove(filepath.Join(dir, de.Name()))
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

// A compile's marker is the time it took, then a line per file of the
// wazero cache it wrote ("file <dir>/<name>", relative to the marker's
// directory).
const markerFilePrefix = "file "

// writeMarker writes the marker of a compile that started at start: the
// wazero cache files written since then are its (or another process's
// that compiled at the same time, which keeps them a little longer).
func writeMarker(marker string, start time.Time, took time.Duration) {
	var b bytes.Buffer
	b.WriteString(took.String() + "\n")
	dir := filepath.Dir(marker)
	ents, _ := os.ReadDir(dir)
	for _, de := range ents {
		if !de.IsDir() {
			continue
		}
		files, _ := os.ReadDir(filepath.Join(dir, de.Name()))
		for _, f := range files {
			if st, err := f.Info(); err == nil && !st.ModTime().Before(start.Add(-time.Second)) {
				b.WriteString(markerFilePrefix + filepath.Join(de.Name(), f.Name()) + "\n")
			}
		}
	}
	_ = os.WriteFile(marker, b.Bytes(), 0o644)
}

// markerFiles lists the wazero cache files a marker names.
func markerFiles(marker string) []string {
	b, err := os.ReadFile(marker)
	if err != nil {
		return nil
	}
	var files []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if f, ok := strings.CutPrefix(sc.Text(), markerFilePrefix); ok && filepath.IsLocal(f) {
			files = append(files, f)
		}
	}
	return files
}

// markCompiled records that the compiled code behind marker (found, with
// modification time mod) was used: the marker and the files it lists.
func markCompiled(marker string, mod time.Time) {
	if time.Since(mod) < distload.MarkEvery {
		return // and so are the files: marked with it
	}
	distload.MarkUsed(marker)
	for _, f := range markerFiles(marker) {
		distload.MarkUsed(filepath.Join(filepath.Dir(marker), f))
	}
}
