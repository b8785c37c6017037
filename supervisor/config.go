package supervisor

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/runtime"
)

// WorkerMode says whether a sandbox runs in an rlm-worker process.
type WorkerMode int

const (
	// WorkerAuto uses a worker process when one can be started, else runs
	// the interpreter in-process (direct mode) and logs a warning through
	// Config.Logger. "Cannot be started" is no worker to run (none found,
	// or its start refused): a worker that started and then failed to
	// come up (it timed out, exited, or wrote something other than the
	// protocol) is New's error, matching ErrWorkerUnavailable, not a
	// reason to run the code without the worker's walls.
	WorkerAuto WorkerMode = iota
	// WorkerAlways requires a worker process; New fails without one.
	WorkerAlways
	// WorkerNever runs the interpreter in this process.
	WorkerNever
)

func (m WorkerMode) String() string {
	switch m {
	case WorkerAuto:
		return "auto"
	case WorkerAlways:
		return "always"
	case WorkerNever:
		return "never"
	}
	return fmt.Sprintf("WorkerMode(%d)", int(m))
}

// Hardening says whether a worker process locks itself down.
type Hardening int

const (
	// HardeningOn, the default, locks each worker down before it runs any
	// code: on Linux its own process group, new user and network
	// namespaces where the kernel lets an unprivileged process create them,
	// no_new_privs, rlimits, a Landlock ruleset with no file system access
	// and a seccomp allow-list (no file opened, no socket, no process
	// started). What the kernel refuses is logged and reported by
	// Info.HardeningRefused, and the worker runs with the rest.
	HardeningOn Hardening = iota
	// HardeningOff starts workers as plain child processes, for debugging
	// the worker itself (strace, a debugger, perf). Risk: the Python code
	// is then confined by the WebAssembly boundary alone; a bug in the
	// engine or a host function would give it the supervisor's user,
	// files and network.
	HardeningOff
)

func (h Hardening) String() string {
	switch h {
	case HardeningOn:
		return "on"
	case HardeningOff:
		return "off"
	}
	return fmt.Sprintf("Hardening(%d)", int(h))
}

// Defaults, applied by New to zero fields of Config.
const (
	DefaultTimeout         = 30 * time.Second
	DefaultGracePeriod     = 2 * time.Second
	DefaultMaxOutputLength = 50_000
	DefaultStartTimeout    = 60 * time.Second
	// DefaultMaxBridgeConcurrency bounds how many host callbacks one
	// llm_query_batched or rlm_query_batched call runs at once.
	DefaultMaxBridgeConcurrency = 8
)

// Config configures a sandbox. Every zero field takes the default its
// comment names.
type Config struct {
	// Timeout bounds the time each Execute spends running Python. Time
	// spent waiting for the host to answer llm_query or rlm_query does not
	// count, so an agent making many slow LLM calls does not time out for
	// that (see WallTimeout). At Timeout the code gets a KeyboardInterrupt;
	// if it has not returned GracePeriod later it is killed. Default:
	// DefaultTimeout (30 s). Negative: no timeout.
	Timeout time.Duration
	// WallTimeout, when positive, bounds the whole of each Execute, bridge
	// waits included, and ends it the way Timeout does. Default: none.
	WallTimeout time.Duration
	// GracePeriod is how long interrupted code may take to return before it
	// is killed. Code that catches the interrupt and runs on is
	// interrupted again, 200 ms after the first and then every 100 ms,
	// within the grace period. Default (zero or negative):
	// DefaultGracePeriod (2 s).
	GracePeriod time.Duration
	// MaxOutputLength caps, in characters, each of the stdout and stderr
	// an Execute returns. Longer output keeps its first and last
	// MaxOutputLength/2 characters around a notice saying how many were
	// omitted, and costs bounded memory however much the code prints.
	// An exception's message and traceback are cut the same way (and
	// never reach the host longer than 1,048,576 characters each, whatever
	// the limit). Default: DefaultMaxOutputLength (50,000). Negative: no
	// limit.
	MaxOutputLength int
	// UseWorker chooses worker or direct mode. Default: WorkerAuto.
	UseWorker WorkerMode
	// WorkerPath is the rlm-worker binary. Default: $RLM_WORKER, else
	// "rlm-worker" next to the running executable, then on $PATH, else the
	// running program itself, re-executed as its own worker (see the
	// package documentation). Set, it is the only worker tried; so is
	// $RLM_WORKER when set.
	WorkerPath string
	// NoSelfExec keeps New from starting the running program as its own
	// worker when it finds no rlm-worker binary: WorkerAuto then runs the
	// interpreter in-process, WorkerAlways fails. Default: false.
	NoSelfExec bool
	// Hardening locks worker processes down (see HardeningOn). It has no
	// effect in direct mode, which cannot lock down the calling process.
	// Default: HardeningOn.
	Hardening Hardening
	// StartTimeout bounds starting a worker and booting its interpreter.
	// Default: DefaultStartTimeout (60 s). A worker that says it compiles
	// Pyodide (the first run on a machine, or of a new build) has 10
	// minutes from then, however short StartTimeout is.
	StartTimeout time.Duration
	// IndexURL lists where Pyodide may be loaded from, tried in order:
	// local directories, file:// or http(s):// URLs of a Pyodide
	// distribution. Each file is checked against its known SHA-256 (see
	// runtime.Config.IndexURL). Default: $RLM_PYODIDE_INDEX_URL
	// (comma-separated), else runtime.DefaultIndexURL(): the directory
	// `make` fills, then jsDelivr.
	IndexURL []string
	// Integrity and AllowUnverified are as in runtime.Config: expected
	// SHA-256 hashes by file name for a Pyodide version other than
	// runtime.PyodideVersion, or loading without any.
	Integrity       map[string]string
	AllowUnverified bool
	// PyodideDir, when set, is a directory Pyodide is loaded from as is,
	// without hash checks, instead of IndexURL. Default: unset.
	PyodideDir string
	// CacheDir holds the compilation and bytecode caches. Default:
	// runtime.CacheDir().
	CacheDir string
	// MemoryLimit caps the interpreter's memory in bytes (rounded down to
	// whole 64 KiB pages); allocations past it raise MemoryError. From runtime.MinMemoryLimit (32 MiB) to
	// runtime.MaxMemoryLimit (4 GiB): New, NewDirect, Restart and
	// Pool.Get refuse other values with an error that matches
	// runtime.ErrMemoryLimit. Default: 0, the wasm32 limit of 4 GiB.
	MemoryLimit uint64
	// KeepDictOrder makes GetVariable (and a bridge call's arguments, the
	// ctx of rlm_query) return a dict whose keys are all strings, but not
	// in ascending order, as a runtime.Dict in its order instead of a
	// map[string]any, which has none. Default: false (a map[string]any for
	// every such dict).
	KeepDictOrder bool
	// NoSnapshot boots CPython in every sandbox instead of starting from
	// the boot snapshot kept in CacheDir (see runtime.Config.NoSnapshot);
	// also RLM_SANDBOX_SNAPSHOT=0. For comparison and diagnosis. Default:
	// false.
	NoSnapshot bool
	// OnStdout and OnStderr, when set, receive each line Python writes, as
	// it is written (without the newline). A very long line arrives in
	// pieces of at most 64 KiB. A callback that panics is logged and gets
	// no more lines of that execution.
	//
	// The output callbacks (these and Stdout, Stderr) of an execution run
	// on a goroutine of its own, one call at a time, in the order the code
	// wrote, both streams together. The code may write up to 1 MiB ahead
	// of them; past that its writes wait, so a slow callback slows the
	// code, and the wait counts against Timeout. A bridge call (llm_query,
	// rlm_query) waits until the callbacks have had what the code wrote
	// before it. Execute returns once they have had every line.
	//
	// When the execution is stopped (Timeout, WallTimeout, its context,
	// Cancel), writes no longer wait: the callbacks still get what the
	// code writes while the queue holds less than 1 MiB (what it wrote
	// before the stop, what it prints as it takes the interrupt), and none
	// of the rest. They get GracePeriod to catch up, as the code gets it
	// to return; then, or at once when the sandbox is destroyed, the lines
	// not yet handed to them are dropped (the CodeExecution keeps them all
	// the same), and a call in progress is no longer waited for: it runs
	// on, and gets nothing more. Once the code has returned unstopped, the
	// wait for the callbacks counts against Timeout too (they then get
	// GracePeriod), WallTimeout bounds it, and the end of the context,
	// Cancel or Destroy ends it at once: an execution whose callbacks had
	// not had every line then returns its CodeExecution with an error
	// matching ErrTimeout, ErrCanceled or ErrDestroyed. Time the code
	// spends waiting for the callbacks (a slow consumer of its output) is
	// Python time, as it was when they ran on the code's path. A callback that calls its own sandbox
	// (Execute, GetVariable) waits for the execution that called it: give
	// that call a context that ends.
	OnStdout, OnStderr func(line string)
	// Stdout and Stderr, when set, receive what Python writes to
	// sys.stdout and sys.stderr byte for byte, in order, as it is written
	// (a worker sends writes on within a millisecond, several at a time):
	// for a caller that passes the output on as it is, where OnStdout's
	// lines would lose a missing last newline and split a line longer
	// than 64 KiB. They are called as OnStdout is (see there); a Write
	// that fails or panics ends that stream's writes for the execution (a
	// panic is logged). They do not count against MaxOutputLength, and
	// do not change what the CodeExecution keeps or what OnStdout gets.
	Stdout, Stderr io.Writer
	// OnLLMQuery answers Python's llm_query(prompt), and each prompt of
	// llm_query_batched. An error it returns is raised in Python as
	// BridgeError with the error's message. Its ctx is cancelled when the
	// execution is cancelled or times out; Python then gets
	// KeyboardInterrupt at once, without waiting for the callback (one
	// that ignores ctx runs on, and its answer is dropped). An answer
	// travels to a worker in one frame of at most 64 MiB: a larger one
	// raises BridgeError there (direct mode has no such limit). Nil:
	// llm_query raises BridgeError saying no host callback is set.
	OnLLMQuery func(ctx context.Context, prompt string) (string, error)
	// OnRLMQuery answers Python's rlm_query(task, ctx) and each task of
	// rlm_query_batched, like OnLLMQuery. context is the ctx argument
	// converted to Go (as GetVariable converts values; an explicit None is
	// nil) or, when Python omitted it, the sandbox's current context: the
	// value last passed to Initialize (the very value, not a copy).
	OnRLMQuery func(ctx context.Context, task string, context any) (string, error)
	// MaxBridgeConcurrency bounds how many host callbacks of one execution
	// run at once (the batched bridges run several); the other calls of a
	// batch wait their turn in a queue, at a few bytes each (a batch of a
	// million prompts costs no million goroutines). Callbacks that ignore
	// their ctx and run on after their execution ended no longer count
	// against the next execution's. Default: DefaultMaxBridgeConcurrency (8).
	MaxBridgeConcurrency int
	// Logger receives the supervisor's logs and the worker's. Default: a
	// logger that discards.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.GracePeriod <= 0 {
		c.GracePeriod = DefaultGracePeriod
	}
	if c.MaxOutputLength == 0 {
		c.MaxOutputLength = DefaultMaxOutputLength
	}
	if c.MaxBridgeConcurrency <= 0 {
		c.MaxBridgeConcurrency = DefaultMaxBridgeConcurrency
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = DefaultStartTimeout
	}
	if c.CacheDir == "" {
		c.CacheDir = runtime.CacheDir()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c
}

func (c Config) runtimeConfig() runtime.Config {
	rc := runtime.Config{
		IndexURL:        c.IndexURL,
		Integrity:       c.Integrity,
		AllowUnverified: c.AllowUnverified,
		CacheDir:        c.CacheDir,
		MemoryLimit:     c.MemoryLimit,
		NoSnapshot:      c.NoSnapshot,
		KeepDictOrder:   c.KeepDictOrder,
		Notice:          logWriter{c.Logger},
	}
	if c.PyodideDir != "" {
		rc.Distribution = runtime.Dir(c.PyodideDir)
	}
	return rc
}

// logWriter logs each line written to it (the runtime's notices, in
// direct mode).
type logWriter struct{ log *slog.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if isNotice(line) {
			w.log.Warn(line)
		} else {
			w.log.Info(line)
		}
	}
	return len(p), nil
}

// The runtime's notices start with "rlm-sandbox: ". Those a person waits
// on or should know of (a compile of Pyodide, a boot snapshot that cannot
// be used) are logged as warnings, which a logger that shows only those
// (the command's) shows; the loader's (a download, an index URL that
// failed, which the error that ends the load lists again, and which a
// worker that had no network tries again with it) as information.
const (
	noticePrefix  = "rlm-sandbox: "
	compileNotice = noticePrefix + "compiling Pyodide"
)

func isNotice(line string) bool {
	return strings.HasPrefix(line, noticePrefix) &&
		!strings.HasPrefix(line, noticePrefix+"cannot load Pyodide from ") && !strings.HasPrefix(line, noticePrefix+"downloading ")
}

// workerArgs are the rlm-worker flags that carry the configuration.
func (c Config) workerArgs() []string {
	args := []string{"--cache", c.CacheDir, "--memory-limit", strconv.FormatUint(c.MemoryLimit, 10)}
	if c.PyodideDir != "" {
		args = append(args, "--pyodide", c.PyodideDir)
	}
	for _, u := range c.IndexURL {
		args = append(args, "--index-url", u)
	}
	names := make([]string, 0, len(c.Integrity))
	for name := range c.Integrity {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		args = append(args, "--integrity", name+"="+c.Integrity[name])
	}
	if c.AllowUnverified {
		args = append(args, "--allow-unverified")
	}
	if c.NoSnapshot {
		args = append(args, "--no-snapshot")
	}
	if c.KeepDictOrder {
		args = append(args, "--keep-dict-order")
	}
	if c.Hardening == HardeningOff {
		args = append(args, "--harden=false")
	}
	return args
}
