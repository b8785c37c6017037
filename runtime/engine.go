package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/distload"
	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/emscripten"
	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/wasmbin"
	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/wasmgen"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// engine is the compiled Pyodide module and its helpers, shared by every
// interpreter of a process that uses the same distribution.
type engine struct {
	rt       wazero.Runtime
	main     wazero.CompiledModule
	got      wazero.CompiledModule
	tramp    wazero.CompiledModule
	imports  []emscripten.Import
	stdlib   []byte
	stdlibID string
	wasmID   string
	pycZip   []byte // bytecode-compiled stdlib, when prepared (see stdlib.go)
	tableMin uint32 // initial size of the function table
	cacheDir string
	flavor   string    // of the compiled code: its directory in cacheDir/wazero
	snap     snapshots // the boot snapshot (snapshot.go)
}

// enginesMu guards engine.pycZip, which PrepareStdlib fills in.
var enginesMu sync.Mutex

func features() api.CoreFeatures {
	return api.CoreFeaturesV2 | experimental.CoreFeaturesExceptionHandling |
		experimental.CoreFeaturesTailCall | experimental.CoreFeaturesExtendedConst |
		experimental.CoreFeaturesTypedFunctionReferences
}

// compile compiles the module (already in the exnref form) and its helper
// modules, from the on-disk compilation cache when it is warm. Processes
// that start cold at once compile in turn: the first fills the cache, the
// others then load from it.
//
// wasmHash and stdlibHash are the hex SHA-256 of the files.
func compile(ctx context.Context, wasm, stdlib []byte, wasmHash, stdlibHash, cacheDir string, notice io.Writer) (*engine, error) {
	parsed, err := wasmbin.Parse(wasm)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fileWasm, err)
	}
	var gotNames []string
	for _, im := range parsed.Imports {
		switch {
		case im.Kind == wasmbin.KindGlobal && im.Module == "GOT.func" && im.ValType == wasmbin.I32 && im.Mutable:
			gotNames = append(gotNames, im.Name)
		case im.Kind != wasmbin.KindFunc:
			return nil, fmt.Errorf("%s imports %s.%s (kind %d), which this runtime cannot provide; Pyodide %s is required", fileWasm, im.Module, im.Name, im.Kind, PyodideVersion)
		}
	}

	uncached, mode := guestConfig()
	cfg := uncached
	id := wasmHash[:16]
	flavor := id + wazeroBuild() + mode // of the compiled code, for its directory and lock
	var marker string
	if cacheDir != "" {
		// A directory per flavor, which the flavor's compile fills: its
		// marker marks it all used, and trimCache removes it all.
		dir := filepath.Join(cacheDir, "wazero", flavor)
		if err := os.MkdirAll(dir, 0o755); err == nil {
			if cache, err := wazero.NewCompilationCacheWithDir(dir); err == nil {
				cfg = cfg.WithCompilationCache(cache)
				marker = filepath.Join(dir, compiledMarker)
			}
		}
	}
	cold := marker == ""
	if marker != "" {
		if _, err := os.Stat(marker); err == nil {
			distload.MarkUsed(marker)
		} else {
			unlock, err := distCache(cacheDir).Lock(ctx, "compile-"+flavor)
			switch {
			case errors.Is(err, fs.ErrPermission):
				// A cache this user cannot write (another user's): compile
				// in memory, below.
				cfg, marker, cold = uncached, "", true
			case err != nil:
				return nil, err
			default:
				defer unlock()
				_, err = os.Stat(marker) // another process may have compiled it meanwhile
				cold = err != nil
			}
		}
	}
	if cold && notice != nil {
		fmt.Fprintf(notice, "rlm-sandbox: compiling Pyodide %s to native code (once per machine, about 10 s)\n", PyodideVersion)
	}
	perfMap(notice)
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	start := time.Now()
	cctx := experimental.WithCompilationWorkers(ctx, goruntime.NumCPU())
	main, err := rt.CompileModule(cctx, wasm)
	if err != nil && marker != "" && errors.Is(err, fs.ErrPermission) {
		// The compiled code is cached where this user cannot read it (a
		// cache another user made, its files private to them): compile
		// it again, in memory.
		rt.Close(ctx)
		if notice != nil {
			fmt.Fprintf(notice, "rlm-sandbox: the compiled code in %s cannot be read (%v); compiling Pyodide %s in memory (about 10 s; set RLM_SANDBOX_CACHE to a cache of this user's own)\n",
				filepath.Join(cacheDir, "wazero"), err, PyodideVersion)
		}
		cfg, marker, cold = uncached, "", true
		rt = wazero.NewRuntimeWithConfig(ctx, cfg)
		main, err = rt.CompileModule(cctx, wasm)
	}
	if err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("compile %s: %w", fileWasm, err)
	}
	took := time.Since(start)
	got, err := rt.CompileModule(ctx, wasmgen.GOT(gotNames))
	if err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("runtime: compile GOT module: %w", err)
	}
	tramp, err := rt.CompileModule(ctx, wasmgen.Trampoline())
	if err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("runtime: compile trampoline module: %w", err)
	}
	if cold && marker != "" {
		_ = os.WriteFile(marker, []byte(took.String()+"\n"), 0o644)
	}
	// Exports and imports come from our own parse: asking the compiled
	// module makes wazero build a definition of each of its ~17,000
	// functions, a quarter of a second of every worker's start.
	for _, name := range []string{"malloc", "free", "Py_InitializeEx", "PyRun_SimpleString", "__wasm_call_ctors", "PyErr_CheckSignals"} {
		if parsed.Exports[name] != wasmbin.KindFunc {
			rt.Close(ctx)
			return nil, fmt.Errorf("%s does not export %s", fileWasm, name)
		}
	}
	imports, err := funcImports(parsed)
	if err != nil {
		imports = definitionsOf(main.ImportedFunctions())
	}
	e := &engine{
		rt: rt, main: main, got: got, tramp: tramp,
		imports:  imports,
		stdlib:   stdlib,
		stdlibID: stdlibHash[:16],
		wasmID:   id,
		tableMin: parsed.TableMin,
		cacheDir: cacheDir,
		flavor:   flavor,
	}
	e.pycZip = e.loadPycZip()
	// wazero has what it needs of the module's bytes now (instantiation
	// reads the data segments again, from the page cache); the stock
	// stdlib is mounted only when the bytecode one is missing.
	distload.DropPages(wasm)
	if e.pycZip != nil {
		distload.DropPages(stdlib)
	}
	return e, nil
}

var (
	wazeroBuildOnce sync.Once
	wazeroBuildName string
)

// wazeroBuild names the wazero this binary runs when it is not the stock
// module ("-" and the replacement's path base, for the binaries `make`
// builds with patches/wazero applied): stock and patched builds compile
// into different cache entries, so each has its own "compiled" marker and
// lock.
func wazeroBuild() string {
	wazeroBuildOnce.Do(func() {
		bi, ok := debug.ReadBuildInfo()
		if !ok {
			return
		}
		for _, d := range bi.Deps {
			if d.Path == "github.com/tetratelabs/wazero" && d.Replace != nil {
				wazeroBuildName = "-" + strings.Map(func(r rune) rune {
					if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
						return r
					}
					return '_'
				}, filepath.Base(d.Replace.Path))
			}
		}
	})
	return wazeroBuildName
}

// PerfMapEnv names the environment variable that, set to 1, makes the
// process write /tmp/perf-<pid>.map naming the guest's compiled functions
// for `perf report` (a debugging aid; the binaries `make` builds only: it is
// wazero patch 0003's WAZERO_PERFMAP). See docs/profiling.md.
const PerfMapEnv = "RLM_SANDBOX_PERFMAP"

// perfMap turns the patched engine's perf map on when PerfMapEnv asks for
// it, and says so on notice when this build cannot write one.
func perfMap(notice io.Writer) {
	if os.Getenv(PerfMapEnv) != "1" {
		return
	}
	if wazeroBuild() == "" {
		if notice != nil {
			fmt.Fprintf(notice, "rlm-sandbox: %s=1 needs the binaries `make build` writes (patched wazero); no perf map\n", PerfMapEnv)
		}
		return
	}
	_ = os.Setenv("WAZERO_PERFMAP", "1")
}

// funcImports lists the module's function imports with their signatures.
func funcImports(m *wasmbin.Module) ([]emscripten.Import, error) {
	var out []emscripten.Import
	for _, im := range m.Imports {
		if im.Kind != wasmbin.KindFunc {
			continue
		}
		if int(im.Type) >= len(m.Types) {
			return nil, fmt.Errorf("import %s.%s: no function type %d", im.Module, im.Name, im.Type)
		}
		t := m.Types[im.Type]
		out = append(out, emscripten.Import{Module: im.Module, Name: im.Name, Params: t.Params, Results: t.Results})
	}
	return out, nil
}

// definitionsOf is funcImports from wazero's definitions, for a module
// whose type section wasmbin does not decode.
func definitionsOf(defs []api.FunctionDefinition) []emscripten.Import {
	out := make([]emscripten.Import, len(defs))
	for i, d := range defs {
		mod, name, _ := d.Import()
		out[i] = emscripten.Import{Module: mod, Name: name, Params: d.ParamTypes(), Results: d.ResultTypes()}
	}
	return out
}
