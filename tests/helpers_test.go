// Package tests holds black-box tests of rlm-sandbox: real Pyodide, real
// worker processes. Run them with `make test`, which first builds the
// binaries and fetches Pyodide.
package tests

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
)

// mode is one way of running sandboxes under test.
type mode struct {
	name string
	cfg  func(supervisor.Config) supervisor.Config
}

var directMode = mode{"direct", func(c supervisor.Config) supervisor.Config {
	c.UseWorker = supervisor.WorkerNever
	return c
}}

var workerMode = mode{"worker", func(c supervisor.Config) supervisor.Config {
	c.UseWorker = supervisor.WorkerAlways
	return c
}}

// modes lists the modes every behaviour is checked in.
var modes = []mode{workerMode, directMode}

func forEachMode(t *testing.T, f func(t *testing.T, m mode)) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { f(t, m) })
	}
}

// newSandbox starts an initialised sandbox with context value and destroys
// it when the test ends.
func newSandbox(t *testing.T, m mode, cfg supervisor.Config, value any) supervisor.Sandbox {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := supervisor.New(ctx, m.cfg(cfg))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { sb.Destroy() })
	if info := sb.Info(); info.Worker != (m.name == "worker") || (info.Worker && info.PID <= 0) {
		t.Fatalf("mode %s: sandbox info %+v", m.name, info)
	}
	if err := sb.Initialize(ctx, value); err != nil {
		t.Fatalf("Initialize: %v", err)
	}
	return sb
}

func exec(t *testing.T, sb supervisor.Sandbox, code string) *supervisor.CodeExecution {
	t.Helper()
	ce, err := sb.Execute(context.Background(), code)
	if err != nil {
		t.Fatalf("Execute(%q): %v", code, err)
	}
	return ce
}

// lineWaiter lets a test wait for a line printed by Python.
type lineWaiter struct {
	mu    sync.Mutex
	lines []string
	ch    chan string
}

func newLineWaiter() *lineWaiter { return &lineWaiter{ch: make(chan string, 100)} }

func (w *lineWaiter) onLine(line string) {
	w.mu.Lock()
	w.lines = append(w.lines, line)
	w.mu.Unlock()
	select {
	case w.ch <- line:
	default:
	}
}

func (w *lineWaiter) wait(t *testing.T, want string) {
	t.Helper()
	timeout := time.NewTimer(time.Minute)
	defer timeout.Stop()
	for {
		select {
		case l := <-w.ch:
			if l == want {
				return
			}
		case <-timeout.C:
			t.Fatalf("no line %q printed within a minute", want)
		}
	}
}

func TestMain(m *testing.M) {
	if kind := os.Getenv(fakeWorkerEnv); kind != "" {
		os.Exit(fakeWorker(kind))
	}
	// The worker binary `make` builds, unless the caller says otherwise.
	if os.Getenv("RLM_WORKER") == "" {
		if p, err := filepath.Abs("../bin/rlm-worker"); err == nil {
			os.Setenv("RLM_WORKER", p)
		}
	}
	os.Exit(m.Run())
}
