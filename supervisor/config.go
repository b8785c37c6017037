package supervisor

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/runtime"
)

// WorkerMode says whether a sandbox runs in an rlm-worker process.
type WorkerMode int

const (
	// WorkerAuto uses a worker process when one can be started, else runs
	// the interpreter in-process (direct mode).
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

// Defaults, applied by New to zero fields of Config.
const (
	DefaultTimeout         = 30 * time.Second
	DefaultGracePeriod     = 2 * time.Second
	DefaultMaxOutputLength = 100_000
	DefaultStartTimeout    = 60 * time.Second
)

// Config configures a sandbox. Every zero field takes the default its
// comment names.
type Config struct {
	// Timeout bounds each Execute. At Timeout the code gets a
	// KeyboardInterrupt; if it has not returned GracePeriod later it is
	// killed. Default: DefaultTimeout (30 s). Negative: no timeout.
	Timeout time.Duration
	// GracePeriod is how long interrupted code may take to return before it
	// is killed. Default: DefaultGracePeriod (2 s).
	GracePeriod time.Duration
	// MaxOutputLength caps the stdout and stderr an Execute returns, in
	// bytes; longer output is truncated with a notice. Default:
	// DefaultMaxOutputLength. Negative: no limit.
	MaxOutputLength int
	// UseWorker chooses worker or direct mode. Default: WorkerAuto.
	UseWorker WorkerMode
	// WorkerPath is the rlm-worker binary. Default: "rlm-worker" next to the
	// running executable, then on $PATH.
	WorkerPath string
	// StartTimeout bounds starting a worker and booting its interpreter.
	// Default: DefaultStartTimeout (60 s: the first run on a machine
	// compiles Pyodide).
	StartTimeout time.Duration
	// PyodideDir is the directory Pyodide is loaded from. Default:
	// runtime.DefaultDistribution() ($RLM_SANDBOX_PYODIDE or the cache).
	PyodideDir string
	// CacheDir holds the compilation and bytecode caches. Default:
	// runtime.CacheDir().
	CacheDir string
	// MemoryLimit caps the interpreter's memory in bytes; allocations past
	// it raise MemoryError. Default: 0, the wasm32 limit of 4 GiB.
	MemoryLimit uint64
	// OnStdout and OnStderr, when set, receive each line Python writes, as
	// it is written (without the newline).
	OnStdout, OnStderr func(line string)
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
	if c.StartTimeout <= 0 {
		c.StartTimeout = DefaultStartTimeout
	}
	if c.PyodideDir == "" {
		c.PyodideDir = string(runtime.DefaultDistribution())
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
	return runtime.Config{
		Distribution: runtime.Dir(c.PyodideDir),
		CacheDir:     c.CacheDir,
		MemoryLimit:  c.MemoryLimit,
	}
}
