package runtime

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/emscripten"
	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/linmem"
	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/pymarshal"
	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/wasmgen"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

//go:embed boot.py
var bootPy string

//go:embed rlm.py
var rlmPy string

// Config configures an Interpreter. The zero value is usable: every field
// has a documented default.
type Config struct {
	// Distribution, when set, is where Pyodide is loaded from, unchecked;
	// it wins over IndexURL.
	Distribution Distribution
	// IndexURL lists where Pyodide may be loaded from, tried in order until
	// one works: local directories, file:// or http(s):// URLs of a Pyodide
	// distribution (the directory holding pyodide.asm.wasm,
	// python_stdlib.zip and pyodide-lock.json). An entry that fails (cannot
	// be reached, a missing file, a timeout, a file whose SHA-256 is wrong,
	// a file that is not a valid zip or wasm module) is reported on Notice
	// and the next one is tried. Files are checked against the known SHA-256
	// of Pyodide PyodideVersion unless Integrity or AllowUnverified says
	// otherwise. Default: $RLM_PYODIDE_INDEX_URL (comma-separated), else
	// DefaultIndexURL().
	IndexURL []string
	// Integrity gives the expected SHA-256 of the files, by file name
	// ("pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json"), as hex,
	// "sha256-<hex>" or "sha256-<base64>"; it replaces the built-in hashes,
	// for loading a Pyodide version other than PyodideVersion.
	// Default: the built-in hashes of PyodideVersion.
	Integrity map[string]string
	// AllowUnverified accepts files that have no expected hash: with no
	// Integrity, nothing is checked. Default: false.
	AllowUnverified bool
	// FetchTimeout bounds loading the files of one IndexURL entry (not
	// compiling them). Default: 2 minutes.
	FetchTimeout time.Duration
	// CacheDir holds the downloaded Pyodide files, their exnref
	// translation, the compilation cache and the bytecode-compiled standard
	// library. Default: CacheDir(). "-" disables the caches (every process
	// then downloads, translates and compiles Pyodide, ~10 s). What no
	// process used in 14 days is removed from it (at most once a day).
	CacheDir string
	// MemoryLimit caps the guest's linear memory in bytes (rounded down to
	// whole 64 KiB pages). Allocations past it raise MemoryError in
	// Python. From MinMemoryLimit to MaxMemoryLimit; New refuses other
	// values (CheckMemoryLimit).
	// Default: 0, the wasm32 maximum (4 GiB).
	MemoryLimit uint64
	// DiskLimit caps the bytes of files the guest may write to its
	// in-memory file system. Default: 256 MiB.
	DiskLimit int64
	// Interrupt is where interrupts are signalled. Default: a new
	// AtomicInterrupt, reachable through Interpreter.Interrupt. One that
	// is also an InterruptWaiter wakes the interpreter's waits (a guest
	// in time.sleep, a bridge call in flight); any other is looked at
	// every millisecond while the guest waits.
	Interrupt InterruptSource
	// Notice receives the one-line notice printed when Pyodide has to be
	// compiled (once per machine). Default: os.Stderr. Use io.Discard to
	// silence it.
	Notice io.Writer
	// Now is the guest's wall clock. Default: time.Now.
	Now func() time.Time
	// NoSnapshot boots CPython in every interpreter instead of starting
	// from the boot snapshot kept in CacheDir (also turned off by
	// RLM_SANDBOX_SNAPSHOT=0). For comparison and diagnosis; the result
	// is the same interpreter. Default: false.
	NoSnapshot bool
	// KeepDictOrder makes a dict whose keys are all str, but not in
	// ascending order, come back from Python (Get, a bridge call's
	// arguments) as a Dict, in its order, rather than as a map[string]any.
	// Default: false.
	KeepDictOrder bool
	// Bridge answers the calls Python makes to the host: llm_query,
	// rlm_query and their batched forms. Nil: those calls raise
	// BridgeError.
	Bridge BridgeFunc
	// BridgeInline runs a single bridge call (llm_query, rlm_query) on the
	// goroutine that runs the interpreter instead of on a goroutine of its
	// own, which saves a hand-off between threads (a few microseconds of a
	// call's round trip). The interpreter then does not watch Interrupt
	// while the call runs: set it only when Bridge itself returns promptly
	// once the execution is interrupted, as rlm-worker's does (the
	// supervisor answers a call it interrupts at once). The batched forms
	// always run their calls concurrently. Default: false.
	BridgeInline bool
	// BridgeBatch, when set with BridgeInline, answers the calls of a
	// batch (llm_query_batched, rlm_query_batched) in one call on the
	// interpreter's goroutine, instead of Bridge being called once per
	// call from goroutines of their own. It must still have them answered
	// concurrently, and return when the execution is interrupted.
	BridgeBatch BatchBridgeFunc
	// BridgeConcurrency, when positive, is how many of a batch's calls
	// (without BridgeBatch) Bridge is called for at once, each from a
	// goroutine of its own; the others wait their turn without one. 0: all
	// of them at once, a goroutine each (a batch of a million prompts
	// made a million goroutines, 5 GB).
	BridgeConcurrency int
}

// Interpreter is one CPython interpreter with its own memory, file system
// and globals. Its methods are safe for concurrent use but run one at a
// time; Interrupt and Close may be called while another method runs.
type Interpreter struct {
	mu     sync.Mutex // serialises guest calls
	eng    *engine
	host   *emscripten.Host
	intr   InterruptWaiter // Config.Interrupt (waiterOf)
	mods   []api.Module
	main   api.Module
	runFn  uint32 // the guest's PyObject* of _rlm.run (a strong reference)
	takeFn uint32 // _rlm.take, or 0 when the direct text path is unavailable
	// fastObj: the objects of the fast path of Exec (fastexec.go), zero
	// when it is unavailable (set by New); fast is set up from them on
	// first use.
	fastObj fastObjects
	fast    *fastState
	cells   atomic.Int64 // the cells run so far (they are named after it)
	// kept are the cells whose sources the bootstrap keeps (see retain).
	kept keptSources
	// keepDictOrder: Config.KeepDictOrder.
	keepDictOrder bool
	// strLayout: 0 unchecked, 1 the str layout is as text.go expects, -1 not.
	strLayout int8
	cfns      map[string]api.Function
	channel   *channel
	fns       guestFuncs
	closed    atomic.Bool
	deadErr   error
	stack     [8]uint64       // call1's arguments and result
	killCtx   context.Context // every guest call runs under it; Close cancels it
	kill      context.CancelFunc
	version   string
	execs     atomic.Int64
	// reserveSpent: the last cell ended in MemoryError, and the bootstrap
	// let go of its reserve (see exec).
	reserveSpent atomic.Bool
	memSize      atomic.Uint64   // see MemorySize
	reqCtx       context.Context // the context of the request being served
	// bridgeCalls counts the bridge calls of the request being served.
	bridgeCalls int
	runner      *bridgeRunner   // see waitBridge
	bctx        context.Context // see bridgeCtx
	bcancel     context.CancelFunc
	stdlib      []byte // the bytecode-compiled stdlib zip, or nil for the source one
	timings     bootTimings
	memory      linmem.Tracker // the linear memory, for mapping a boot image
	clock       *signalClock   // nil: CPython's own signal check interval
	tramp       api.Module
	trampSlot   uint32   // the table slot of the trampoline
	arityCache  uint32   // guest address of the trampoline's arity cache
	restored    bool     // started from a boot snapshot
	fsUsage     [2]int64 // the file system's bytes and nodes before boot
}

// bootTimings records where New spends its time (for benchmarks).
type bootTimings struct {
	instantiate, initialize time.Duration
}

type guestFuncs struct {
	malloc, free, runSimple, checkSignals, errClear api.Function
	callNoArgs, decRef                              api.Function
}

var instanceSeq atomic.Uint64

// ErrClosed is returned by calls on a closed Interpreter.
var ErrClosed = errors.New("runtime: interpreter closed")

// ErrDead is returned by calls on an interpreter that can no longer run
// Python because the guest exited, aborted or reached an unsupported
// feature; it wraps the cause.
var ErrDead = errors.New("runtime: interpreter is no longer usable")

// errStackOverflow is the trap of guest code that ran out of native
// stack: wazero grows a call's stack up to 400 MB. CPython bounds the
// recursion it knows of by the depth of Emscripten's stack in linear
// memory, which C functions that keep their locals in wasm locals do not
// move: freeing a chain of some 500,000 nested objects at once recurses
// in C past wazero's limit (native CPython's "trashcan" defers such
// frees by the depth of the machine stack).
var errStackOverflow = errors.New("the interpreter's native stack overflowed (400 MB), and the interpreter stopped where it was: " +
	"a recursion in C that CPython does not bound here, such as freeing a chain of hundreds of thousands of nested objects at once, " +
	"or a recursion limit raised past about 400,000 (less for a recursion through C, such as an lru_cache'd function: about 10,000)")

// New compiles Pyodide (once per process, from the on-disk cache when warm),
// instantiates a fresh interpreter and boots CPython.
func New(ctx context.Context, cfg Config) (*Interpreter, error) {
	if err := CheckMemoryLimit(cfg.MemoryLimit); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	eng, err := loadEngine(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return newInterpreter(ctx, eng, cfg, true)
}

// The range of Config.MemoryLimit. An interpreter boots with about 30 MiB
// of memory: below MinMemoryLimit it could not start from its boot
// snapshot, and a limit under what it boots with would not be enforced.
// MaxMemoryLimit is all a wasm32 interpreter can address.
const (
	MinMemoryLimit = 32 << 20
	MaxMemoryLimit = 4 << 30
)

// ErrMemoryLimit is the error of a MemoryLimit out of range.
var ErrMemoryLimit = errors.New("runtime: MemoryLimit out of range")

// CheckMemoryLimit returns nil when m is 0 (no limit but the wasm32
// maximum) or from MinMemoryLimit to MaxMemoryLimit, else an error that
// matches ErrMemoryLimit.
func CheckMemoryLimit(m uint64) error {
	if m == 0 || m >= MinMemoryLimit && m <= MaxMemoryLimit {
		return nil
	}
	return fmt.Errorf("%w: %d bytes; it must be 0 (4 GiB) or from 32 MiB (an interpreter boots with about 30 MiB) to 4 GiB (all a wasm32 interpreter can address)", ErrMemoryLimit, m)
}

func (cfg Config) withDefaults() Config {
	if cfg.Distribution == nil && len(cfg.IndexURL) == 0 {
		cfg.IndexURL = indexURLFromEnv()
		if len(cfg.IndexURL) == 0 {
			cfg.IndexURL = DefaultIndexURL()
		}
	}
	if cfg.FetchTimeout <= 0 {
		cfg.FetchTimeout = defaultFetchTimeout
	}
	switch cfg.CacheDir {
	case "":
		cfg.CacheDir = CacheDir()
	case "-":
		cfg.CacheDir = ""
	}
	if cfg.Interrupt == nil {
		cfg.Interrupt = &AtomicInterrupt{}
	}
	if cfg.Notice == nil {
		cfg.Notice = stderr
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.DiskLimit <= 0 {
		cfg.DiskLimit = 256 << 20
	}
	return cfg
}

func newInterpreter(ctx context.Context, eng *engine, cfg Config, usePyc bool) (*Interpreter, error) {
	var stdlib []byte
	if usePyc {
		enginesMu.Lock()
		stdlib = eng.pycZip
		enginesMu.Unlock()
	}
	var key string
	var img *bootImage
	if eng.cacheDir != "" && snapshotsEnabled(cfg) {
		key = eng.snapshotKey(stdlib)
		img = eng.bootImage(key, cfg.Notice)
	}
	if img != nil {
		in, err := startInterpreter(ctx, eng, cfg, stdlib, img)
		if err == nil {
			in.touchErrorPaths(ctx)
			trimCache(eng.cacheDir)
			return in, nil
		}
		if !errors.Is(err, ErrSnapshot) {
			return nil, err
		}
		fmt.Fprintf(cfg.Notice, "rlm-sandbox: cannot start from the boot snapshot: %v; booting instead\n", err)
	}
	in, err := startInterpreter(ctx, eng, cfg, stdlib, nil)
	if err != nil {
		return nil, err
	}
	if key != "" && img == nil {
		in.snapshot(key, cfg.Notice)
	}
	trimCache(eng.cacheDir) // now that what this process uses is marked
	return in, nil
}

// touchErrorPaths runs, in an interpreter restored from the boot snapshot,
// the code of a first exception and a first interrupt (see touch in
// boot.py), so that its pages are in this process before any caller waits
// on them. Nothing of it is visible afterwards; it cannot fail in a way
// that matters (the next request would meet the same failure).
func (in *Interpreter) touchErrorPaths(ctx context.Context) {
	in.mu.Lock()
	defer in.mu.Unlock()
	op := "touch"
	if f := in.fastPath(); f != nil {
		// Cells take the fast path: take it, and have the bootstrap only
		// forget the cells.
		for _, code := range touchCells {
			_, _ = in.serveLocked(ctx, Output{}, func() (bool, error) { return in.runFast(f, code, touchName, false) })
		}
		op = "untouch"
	}
	req, _ := pymarshal.Encode(pymarshal.Tuple{op})
	_, _ = in.requestLocked(ctx, req, nil, Output{})
}

// touchCells are the cells of touchErrorPaths (boot.py's touch runs the
// same), named touchName.
var touchCells = [...]string{"1/0\n", "__import__('_signal').raise_signal(2)\nwhile True: pass\n"}

const touchName = "<touch>"

func startInterpreter(ctx context.Context, eng *engine, cfg Config, stdlib []byte, img *bootImage) (*Interpreter, error) {
	in := &Interpreter{eng: eng, intr: waiterOf(cfg.Interrupt), channel: &channel{}, stdlib: stdlib, keepDictOrder: cfg.KeepDictOrder}
	in.killCtx, in.kill = context.WithCancel(context.Background())
	if err := in.boot(ctx, cfg, img); err != nil {
		in.Close()
		return nil, err
	}
	if !in.host.Keep("/dev/rlm", "/dev/rlm-bridge", "/dev/rlm-llm") {
		in.Close()
		return nil, errors.New("runtime: the bootstrap did not open its channels to the host")
	}
	in.findErrno(ctx)
	return in, nil
}

// findErrno tells the host where the guest's errno is, once the
// interpreter is up (the address is static data): a host call that fails
// sets it too, for the guest's code that passes a raw syscall result on
// without its libc wrapper (see emscripten.Host.SetErrnoAddr).
func (in *Interpreter) findErrno(ctx context.Context) {
	f := in.main.ExportedFunction("__errno_location")
	if f == nil {
		return
	}
	if res, err := in.call(ctx, f); err == nil && len(res) == 1 {
		in.host.SetErrnoAddr(uint32(res[0]))
	}
}

// boot instantiates the modules, then either boots CPython or, given a
// boot image, restores it.
func (in *Interpreter) boot(ctx context.Context, cfg Config, img *bootImage) error {
	fs, err := in.buildFS(cfg)
	if err != nil {
		return err
	}
	b, n := fs.Usage()
	in.fsUsage = [2]int64{b, int64(n)}
	host, err := emscripten.New(emscripten.Config{
		FS:        fs,
		Env:       guestEnv,
		Args0:     "python",
		Interrupt: in.intr,
		MaxMemory: cfg.MemoryLimit,
		Now:       cfg.Now,
	})
	if err != nil {
		return err
	}
	host.SetCwd("/home/pyodide")
	in.host = host
	t0 := time.Now()

	funcs, err := host.Resolve(in.eng.imports)
	if err != nil {
		return err
	}
	funcs = append(funcs, host.ArityFunc())
	id := instanceSeq.Add(1)
	hostMods := map[string]api.Module{}
	byModule := map[string][]emscripten.Func{}
	var order []string
	for _, f := range funcs {
		if _, ok := byModule[f.Module]; !ok {
			order = append(order, f.Module)
		}
		byModule[f.Module] = append(byModule[f.Module], f)
	}
	for _, name := range order {
		b := in.eng.rt.NewHostModuleBuilder(fmt.Sprintf("%s#%d", name, id))
		for _, f := range byModule[name] {
			b.NewFunctionBuilder().WithGoModuleFunction(f.Fn, f.Params, f.Results).Export(f.Name)
		}
		m, err := b.Instantiate(ctx)
		if err != nil {
			return fmt.Errorf("runtime: instantiate host module %s: %w", name, err)
		}
		in.mods = append(in.mods, m)
		hostMods[name] = unwrapHostModule(m)
	}
	got, err := in.eng.rt.InstantiateModule(ctx, in.eng.got, wazero.NewModuleConfig().WithName(fmt.Sprintf("GOT.func#%d", id)))
	if err != nil {
		return fmt.Errorf("runtime: instantiate GOT module: %w", err)
	}
	in.mods = append(in.mods, got)
	hostMods["GOT.func"] = got

	resolve := func(name string) api.Module { return hostMods[name] }
	rctx := experimental.WithImportResolver(ctx, resolve)
	// Reserve the memory's address space so that growing it never copies.
	if a := in.memory.Allocator(); a != nil {
		rctx = experimental.WithMemoryAllocator(rctx, a)
	}
	mainCfg := wazero.NewModuleConfig().WithName(fmt.Sprintf("pyodide#%d", id)).WithStartFunctions()
	main, err := in.eng.rt.InstantiateModule(rctx, in.eng.main, mainCfg)
	if err != nil {
		return fmt.Errorf("runtime: instantiate Pyodide: %w", err)
	}
	in.mods = append(in.mods, main)
	in.main = main
	hostMods[wasmgen.MainModule] = main
	tramp, err := in.eng.rt.InstantiateModule(rctx, in.eng.tramp, wazero.NewModuleConfig().WithName(fmt.Sprintf("trampoline#%d", id)).WithStartFunctions())
	if err != nil {
		return fmt.Errorf("runtime: instantiate trampoline: %w", err)
	}
	in.mods = append(in.mods, tramp)

	fn := func(name string) api.Function { return main.ExportedFunction(name) }
	in.fns = guestFuncs{
		malloc: fn("malloc"), free: fn("free"), runSimple: fn("PyRun_SimpleString"),
		checkSignals: fn("PyErr_CheckSignals"), errClear: fn("PyErr_Clear"),
		callNoArgs: fn("PyObject_CallNoArgs"), decRef: fn("Py_DecRef"),
	}
	for name, f := range map[string]api.Function{"PyObject_CallNoArgs": in.fns.callNoArgs, "Py_DecRef": in.fns.decRef,
		"PyImport_ImportModuleAttrString": fn("PyImport_ImportModuleAttrString")} {
		if f == nil {
			return fmt.Errorf("%w: pyodide.asm.wasm does not export %s", ErrDistribution, name)
		}
	}

	// The glue's preRun hook: point CPython at the trampoline.
	res, err := tramp.ExportedFunction("install").Call(ctx)
	if err != nil || int32(res[0]) < 0 {
		return fmt.Errorf("runtime: install trampoline: %v", err)
	}
	in.trampSlot = uint32(res[0])
	in.tramp = tramp
	if g := main.ExportedGlobal("_Py_emscripten_signal_clock"); g != nil {
		if in.clock = newSignalClock(in.memory.Word(uint32(g.Get())), in.intr, in.killCtx); in.clock != nil {
			in.host.SetSignalCheck(in.clock.checked)
		}
	}
	if img != nil {
		in.timings.instantiate = time.Since(t0)
		return in.restore(img)
	}
	if err := in.pokeRuntimeOffset("_PyEM_EMSCRIPTEN_TRAMPOLINE_OFFSET", uint32(res[0])); err != nil {
		return err
	}
	if _, err := in.call(ctx, fn("__wasm_call_ctors")); err != nil {
		return fmt.Errorf("runtime: run constructors: %w", err)
	}
	// Arity cache for the trampoline: one byte per table slot.
	// Slots added later (the trampoline itself) miss the cache and ask Go.
	if tbl := in.eng.tableMin; tbl > 0 {
		p, err := in.malloc(ctx, tbl)
		if err == nil {
			in.setArityCache(p)
		}
	}
	in.timings.instantiate = time.Since(t0)
	t0 = time.Now()
	if err := in.setGlobalByte("Py_EMSCRIPTEN_SIGNAL_HANDLING", 1); err != nil {
		return err
	}
	if _, err := in.call(ctx, fn("Py_InitializeEx"), 1); err != nil {
		return fmt.Errorf("runtime: Py_InitializeEx: %w", err)
	}
	var out strings.Builder
	in.host.SetOutput(&out, &out)
	rc, err := in.runSimple(ctx, bootPy)
	in.host.SetOutput(nil, nil)
	if err != nil || rc != 0 {
		return fmt.Errorf("runtime: bootstrap failed: %v %s", err, out.String())
	}
	// Requests call _rlm.run through the C API: PyRun_SimpleString would
	// parse and compile a line of source on every request.
	if in.runFn, err = in.rlmAttr(ctx, "run"); err != nil || in.runFn == 0 {
		return fmt.Errorf("runtime: bootstrap did not install _rlm.run: %v", err)
	}
	in.takeFn = 0
	if in.hasFuncs(directTextFuncs) {
		in.takeFn, _ = in.rlmAttr(ctx, "take")
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	defer in.recordMemorySize()
	defer func() { in.timings.initialize = time.Since(t0) }()
	req, _ := pymarshal.Encode(pymarshal.Tuple{"version"})
	v, err := in.requestLocked(ctx, req, nil, Output{})
	if t, ok := v.([]any); err == nil && ok && len(t) == 1 {
		in.version, _ = t[0].(string)
	}
	if err != nil {
		return err
	}
	req, _ = pymarshal.Encode(pymarshal.Tuple{"rlm", rlmPy})
	if _, err := in.requestLocked(ctx, req, nil, Output{}); err != nil {
		return fmt.Errorf("runtime: install the RLM helpers: %w", err)
	}
	return in.loadFast(ctx)
}

// rlmAttr returns a new reference to the attribute name of the guest's
// module _rlm (0 when it has none).
func (in *Interpreter) rlmAttr(ctx context.Context, name string) (uint32, error) {
	mod, err := in.cstring(ctx, "_rlm")
	if err != nil {
		return 0, err
	}
	defer in.call(ctx, in.fns.free, uint64(mod))
	attr, err := in.cstring(ctx, name)
	if err != nil {
		return 0, err
	}
	defer in.call(ctx, in.fns.free, uint64(attr))
	res, err := in.call(ctx, in.main.ExportedFunction("PyImport_ImportModuleAttrString"), uint64(mod), uint64(attr))
	if err != nil {
		return 0, err
	}
	if res[0] == 0 {
		_, err = in.call(ctx, in.fns.errClear) // the AttributeError
	}
	return uint32(res[0]), err
}

func (in *Interpreter) hasFuncs(names []string) bool {
	for _, n := range names {
		if in.main.ExportedFunction(n) == nil {
			return false
		}
	}
	return true
}

// setArityCache tells the trampoline and the host where the arity cache is.
func (in *Interpreter) setArityCache(p uint32) {
	tbl := in.eng.tableMin
	in.tramp.ExportedGlobal("cache_base").(api.MutableGlobal).Set(uint64(p))
	in.tramp.ExportedGlobal("cache_len").(api.MutableGlobal).Set(uint64(tbl))
	in.host.SetArityCache(p, tbl)
	in.arityCache = p
}

// unwrapHostModule returns the module instance inside the wrapper wazero
// puts around host modules: the import resolver needs the instance itself.
func unwrapHostModule(m api.Module) api.Module {
	v := reflect.ValueOf(m)
	if v.Kind() == reflect.Struct && v.NumField() == 1 {
		if inner, ok := v.Field(0).Interface().(api.Module); ok {
			return inner
		}
	}
	return m
}

var guestEnv = []string{
	"PYTHONHOME=/",
	"PYTHONDONTWRITEBYTECODE=1",
	"PYTHONUNBUFFERED=1",
	"PYTHON_COLORS=0",
	"PYTHONIOENCODING=utf-8",
	"HOME=/home/pyodide",
	"USER=pyodide",
	"LOGNAME=pyodide",
	"PATH=/",
	"PWD=/home/pyodide",
	"LANG=C.UTF-8",
	"TZ=UTC",
}

// pokeRuntimeOffset writes v at _PyRuntime + *offsetGlobal, as the glue's
// preRun hook does for the trampoline pointer.
func (in *Interpreter) pokeRuntimeOffset(offsetGlobal string, v uint32) error {
	rt := in.main.ExportedGlobal("_PyRuntime")
	off := in.main.ExportedGlobal(offsetGlobal)
	if rt == nil || off == nil {
		return fmt.Errorf("%w: pyodide.asm.wasm does not export _PyRuntime and %s", ErrDistribution, offsetGlobal)
	}
	mem := in.main.Memory()
	o, ok := mem.ReadUint32Le(uint32(off.Get()))
	if !ok || !mem.WriteUint32Le(uint32(rt.Get())+o, v) {
		return fmt.Errorf("runtime: %s points outside memory", offsetGlobal)
	}
	return nil
}

func (in *Interpreter) setGlobalByte(name string, v byte) error {
	g := in.main.ExportedGlobal(name)
	if g == nil {
		return fmt.Errorf("%w: pyodide.asm.wasm does not export %s", ErrDistribution, name)
	}
	if !in.main.Memory().WriteByte(uint32(g.Get()), v) {
		return fmt.Errorf("runtime: %s points outside memory", name)
	}
	return nil
}

// call invokes a guest function, turning guest exits, aborts and traps
// into errors; any of them leaves the interpreter unusable.
func (in *Interpreter) call(ctx context.Context, f api.Function, args ...uint64) (res []uint64, err error) {
	if in.deadErr != nil {
		return nil, in.deadErr
	}
	defer in.callEnded(&err)
	return f.Call(in.killCtx, args...)
}

// call1 is call for a function of at most len(in.stack) parameters and
// one result, which it returns: the request path's C API calls, without
// the allocations of api.Function.Call (its arguments and results). The
// stack is the interpreter's own; a call made from a host function while
// one runs reuses it, which is safe, since a call reads its arguments
// before anything else runs and writes its result when it returns.
func (in *Interpreter) call1(f api.Function, args ...uint64) (r uint64, err error) {
	if in.deadErr != nil {
		return 0, in.deadErr
	}
	defer in.callEnded(&err)
	st := in.stack[:]
	copy(st, args)
	if err := f.CallWithStack(in.killCtx, st); err != nil {
		return 0, err
	}
	return st[0], nil
}

// callEnded turns a guest call's panic or error into the interpreter's
// death (deadErr), with the guest's own message for an exit or abort.
func (in *Interpreter) callEnded(errp *error) {
	if r := recover(); r != nil {
		*errp = fmt.Errorf("runtime: guest panic: %v", r)
	}
	err := *errp
	if err == nil {
		return
	}
	// An exit or abort is the guest's own doing: its message, not the
	// wasm stack trace wazero adds (kept for traps).
	var exit *emscripten.ExitError
	var abort *emscripten.AbortError
	if errors.As(err, &exit) {
		err = exit
	} else if errors.As(err, &abort) {
		err = abort
	} else if msg := err.Error(); msg == "stack overflow" || strings.HasPrefix(msg, "wasm error: stack overflow") {
		err = errStackOverflow
	}
	in.deadErr = fmt.Errorf("%w: %w", ErrDead, err)
	*errp = in.deadErr
}

func (in *Interpreter) malloc(ctx context.Context, n uint32) (uint32, error) {
	res, err := in.call(ctx, in.fns.malloc, uint64(n))
	if err != nil {
		return 0, err
	}
	if res[0] == 0 {
		return 0, fmt.Errorf("runtime: guest out of memory allocating %d bytes", n)
	}
	return uint32(res[0]), nil
}

func (in *Interpreter) cstring(ctx context.Context, s string) (uint32, error) {
	p, err := in.malloc(ctx, uint32(len(s))+1)
	if err != nil {
		return 0, err
	}
	b, _ := in.main.Memory().Read(p, uint32(len(s))+1)
	copy(b, s)
	b[len(s)] = 0
	return p, nil
}

func (in *Interpreter) runSimple(ctx context.Context, src string) (int32, error) {
	p, err := in.cstring(ctx, src)
	if err != nil {
		return -1, err
	}
	defer in.call(ctx, in.fns.free, uint64(p))
	res, err := in.call(ctx, in.fns.runSimple, uint64(p))
	if err != nil {
		return -1, err
	}
	return int32(res[0]), nil
}

// Interrupt raises KeyboardInterrupt in the code the interpreter is running
// (or in the next code it runs, if it is idle).
func (in *Interpreter) Interrupt() { in.intr.Swap(SIGINT) }

// MemorySize is the size of the guest's linear memory in bytes, as of the
// end of the last call (it may be called while code runs).
func (in *Interpreter) MemorySize() uint64 { return in.memSize.Load() }

// recordMemorySize notes the memory's size; it runs with in.mu held.
func (in *Interpreter) recordMemorySize() {
	if in.main != nil {
		in.memSize.Store(uint64(in.main.Memory().Size()))
	}
}

// Close releases the interpreter. It is idempotent and may be called while
// code runs: the running code is terminated at once (even code that ignores
// KeyboardInterrupt) and its call returns ErrClosed.
func (in *Interpreter) Close() error {
	if !in.closed.CompareAndSwap(false, true) {
		return nil
	}
	if in.host != nil {
		in.host.Kill()
	}
	in.kill()
	in.mu.Lock()
	defer in.mu.Unlock()
	in.clock.wait()
	ctx := context.Background()
	for i := len(in.mods) - 1; i >= 0; i-- {
		in.mods[i].Close(ctx)
	}
	if in.host != nil {
		in.host.Close()
	}
	return nil
}

var stderr io.Writer = osStderr()

func vfsClock(now func() time.Time) func() int64 {
	return func() int64 { return now().UnixNano() }
}

// PythonVersion is the interpreter's sys.version_info as "3.14.2".
func (in *Interpreter) PythonVersion() string { return in.version }
