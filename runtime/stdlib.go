package runtime

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/distload"
	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/vfs"
)

//go:embed prepare.py
var preparePy string

// The standard library in python_stdlib.zip is source only, so a fresh
// interpreter compiles every module it imports (import re, json,
// collections: ~0.5 s). PrepareStdlib compiles it all once, with the guest's
// own CPython, into a zip that holds each .pyc next to its .py, and keeps it
// in the cache directory; interpreters created afterwards mount it instead.

func (e *engine) pycPath() string {
	if e.cacheDir == "" {
		return ""
	}
	return filepath.Join(e.cacheDir, "stdlib", "python_stdlib-"+e.stdlibID+"-"+e.wasmID+".zip")
}

func (e *engine) loadPycZip() []byte {
	p := e.pycPath()
	if p == "" {
		return nil
	}
	b, err := distload.MapFile(p)
	if err != nil {
		return nil
	}
	distload.MarkBeside(p)
	return b
}

// StdlibPrepared reports whether the bytecode-compiled standard library is
// in the cache for cfg's distribution.
func StdlibPrepared(ctx context.Context, cfg Config) (bool, error) {
	cfg = cfg.withDefaults()
	eng, err := loadEngine(ctx, cfg)
	if err != nil {
		return false, err
	}
	return eng.pycZip != nil, nil
}

// PrepareStdlib compiles the standard library to bytecode with the guest's
// CPython and stores the result in the cache directory (see Config.CacheDir),
// where every later interpreter of this and other processes finds it. It is
// what `make` runs; it takes a few seconds and does nothing when the cache
// is already prepared.
func PrepareStdlib(ctx context.Context, cfg Config) (path string, err error) {
	cfg = cfg.withDefaults()
	eng, err := loadEngine(ctx, cfg)
	if err != nil {
		return "", err
	}
	p := eng.pycPath()
	if p == "" {
		return "", fmt.Errorf("runtime: PrepareStdlib needs a cache directory")
	}
	if eng.pycZip != nil {
		return p, nil
	}
	cfg.NoSnapshot = true // the snapshot of a stock-stdlib boot would not be used
	in, err := newInterpreter(ctx, eng, cfg, false)
	if err != nil {
		return "", err
	}
	defer in.Close()
	var out strings.Builder
	in.mu.Lock()
	in.host.SetOutput(&out, &out)
	rc, err := in.runSimple(ctx, preparePy)
	in.host.SetOutput(nil, nil)
	in.mu.Unlock()
	if err != nil || rc != 0 {
		return "", fmt.Errorf("runtime: compile the standard library: %v %s", err, out.String())
	}
	f, errno := in.host.FS().Open("/tmp/stdlib.zip", vfs.O_RDONLY, 0)
	if errno != vfs.ESUCCESS {
		return "", fmt.Errorf("runtime: read compiled standard library: %w", errno)
	}
	st, _ := f.Stat()
	buf := make([]byte, st.Size)
	n, _ := f.Pread(buf, 0)
	f.Close()
	buf = buf[:n]
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".stdlib-*")
	if err != nil {
		return "", err
	}
	if _, err := tmp.Write(buf); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return "", err
	}
	_ = tmp.Chmod(0o644)
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	enginesMu.Lock()
	eng.pycZip = buf
	enginesMu.Unlock()
	return p, nil
}
