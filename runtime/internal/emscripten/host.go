package emscripten

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/vfs"
)

// Interrupt is where the interpreter's pending signal number is kept; see the
// runtime package's InterruptSource.
type Interrupt interface {
	// Swap stores v and returns the previous value, atomically.
	Swap(v int32) int32
	// Load returns the current value.
	Load() int32
}

// InterruptWaiter is an Interrupt that can be waited on; see the runtime
// package's InterruptWaiter. The guest's sleeps wait on it.
type InterruptWaiter interface {
	Interrupt
	// WaitInterrupt returns when a signal is pending, ctx is done, or d
	// has passed (d < 0: no limit), and reports whether a signal is
	// pending. It may return early.
	WaitInterrupt(ctx context.Context, d time.Duration) bool
}

// Config is what a Host is built from.
type Config struct {
	FS        *vfs.FS
	Env       []string // KEY=VALUE pairs the guest sees
	Args0     string   // program name
	Interrupt InterruptWaiter
	// MaxMemory caps the guest's linear memory in bytes (0: the 4 GiB wasm32 limit).
	MaxMemory uint64
	// Now returns wall-clock time; nil means time.Now.
	Now func() time.Time
	// Rand fills p with random bytes; nil means crypto/rand.
	Rand func(p []byte)
	// Log receives diagnostics the guest writes through emscripten_log.
	Log io.Writer
}

// Host is the per-interpreter state behind the imports.
type Host struct {
	cfg   Config
	fs    *vfs.FS
	fds   *fdTable
	kept  []keptFD  // Keep's descriptors
	std   [3]stream // the standard streams (descriptors 0-2, /dev/stdin, stdout, stderr)
	cwd   string
	umask uint32
	start time.Time
	net   *network

	stdout, stderr atomic.Pointer[io.Writer]
	killed         atomic.Bool
	delivered      atomic.Int64
	idle           atomic.Int64 // ns the guest spent waiting in the host (AddIdle)
	refused        atomic.Int64 // heap growths refused (see MemoryRefused)
	checked        func()       // see SetSignalCheck

	iov [][]byte // the buffers of the guest's current read or write (rw)

	// Trampoline support, filled in by the runtime after instantiation.
	errnoAddr  uint32 // guest address of errno (0: unknown); see SetErrnoAddr
	arityCache uint32 // guest address of the arity byte cache
	arityLen   uint32 // entries in the cache
}

// New builds a Host.
func New(cfg Config) (*Host, error) {
	if cfg.FS == nil {
		return nil, errors.New("emscripten: Config.FS is required")
	}
	if cfg.Interrupt == nil {
		return nil, errors.New("emscripten: Config.Interrupt is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = cryptoRand
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Args0 == "" {
		cfg.Args0 = "python"
	}
	h := &Host{cfg: cfg, fs: cfg.FS, cwd: "/", umask: 0o022, start: time.Now()}
	h.fds = newFDTable()
	h.net = newNetwork()
	h.SetOutput(io.Discard, io.Discard)
	if err := h.installStdio(); err != nil {
		return nil, fmt.Errorf("emscripten: stdio: %w", err)
	}
	return h, nil
}

// SetOutput routes the guest's fd 1 and fd 2.
func (h *Host) SetOutput(stdout, stderr io.Writer) {
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	h.stdout.Store(&stdout)
	h.stderr.Store(&stderr)
}

// MaxMemory is the cap on the guest's linear memory in bytes (0: none
// beyond wasm32's).
func (h *Host) MaxMemory() uint64 { return h.cfg.MaxMemory }

// SetCwd sets the guest's working directory.
func (h *Host) SetCwd(dir string) { h.cwd = dir }

// SetArityCache tells the trampoline import where its byte cache lives.
func (h *Host) SetArityCache(addr, n uint32) { h.arityCache, h.arityLen = addr, n }

// SetErrnoAddr tells the imports where the guest's errno is. A syscall
// import returns -errno, and the guest's libc wrapper sets errno from it;
// but Emscripten's select() passes poll's raw result on without setting
// errno, so that an interrupted select reached CPython as "OSError:
// [Errno 0]" instead of EINTR (and KeyboardInterrupt). The poll import
// sets errno itself when it fails, as the wrapper would.
func (h *Host) SetErrnoAddr(addr uint32) { h.errnoAddr = addr }

// setErrno stores errno in the guest's errno, when known.
func (h *Host) setErrno(m mem, errno vfs.Errno) {
	if h.errnoAddr != 0 && m.ok(h.errnoAddr, 4) {
		m.put32(h.errnoAddr, uint32(errno))
	}
}

// AddIdle adds d to the time the guest spent waiting in the host (a
// sleep, a poll, a bridge call), which its CPU-time clocks leave out.
func (h *Host) AddIdle(d time.Duration) { h.idle.Add(int64(d)) }

// SetSignalCheck sets f to be called, on the guest's goroutine, by each
// of CPython's periodic signal checks that finds no signal pending. The
// runtime uses it to space the checks out in long runs (its signal clock).
func (h *Host) SetSignalCheck(f func()) { h.checked = f }

// ErrKilled is the panic value with which the imports unwind a guest that
// Kill stopped.
var ErrKilled = errors.New("the interpreter was killed")

// Kill makes the running guest unwind at its next signal check (every ~50
// bytecodes, unless the runtime spaced them out: it then makes the guest
// check at once) or blocking call, even if its Python code ignores
// KeyboardInterrupt. C code that never returns to the interpreter loop
// cannot be stopped this way; only ending the process stops it.
func (h *Host) Kill() { h.killed.Store(true) }

// FS returns the guest's file system.
func (h *Host) FS() *vfs.FS { return h.fs }

// Close releases descriptors and sockets.
func (h *Host) Close() {
	h.fds.closeAll()
}
