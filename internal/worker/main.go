package worker

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/internal/harden"
	"github.com/rlm-sandbox/rlm-sandbox/internal/procs"
	"github.com/rlm-sandbox/rlm-sandbox/ipc"
	"github.com/rlm-sandbox/rlm-sandbox/runtime"
	"golang.org/x/sys/unix"
)

// Main runs a worker process: it parses the rlm-worker command line in
// args (without the program name), serves the protocol on the process's
// stdin and stdout with the interrupt page at fd 3 (by default), and
// returns the exit code. Both cmd/rlm-worker and a program that the
// supervisor re-executes as its own worker call it; it takes over the
// process's signals and descriptors 0-2, so nothing else may run beside it.
// Once Pyodide is loaded it locks the whole process down (unless
// -harden=false; see internal/harden): from then on no file can be opened,
// no socket made, no process started, by any goroutine of the program.
func Main(args []string) int {
	fl := flag.NewFlagSet("rlm-worker", flag.ContinueOnError)
	pyodide := fl.String("pyodide", "", "Pyodide directory, loaded as is (default: the runtime's index URLs)")
	var indexURLs []string
	fl.Func("index-url", "where to load Pyodide from: a directory, file:// or http(s):// URL; repeat to give fallbacks, tried in order (default: $"+runtime.IndexURLEnv+", else the cache, then jsDelivr)", func(s string) error {
		indexURLs = append(indexURLs, s)
		return nil
	})
	integrity := map[string]string{}
	fl.Func("integrity", "expected SHA-256 of a Pyodide file, as NAME=HASH (repeatable; for versions other than "+runtime.PyodideVersion+")", func(s string) error {
		name, hash, ok := strings.Cut(s, "=")
		if !ok || name == "" || hash == "" {
			return fmt.Errorf("want NAME=HASH, got %q", s)
		}
		integrity[name] = hash
		return nil
	})
	allowUnverified := fl.Bool("allow-unverified", false, "load Pyodide files that have no expected hash")
	cache := fl.String("cache", "", "cache directory (default: the runtime's)")
	memLimit := fl.Uint64("memory-limit", 0, "guest memory limit in bytes (0: none)")
	noSnapshot := fl.Bool("no-snapshot", false, "boot CPython instead of starting from the boot snapshot")
	keepDictOrder := fl.Bool("keep-dict-order", false, "return str-keyed dicts not in ascending key order in their order (runtime.Config.KeepDictOrder)")
	pageFD := fl.Int("interrupt-fd", 3, "inherited descriptor of the interrupt page")
	stageFD := fl.Int("stage-fd", -1, "inherited descriptor of the staging file the supervisor writes large values to (-1: none; they come in Stage frames)")
	lockDown := fl.Bool("harden", true, "lock the process down (seccomp, Landlock, rlimits, no_new_privs) once Pyodide is loaded, before any code runs; false is for debugging only: the code then runs with the worker's user, files and network")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	// Start-up allocates what the worker keeps (wazero's view of the
	// module; the guest's memory is mapped apart): collect less often
	// while it runs, and as usual once the worker is ready, unless GOGC
	// says otherwise. (Staged values get a memory limit: see
	// internal/worker/memory.go.)
	ready := func() {}
	if os.Getenv("GOGC") == "" {
		old := debug.SetGCPercent(400)
		ready = func() { debug.SetGCPercent(old) }
	}
	signal.Ignore(os.Interrupt)
	idleSpin := idleSpin()
	oomFirst()
	// A worker hosts one sandbox, which may die with it: the guest runs
	// without a bounds check on each memory access, in a guarded memory
	// where an out-of-bounds access kills the worker (ErrWorkerExited).
	// Only the binaries `make build` writes can; RATIONALE.md says why.
	runtime.DropBoundsChecks()
	attention := make(chan os.Signal, 1)
	signal.Notify(attention, AttentionSignal)

	// The protocol owns the original stdout; fd 1 becomes stderr so that a
	// stray write from Go or C cannot corrupt a frame.
	proto, err := protocolStdout()
	if err != nil {
		log.Error("redirect stdout", "err", err)
		return 1
	}
	page, err := ipc.OpenPage(os.NewFile(uintptr(*pageFD), "interrupt-page"))
	if err != nil {
		log.Error("open interrupt page", "err", err)
		return 1
	}
	defer page.Close()

	cfg := runtime.Config{IndexURL: indexURLs, CacheDir: *cache, MemoryLimit: *memLimit, Interrupt: page, Notice: os.Stderr,
		AllowUnverified: *allowUnverified, NoSnapshot: *noSnapshot, KeepDictOrder: *keepDictOrder}
	if len(integrity) > 0 {
		cfg.Integrity = integrity
	}
	if *pyodide != "" {
		cfg.Distribution = runtime.Dir(*pyodide)
	}
	var stageFile *os.File
	if *stageFD >= 0 {
		stageFile = os.NewFile(uintptr(*stageFD), "stage")
	}
	opts := Options{Runtime: cfg, Log: log, Attention: attention, Ready: ready, StageFile: stageFile, IdleSpin: idleSpin,
		CodeReturned: page.MarkReturned}
	if *lockDown {
		opts.Harden = harden.Apply
	}
	err = Serve(context.Background(), os.Stdin, proto, opts)
	if err != nil {
		log.Error("worker stopped", "err", err)
		return 1
	}
	return 0
}

// idleSpin is the IdleSpin that suits the CPUs there are, once the Go
// scheduler has two Ps (procs.AtLeastTwo): none on one CPU, where polling
// for the next request would take the CPU from the supervisor that is to
// write it.
func idleSpin() time.Duration {
	if procs.AtLeastTwo() {
		return -1
	}
	return 0 // DefaultIdleSpin
}

// oomScoreAdj is what a worker adds to its score for the kernel's
// out-of-memory killer (/proc/self/oom_score_adj, -1000 to 1000): when a
// machine or a container runs out of memory, a sandbox's worker, which the
// supervisor survives (ErrWorkerExited), goes before the process that
// supervises it and every other sandbox. (A server whose own memory is
// most of the total still scores higher.)
const oomScoreAdj = "500"

// oomFirst raises the worker's out-of-memory score, where there is one; a
// process may always raise its own.
func oomFirst() {
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte(oomScoreAdj), 0)
}

func protocolStdout() (io.Writer, error) {
	fd, err := unix.Dup(1)
	if err != nil {
		return nil, err
	}
	unix.CloseOnExec(fd)
	if err := unix.Dup2(2, 1); err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "protocol")
	if f == nil {
		return nil, fmt.Errorf("bad descriptor %d", fd)
	}
	return f, nil
}
