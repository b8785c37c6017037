//go:build linux

package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
)

// procStatus returns a field of /proc/PID/status ("Seccomp", say).
func procStatus(t *testing.T, pid int, field string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read the worker's status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return ""
}

// The normal suite runs with hardening on: a worker reports each layer as
// applied or refused, and the kernel's view of it agrees.
func TestHardeningApplied(t *testing.T) {
	ctx := context.Background()
	sb, err := supervisor.New(ctx, workerMode.cfg(supervisor.Config{}))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy()
	info := sb.Info()
	t.Logf("applied %v, refused %v", info.Hardening, info.HardeningRefused)
	for _, layer := range []string{"pgid", "rlimits", "no_new_privs", "seccomp"} {
		if !slices.Contains(info.Hardening, layer) {
			t.Errorf("%s not applied (applied %v, refused %v)", layer, info.Hardening, info.HardeningRefused)
		}
	}
	for _, layer := range []string{"landlock", "userns", "netns"} {
		if slices.Contains(info.Hardening, layer) {
			continue
		}
		if !slices.ContainsFunc(info.HardeningRefused, func(r string) bool { return strings.Contains(r, layer) }) {
			t.Errorf("%s neither applied nor refused: applied %v, refused %v", layer, info.Hardening, info.HardeningRefused)
		}
	}
	if got := procStatus(t, info.PID, "Seccomp"); got != "2" {
		t.Errorf("Seccomp: %s, want 2 (filter)", got)
	}
	if got := procStatus(t, info.PID, "NoNewPrivs"); got != "1" {
		t.Errorf("NoNewPrivs: %s, want 1", got)
	}
	if pgid, err := syscall.Getpgid(info.PID); err != nil || pgid != info.PID {
		t.Errorf("the worker's process group is %d (%v), want its own, %d", pgid, err, info.PID)
	}
	if err := sb.Initialize(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	res, err := sb.Execute(ctx, "import json, re\nprint(json.dumps({'n': len(re.findall('a', 'banana'))}))")
	if err != nil || res.Error != "" || res.Stdout != "{\"n\": 3}\n" {
		t.Fatalf("execute in a locked-down worker: %+v, %v", res, err)
	}
	st, err := sb.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.RSSBytes == 0 {
		t.Errorf("Stats.RSSBytes is 0: the worker could not read its /proc/self/statm once locked down")
	}
	if !slices.Equal(st.Hardening, info.Hardening) {
		t.Errorf("Stats.Hardening %v, Info.Hardening %v", st.Hardening, info.Hardening)
	}
}

func TestHardeningOff(t *testing.T) {
	ctx := context.Background()
	sb, err := supervisor.New(ctx, workerMode.cfg(supervisor.Config{Hardening: supervisor.HardeningOff}))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy()
	info := sb.Info()
	if len(info.Hardening) != 0 {
		t.Errorf("HardeningOff, yet applied: %v", info.Hardening)
	}
	if got := procStatus(t, info.PID, "Seccomp"); got != "0" {
		t.Errorf("Seccomp: %s, want 0", got)
	}
	d, err := supervisor.New(ctx, directMode.cfg(supervisor.Config{}))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Destroy()
	if di := d.Info(); len(di.Hardening) != 0 || len(di.HardeningRefused) == 0 {
		t.Errorf("direct mode: applied %v, refused %v; want nothing applied and the refusal said", di.Hardening, di.HardeningRefused)
	}
}

// lineLog is a slog.Handler that hands each line the worker logs (the
// supervisor's "worker" records) to a channel.
type lineLog struct {
	mu    sync.Mutex
	lines []string
	ch    chan string
}

func (l *lineLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *lineLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *lineLog) WithGroup(string) slog.Handler            { return l }
func (l *lineLog) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "line" {
			l.mu.Lock()
			l.lines = append(l.lines, a.Value.String())
			l.mu.Unlock()
			select {
			case l.ch <- a.Value.String():
			default:
			}
		}
		return true
	})
	return nil
}

// escapeWorker builds rlm-worker with its escape probe (build tag
// rlmescape, absent from release builds), with the patched wazero when
// `make` has prepared it.
func escapeWorker(t *testing.T) string {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "rlm-worker-escape")
	args := []string{"build", "-tags", "rlmescape", "-o", exe}
	if _, err := os.Stat("../build/go.patched.mod"); err == nil {
		args = append(args, "-modfile=../build/go.patched.mod")
	}
	cmd := osexec.Command("go", append(args, "../cmd/rlm-worker")...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the escape worker: %v\n%s", err, out)
	}
	return exe
}

// escapeAttempt is one attempt the probe logged.
type escapeAttempt struct {
	Msg     string `json:"msg"`
	Attempt string `json:"attempt"`
	Err     string `json:"err"`
	Denied  bool   `json:"denied"`
}

// runProbe starts the escape worker exe and returns its attempts by name,
// with the sandbox (usable afterwards) and the listener it was to reach.
func runProbe(t *testing.T, exe string) (map[string]escapeAttempt, supervisor.Sandbox, net.Listener) {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	t.Setenv("RLM_ESCAPE_PROBE", l.Addr().String())
	logs := &lineLog{ch: make(chan string, 100)}
	sb, err := supervisor.New(context.Background(), supervisor.Config{UseWorker: supervisor.WorkerAlways, WorkerPath: exe, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Destroy() })
	t.Logf("applied %v, refused %v", sb.Info().Hardening, sb.Info().HardeningRefused)
	got := map[string]escapeAttempt{}
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for {
		select {
		case line := <-logs.ch:
			var a escapeAttempt
			if json.Unmarshal([]byte(line), &a) != nil {
				continue
			}
			switch a.Msg {
			case "escape":
				got[a.Attempt] = a
			case "escape done":
				return got, sb, l
			}
		case <-deadline.C:
			logs.mu.Lock()
			defer logs.mu.Unlock()
			t.Fatalf("the probe did not finish within a minute; logs so far: %q", logs.lines)
		}
	}
}

// checkDenied asserts that each named attempt failed with a permission
// error.
func checkDenied(t *testing.T, got map[string]escapeAttempt, names ...string) {
	t.Helper()
	for _, name := range names {
		a, ok := got[name]
		switch {
		case !ok:
			t.Errorf("%s: not reported (a step that succeeded, or a changed probe); reported: %v", name, got)
		case a.Err == "<nil>" || !a.Denied:
			t.Errorf("%s: got %s, want a permission error", name, a.Err)
		default:
			t.Logf("%s: %s", name, a.Err)
		}
	}
}

// noConnection asserts that nothing reached the listener: Accept finds no
// connection waiting.
func noConnection(t *testing.T, l net.Listener) {
	t.Helper()
	_ = l.(*net.TCPListener).SetDeadline(time.Now())
	if c, err := l.Accept(); err == nil {
		c.Close()
		t.Errorf("the worker connected to the test's listener")
	}
}

// TestEscape runs a worker that, once locked down, tries from Go what code
// that broke through the WebAssembly boundary would: every attempt must
// fail with a permission error.
func TestEscape(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a worker")
	}
	exe := escapeWorker(t)
	t.Run("all layers", func(t *testing.T) {
		got, sb, l := runProbe(t, exe)
		pid := sb.Info().PID
		checkDenied(t, got,
			"open /etc/passwd",
			fmt.Sprintf("create /tmp/rlm-escape-%d", pid),
			"socket", "dial "+l.Addr().String(),
			"execve /bin/sh", "os/exec /bin/sh", "fork", "vfork",
			"ptrace attach 1", "kill 1", "mount", "unshare user", "bpf", "setrlimit nofile")
		if _, err := os.Stat(fmt.Sprintf("/tmp/rlm-escape-%d", pid)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the probe's file exists in /tmp (%v)", err)
		}
		noConnection(t, l)
		// And the worker still works.
		ctx := context.Background()
		if err := sb.Initialize(ctx, "x"); err != nil {
			t.Fatal(err)
		}
		if res, err := sb.Execute(ctx, "print(6*7)"); err != nil || res.Stdout != "42\n" {
			t.Fatalf("execute after the probe: %+v, %v", res, err)
		}
	})
	// Each wall holds on its own: without seccomp, Landlock still denies
	// the files and the executable.
	t.Run("landlock alone", func(t *testing.T) {
		t.Setenv("RLM_ESCAPE_NO_SECCOMP", "1")
		got, sb, l := runProbe(t, exe)
		if !slices.Contains(sb.Info().Hardening, "landlock") {
			t.Skipf("no Landlock here: %v", sb.Info().HardeningRefused)
		}
		if slices.Contains(sb.Info().Hardening, "seccomp") {
			t.Fatalf("seccomp applied: %v", sb.Info().Hardening)
		}
		pid := sb.Info().PID
		checkDenied(t, got, "open /etc/passwd", fmt.Sprintf("create /tmp/rlm-escape-%d", pid), "execve /bin/sh", "os/exec /bin/sh")
		if a := got["connect "+l.Addr().String()]; a.Err == "<nil>" || a.Err == "" {
			t.Errorf("connect: %+v, want it refused (Landlock, or the network namespace)", a)
		} else {
			t.Logf("connect: %s", a.Err)
		}
		noConnection(t, l)
	})
}
