package runtime

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sync"
	"time"

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
	imports  []api.FunctionDefinition
	stdlib   []byte
	stdlibID string
	wasmID   string
	pycZip   []byte // bytecode-compiled stdlib, when prepared (see stdlib.go)
	tableMin uint32 // initial size of the function table
	cacheDir string
}

type engineKey struct{ dist, cache string }

var (
	enginesMu sync.Mutex
	engines   = map[engineKey]*engineEntry{}
)

type engineEntry struct {
	once sync.Once
	e    *engine
	err  error
}

func features() api.CoreFeatures {
	return api.CoreFeaturesV2 | experimental.CoreFeaturesExceptionHandling |
		experimental.CoreFeaturesTailCall | experimental.CoreFeaturesExtendedConst |
		experimental.CoreFeaturesTypedFunctionReferences
}

// loadEngine compiles the distribution once per process (from the on-disk
// compilation cache when it is warm).
func loadEngine(ctx context.Context, dist Distribution, cacheDir string, notice io.Writer) (*engine, error) {
	key := engineKey{dist.String(), cacheDir}
	enginesMu.Lock()
	ent := engines[key]
	if ent == nil {
		ent = &engineEntry{}
		engines[key] = ent
	}
	enginesMu.Unlock()
	ent.once.Do(func() { ent.e, ent.err = compile(ctx, dist, cacheDir, notice) })
	if ent.err != nil {
		// Let a later call retry (the distribution may be fetched meanwhile).
		enginesMu.Lock()
		if engines[key] == ent {
			delete(engines, key)
		}
		enginesMu.Unlock()
	}
	return ent.e, ent.err
}

func compile(ctx context.Context, dist Distribution, cacheDir string, notice io.Writer) (*engine, error) {
	wasm, err := dist.ReadFile("pyodide.asm.wasm")
	if err != nil {
		return nil, err
	}
	stdlib, err := dist.ReadFile("python_stdlib.zip")
	if err != nil {
		return nil, err
	}
	parsed, err := wasmbin.Parse(wasm)
	if err != nil {
		return nil, fmt.Errorf("%w: %s/pyodide.asm.wasm: %v", ErrDistribution, dist, err)
	}
	var gotNames []string
	for _, im := range parsed.Imports {
		switch {
		case im.Kind == wasmbin.KindGlobal && im.Module == "GOT.func" && im.ValType == wasmbin.I32 && im.Mutable:
			gotNames = append(gotNames, im.Name)
		case im.Kind != wasmbin.KindFunc:
			return nil, fmt.Errorf("%w: pyodide.asm.wasm imports %s.%s (kind %d), which this runtime cannot provide; Pyodide %s is required", ErrDistribution, im.Module, im.Name, im.Kind, PyodideVersion)
		}
	}

	cfg := wazero.NewRuntimeConfigCompiler().WithCoreFeatures(features())
	id := digest(wasm)
	var marker string
	if cacheDir != "" {
		dir := filepath.Join(cacheDir, "wazero")
		if err := os.MkdirAll(dir, 0o755); err == nil {
			if cache, err := wazero.NewCompilationCacheWithDir(dir); err == nil {
				cfg = cfg.WithCompilationCache(cache)
				marker = filepath.Join(dir, "compiled-"+id)
			}
		}
	}
	cold := marker == ""
	if marker != "" {
		if _, err := os.Stat(marker); err != nil {
			cold = true
		}
	}
	if cold && notice != nil {
		fmt.Fprintf(notice, "rlm-sandbox: compiling Pyodide %s to native code (once per machine, about 10 s)\n", PyodideVersion)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	start := time.Now()
	cctx := experimental.WithCompilationWorkers(ctx, goruntime.NumCPU())
	main, err := rt.CompileModule(cctx, wasm)
	if err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("%w: compile %s/pyodide.asm.wasm: %v (is it the exnref translation `make` produces?)", ErrDistribution, dist, err)
	}
	if cold && marker != "" {
		_ = os.WriteFile(marker, []byte(time.Since(start).String()+"\n"), 0o644)
	}
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
	for _, name := range []string{"malloc", "free", "Py_InitializeEx", "PyRun_SimpleString", "__wasm_call_ctors", "PyErr_CheckSignals"} {
		if _, ok := main.ExportedFunctions()[name]; !ok {
			rt.Close(ctx)
			return nil, fmt.Errorf("%w: pyodide.asm.wasm does not export %s", ErrDistribution, name)
		}
	}
	e := &engine{
		rt: rt, main: main, got: got, tramp: tramp,
		imports:  main.ImportedFunctions(),
		stdlib:   stdlib,
		stdlibID: digest(stdlib),
		wasmID:   id,
		tableMin: parsed.TableMin,
		cacheDir: cacheDir,
	}
	e.pycZip = e.loadPycZip()
	return e, nil
}
