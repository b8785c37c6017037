package supervisor

import (
	"fmt"
	"os"
	"sync/atomic"

	"github.com/rlm-sandbox/rlm-sandbox/internal/worker"
)

// workerEnv marks a process the supervisor started from its own executable
// as a worker (see the package documentation, "The program as its own
// worker"). Its only accepted value is "1".
const workerEnv = "RLM_SANDBOX_WORKER"

// selfExecCalled records that the program called ServeWorkerIfChild, so a
// child started from its executable reaches the call.
var selfExecCalled atomic.Bool

// ServeWorkerIfChild turns the process into a sandbox worker, and never
// returns, when a supervisor started it as its own worker (the environment
// marks such a child); otherwise it returns at once.
//
// A program built as usual does not need it: the package's initialiser
// does the same before main runs, so in the worker the call is never
// reached, and in the program it only documents the intent. A program
// built with the tag rlmsandbox_noinithook, which leaves that initialiser
// out, must call it first thing in main for New to start the program as
// its own worker; until it has, New does not, and looks only for an
// rlm-worker binary. In the worker, everything that ran before the call
// (every package's initialisers, main's included, and main up to the call)
// has run again.
func ServeWorkerIfChild() {
	selfExecCalled.Store(true)
	serveIfChild()
}

// serveIfChild runs the worker and exits if this process was started as
// one. The marker is removed first, so nothing the worker starts inherits
// it. Without the marker it costs one environment lookup.
func serveIfChild() {
	if os.Getenv(workerEnv) != "1" {
		return
	}
	_ = os.Unsetenv(workerEnv)
	os.Exit(worker.Main(os.Args[1:]))
}

// selfWorker returns the executable to start as the program's own worker:
// /proc/self/exe where it exists (still the program's binary if the file
// was replaced or deleted since it started), else os.Executable.
func selfWorker() (string, error) {
	if !initHook && !selfExecCalled.Load() {
		return "", fmt.Errorf("built with the tag rlmsandbox_noinithook and supervisor.ServeWorkerIfChild not called")
	}
	const proc = "/proc/self/exe"
	if st, err := os.Stat(proc); err == nil && st.Mode().IsRegular() {
		return proc, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("the running executable: %w", err)
	}
	return exe, nil
}
