// Package supervisor is the public Go API of rlm-sandbox: sandboxes that
// run LLM-written Python in real CPython (Pyodide on wazero), one worker
// process per sandbox, or in this process (direct mode).
//
// # Worker processes
//
// New runs each sandbox's interpreter in a worker process of its own,
// unless Config.UseWorker is WorkerNever: code that ignores an interrupt
// is killed, Destroy returns every byte of the interpreter's memory to the
// OS, and a crash takes only that sandbox with it. The worker is the first
// of:
//
//  1. Config.WorkerPath, when set (and then only it);
//  2. $RLM_WORKER, when set (and then only it);
//  3. an executable rlm-worker next to the running program;
//  4. rlm-worker on $PATH;
//  5. the running program itself (below), unless Config.NoSelfExec.
//
// Info().Worker says whether a sandbox got a worker, Info().PID which, and
// Info().Reason which worker and why. With WorkerAuto, the default, New
// runs the interpreter in this process only when no worker can be started
// at all (none found, or its start refused), and logs that at warning
// level through Config.Logger (which discards by default: check
// Info().Worker); WorkerAlways fails instead. A worker that started and
// then failed to come up (it timed out, exited, or wrote something other
// than the protocol on its stdout, say a banner an init function prints)
// is New's error in both modes.
//
// # The program as its own worker
//
// When no rlm-worker binary is found, New starts the running program
// again as the worker: its executable (/proc/self/exe where it exists, so
// even a binary replaced since it started; else os.Executable), with
// argv[0] "rlm-worker" so process listings stay readable, rlm-worker's
// command-line flags, and RLM_SANDBOX_WORKER=1 added to its environment.
// In that child this package's initialiser sees the variable, removes it
// from the environment (nothing the worker starts inherits it), and runs
// the worker: the same code as rlm-worker, speaking the same protocol with
// the same limits and lock-down (but for Landlock in a program linked with
// cgo, which cannot restrict all its threads: Info().HardeningRefused then
// says so; CGO_ENABLED=0 builds get it too). The process exits when the worker ends;
// the program's main never runs in it. Info().Reason then begins "worker
// started (self re-exec:".
//
// What of the program runs in that child is what Go initialises before
// this package (package-level variables, then init functions):
//
//   - every package this one imports, directly or not (the standard
//     library, wazero, msgpack, golang.org/x/sys, rlm-sandbox's own), as in
//     rlm-worker;
//   - never a package that imports this one, directly or not: not the
//     program's main package, nor any package of the program that uses the
//     supervisor;
//   - the program's other packages when Go orders them first. Since Go
//     1.21 the order is by import path (the Go specification, "Program
//     initialization"): at each step Go initialises the first package, in
//     import-path order, whose imports are all initialised. A package that
//     does not import this one is therefore initialised in the worker too
//     when its import path, and those of the packages it imports (directly
//     or not) that this one does not, sort before
//     "github.com/rlm-sandbox/rlm-sandbox/supervisor" (example.com/app/...,
//     github.com/acme/...); it is not when they all sort after every
//     package this one depends on (zz.example/...); in between, it depends
//     on the rest of the program.
//
// So a side effect of such an initialiser (a file written, a connection
// opened, a goroutine started) happens again in every worker started this
// way; tests/selfexec_test.go builds a program that shows it. Keep
// initialisers free of side effects, or keep the program out of its
// workers: with rlm-worker installed (go install
// github.com/rlm-sandbox/rlm-sandbox/cmd/rlm-worker, or `make build` in
// the source tree) where step 1 to 4 find it, or Config.NoSelfExec, or
// WorkerNever. (The rlm-sandbox command, whose initialisers have no such
// side effects, runs itself as its worker when it finds no rlm-worker.)
//
// A program that wants to decide where in its start-up the child turns
// into a worker builds with the tag rlmsandbox_noinithook, which leaves
// the initialiser out, and calls ServeWorkerIfChild first thing in main.
// Every package's initialisers, main's included, then run in the worker
// before the call; and New starts the program as its own worker only once
// the call has been made, so a program that forgets it gets direct mode
// (or ErrWorkerUnavailable), never a second copy of its main.
//
// Without RLM_SANDBOX_WORKER in the environment the initialiser costs one
// environment lookup; importing the package does nothing else.
//
// The worker is the program's own build: one built with a plain `go build`
// links stock wazero, whose compiled code checks the bounds of every guest
// memory access, where the rlm-worker that `make build` writes (patched
// wazero) drops those checks (see runtime.DropBoundsChecks). A test binary
// of a package that uses the supervisor is re-executed the same way.
package supervisor
