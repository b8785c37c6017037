package runtime

import (
	"os"
	"sync"
	"sync/atomic"

	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/linmem"
	"github.com/tetratelabs/wazero"
)

// BoundsChecksEnv names the environment variable that, set to 1, keeps the
// guest's bounds checks in a process that called DropBoundsChecks (for
// comparison and diagnosis).
const BoundsChecksEnv = "RLM_SANDBOX_BOUNDS_CHECKS"

// noBoundsChecks is the compiler configuration of wazero patch 0004, which
// stock wazero does not have.
type noBoundsChecks interface {
	WithoutMemoryBoundsChecks() wazero.RuntimeConfig
}

var (
	dropBoundsChecks atomic.Bool
	enginesMade      atomic.Bool // compile has run: the mode is settled
	dropOnce         sync.Once
	dropped          bool
)

// DropBoundsChecks makes this process compile the guest without a bounds
// check on each load and store, and give each interpreter a linear memory
// whose reserved address space covers every address a load or store can
// form, inaccessible past the memory's size: an out-of-bounds access
// faults instead of being checked. Go cannot recover such a fault, so the
// whole process dies (SIGSEGV) where Python would otherwise have seen a
// trap. Call it only in a process that hosts one sandbox and nothing else
// (rlm-worker does), before the first interpreter is created.
//
// It reports whether checks are off: not with stock wazero (only the
// binaries `make build` writes carry the patch), where 8 GiB of address
// space cannot be reserved, when RLM_SANDBOX_BOUNDS_CHECKS=1, or after an
// interpreter was created.
func DropBoundsChecks() bool {
	dropOnce.Do(func() {
		if os.Getenv(BoundsChecksEnv) == "1" || enginesMade.Load() {
			return
		}
		if _, ok := wazero.NewRuntimeConfigCompiler().(noBoundsChecks); !ok {
			return
		}
		if !linmem.SetGuarded() {
			return
		}
		dropBoundsChecks.Store(true)
		dropped = true
	})
	return dropped
}

// boundsChecked returns cfg for this process's mode, and the suffix that
// keeps the runtime's "compiled" marker and lock of each mode apart (the
// patched wazero keys their cache entries apart too).
func boundsChecked(cfg wazero.RuntimeConfig) (wazero.RuntimeConfig, string) {
	enginesMade.Store(true)
	if dropBoundsChecks.Load() {
		if c, ok := cfg.(noBoundsChecks); ok {
			return c.WithoutMemoryBoundsChecks(), "-nobounds"
		}
	}
	return cfg, ""
}

// InliningEnv names the environment variable that, set to 0, compiles the
// guest without inlining small functions into their callers (for
// comparison, and for wasm stack traces that show every frame).
const InliningEnv = "RLM_SANDBOX_INLINING"

// inlining is the compiler configuration of wazero patch 0028, which stock
// wazero does not have.
type inlining interface {
	WithInlining() wazero.RuntimeConfig
}

// inlined returns cfg compiling small functions into their direct callers
// where this build's wazero can (the binaries `make build` writes), unless
// RLM_SANDBOX_INLINING=0, and the suffix that keeps the runtime's
// "compiled" marker and lock apart (wazero keys the code apart too). It
// speeds up the interpreter's hot loops by about 4% (RATIONALE.md) and
// makes the compiled code about half as large again.
func inlined(cfg wazero.RuntimeConfig) (wazero.RuntimeConfig, string) {
	if os.Getenv(InliningEnv) == "0" {
		return cfg, ""
	}
	if c, ok := cfg.(inlining); ok {
		return c.WithInlining(), "-inline"
	}
	return cfg, ""
}

// guestConfig returns the compiler configuration the guest gets in this
// process (bounds checks and inlining as above), and the suffix of its
// "compiled" marker and lock.
func guestConfig() (wazero.RuntimeConfig, string) {
	cfg, bounds := boundsChecked(wazero.NewRuntimeConfigCompiler().WithCoreFeatures(features()))
	cfg, inline := inlined(cfg)
	return cfg, bounds + inline
}
