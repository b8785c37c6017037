package runtime

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/distload"
	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/exnref"
	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/wasmbin"
)

// Loading Pyodide: Config.Distribution, or the first Config.IndexURL entry
// whose files verify, translate (legacy exception handling to exnref, once
// per machine) and compile. The result is kept per process twice over: by
// configuration, so that New does no file work after the first call, and
// by module contents, so that two configurations that yield the same files
// share one compiled engine.

const defaultFetchTimeout = distload.DefaultTimeout

// onceMap runs the function for a key once per process; a failure is
// forgotten so that a later call retries (the files may be fetched
// meanwhile).
type onceMap struct {
	mu sync.Mutex
	m  map[string]*onceEntry
}

type onceEntry struct {
	once sync.Once
	e    *engine
	err  error
}

func (om *onceMap) do(key string, f func() (*engine, error)) (*engine, error) {
	om.mu.Lock()
	if om.m == nil {
		om.m = map[string]*onceEntry{}
	}
	ent := om.m[key]
	if ent == nil {
		ent = &onceEntry{}
		om.m[key] = ent
	}
	om.mu.Unlock()
	ent.once.Do(func() { ent.e, ent.err = f() })
	if ent.err != nil {
		om.mu.Lock()
		if om.m[key] == ent {
			delete(om.m, key)
		}
		om.mu.Unlock()
	}
	return ent.e, ent.err
}

var (
	bySource  onceMap // configuration → engine
	byModules onceMap // module contents and cache directory → engine
)

// loadEngine returns the engine for cfg (which has its defaults applied).
func loadEngine(ctx context.Context, cfg Config) (*engine, error) {
	return bySource.do(sourceKey(cfg), func() (*engine, error) { return resolve(ctx, cfg) })
}

func sourceKey(cfg Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "cache=%q\n", cfg.CacheDir)
	if cfg.Distribution != nil {
		fmt.Fprintf(&b, "dist=%q\n", cfg.Distribution.String())
		return b.String()
	}
	fmt.Fprintf(&b, "index=%q\nunverified=%v\n", cfg.IndexURL, cfg.AllowUnverified)
	names := make([]string, 0, len(cfg.Integrity))
	for name := range cfg.Integrity {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		fmt.Fprintf(&b, "integrity %q=%q\n", name, cfg.Integrity[name])
	}
	return b.String()
}

func resolve(ctx context.Context, cfg Config) (*engine, error) {
	if d := cfg.Distribution; d != nil {
		stdlib, err := d.ReadFile(fileStdlib)
		if err != nil {
			return nil, err
		}
		wasm, err := d.ReadFile(fileWasm)
		if err != nil {
			return nil, err
		}
		e, err := engineFor(ctx, cfg, wasm, stdlib, "", "")
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrDistribution, d, err)
		}
		return e, nil
	}
	opts, err := cfg.loadOptions()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDistribution, err)
	}
	if e := translatedFromCache(ctx, cfg, opts); e != nil {
		return e, nil
	}
	var eng *engine
	opts.Check = func(d *distload.Dist) (err error) {
		eng, err = engineFor(ctx, cfg, d.Files[fileWasm], d.Files[fileStdlib], d.SHA256[fileWasm], d.SHA256[fileStdlib])
		return err
	}
	if _, err := distload.Load(ctx, opts); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDistribution, err)
	}
	return eng, nil
}

// translatedFromCache is the start of a machine that has run this
// distribution before: every file's hash is known and the translated
// module is in the cache, so the stock module is not even read (it was
// verified when it entered the cache, and translated then). Nil when any
// piece is missing: the caller then loads the distribution.
func translatedFromCache(ctx context.Context, cfg Config, opts distload.Options) *engine {
	c := opts.Cache
	if c == nil {
		return nil
	}
	for _, name := range distFiles {
		if opts.SHA256[name] == "" {
			return nil
		}
	}
	wasmHash, stdlibHash := opts.SHA256[fileWasm], opts.SHA256[fileStdlib]
	h, ok := c.Derived(translation, wasmHash)
	if !ok || h == wasmHash || !c.Has(wasmHash) || !c.Has(opts.SHA256[fileLock]) {
		return nil
	}
	wasm, ok := c.Get(h)
	if !ok {
		return nil
	}
	stdlib, ok := c.Get(stdlibHash)
	if !ok {
		return nil
	}
	if checkStdlib(stdlib) != nil {
		return nil
	}
	e, err := compiled(ctx, cfg, wasm, stdlib, h, stdlibHash)
	if err != nil {
		return nil
	}
	return e
}

// distCache is the content-addressed cache of downloads and translations
// in cacheDir (nil when caching is off).
func distCache(cacheDir string) *distload.Cache {
	if cacheDir == "" {
		return nil
	}
	return distload.OpenCache(filepath.Join(cacheDir, "dist"))
}

func (cfg Config) loadOptions() (distload.Options, error) {
	hashes := map[string]string{}
	switch {
	case len(cfg.Integrity) > 0:
		for name, v := range cfg.Integrity {
			if !slices.Contains(distFiles, name) {
				return distload.Options{}, fmt.Errorf("Config.Integrity names %q, which is not one of %s", name, strings.Join(distFiles, ", "))
			}
			h, err := distload.ParseSHA256(v)
			if err != nil {
				return distload.Options{}, fmt.Errorf("Config.Integrity[%q]: %w", name, err)
			}
			hashes[name] = h
		}
	case !cfg.AllowUnverified:
		for name, h := range pinnedSHA256 {
			hashes[name] = h
		}
	}
	notice := func(format string, args ...any) {
		if cfg.Notice != nil {
			fmt.Fprintf(cfg.Notice, "rlm-sandbox: "+format+"\n", args...)
		}
	}
	return distload.Options{
		Entries:         cfg.IndexURL,
		Files:           distFiles,
		SHA256:          hashes,
		AllowUnverified: cfg.AllowUnverified,
		Cache:           distCache(cfg.CacheDir),
		Timeout:         cfg.FetchTimeout,
		Log: func(entry string, err error) {
			notice("cannot load Pyodide from %s: %s", entry, strings.ReplaceAll(err.Error(), "\n", "; "))
		},
		Fetching: func(url string) { notice("downloading %s", url) },
	}, nil
}

// engineFor checks the files, translates the module's exception handling
// when it is the legacy form, and compiles it (once per process). The
// hashes are the files' SHA-256 when known ("": computed here).
func engineFor(ctx context.Context, cfg Config, wasm, stdlib []byte, wasmHash, stdlibHash string) (*engine, error) {
	if err := checkStdlib(stdlib); err != nil {
		return nil, err
	}
	if _, err := wasmbin.Parse(wasm); err != nil {
		return nil, fmt.Errorf("%s: %w", fileWasm, err)
	}
	wasm, wasmHash, err := translated(ctx, cfg, wasm, wasmHash)
	if err != nil {
		return nil, err
	}
	if stdlibHash == "" {
		stdlibHash = distload.SHA256(stdlib)
	}
	return compiled(ctx, cfg, wasm, stdlib, wasmHash, stdlibHash)
}

// compiled is the engine of a translated module and a stdlib, compiled
// once per process.
func compiled(ctx context.Context, cfg Config, wasm, stdlib []byte, wasmHash, stdlibHash string) (*engine, error) {
	key := fmt.Sprintf("%s %s %q", wasmHash, stdlibHash, cfg.CacheDir)
	return byModules.do(key, func() (*engine, error) {
		return compile(ctx, wasm, stdlib, wasmHash, stdlibHash, cfg.CacheDir, cfg.Notice)
	})
}

// checkStdlib rejects a python_stdlib.zip that is not a zip of the
// standard library.
func checkStdlib(b []byte) error {
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return fmt.Errorf("%s: %w", fileStdlib, err)
	}
	for _, f := range zr.File {
		if f.Name == "os.py" {
			return nil
		}
	}
	return fmt.Errorf("%s: no os.py: not the Python standard library", fileStdlib)
}

// translation is the kind of derived blob the exnref translation is.
const translation = "exnref-v" + exnref.Version

// translated returns wasm with legacy exception handling rewritten to the
// exnref form wazero runs, and its SHA-256 (wasmHash is the input's, ""
// when unknown). The result is cached under the SHA-256 of the
// input (a module without legacy exception handling is only recorded as
// such), so each module is analysed once per machine.
func translated(ctx context.Context, cfg Config, wasm []byte, wasmHash string) ([]byte, string, error) {
	return distCache(cfg.CacheDir).Derive(ctx, translation, wasm, wasmHash, func() ([]byte, error) {
		legacy, err := exnref.HasLegacy(wasm)
		if err != nil || !legacy {
			// Nothing to translate, or code the translator cannot read:
			// wazero, which validates the module while compiling it, will
			// run it or say what is wrong.
			return wasm, nil
		}
		out, err := exnref.Translate(wasm)
		if err != nil {
			return nil, fmt.Errorf("%s: translate exception handling: %w", fileWasm, err)
		}
		return out, nil
	})
}
