package tests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	osexec "os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/ipc"
	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
)

func TestModeSelection(t *testing.T) {
	ctx := context.Background()
	t.Run("worker by default", func(t *testing.T) {
		sb, err := supervisor.New(ctx, supervisor.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Destroy()
		if info := sb.Info(); !info.Worker || info.PID <= 0 || info.PythonVersion != "3.14.2" {
			t.Fatalf("info %+v", info)
		}
	})
	t.Run("direct when told", func(t *testing.T) {
		sb, err := supervisor.New(ctx, supervisor.Config{UseWorker: supervisor.WorkerNever})
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Destroy()
		if info := sb.Info(); info.Worker || info.PID != 0 || !strings.Contains(info.Reason, "never") {
			t.Fatalf("info %+v", info)
		}
	})
	t.Run("direct when the binary is missing", func(t *testing.T) {
		sb, err := supervisor.New(ctx, supervisor.Config{WorkerPath: "/nonexistent/rlm-worker"})
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Destroy()
		if info := sb.Info(); info.Worker || !strings.Contains(info.Reason, "worker unavailable") {
			t.Fatalf("info %+v", info)
		}
		if err := sb.Initialize(ctx, "x"); err != nil {
			t.Fatal(err)
		}
		if ce := exec(t, sb, "print(context)"); ce.Stdout != "x\n" {
			t.Fatalf("%+v", ce)
		}
	})
	// A worker that was found and started, then failed to come up, is
	// New's error: not a reason to run the code in-process, without the
	// worker's walls. A program that prints on its stdout (a stale or
	// foreign rlm-worker, an init function's banner in a program that is
	// its own worker) is named with what it printed.
	t.Run("a worker that fails to come up is an error, not direct mode", func(t *testing.T) {
		dir := t.TempDir()
		printing := filepath.Join(dir, "printing")
		silent := filepath.Join(dir, "silent")
		for path, script := range map[string]string{
			printing: "#!/bin/sh\necho 'usage: rlm-worker [flags]'\nexec sleep 60\n",
			silent:   "#!/bin/sh\nexec sleep 60\n",
		} {
			if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []struct {
			path, want string
			also       error
		}{
			{printing, `"usage: rlm-worker [flags]\n"`, supervisor.ErrProtocol},
			{silent, "did not start within", supervisor.ErrWorkerUnavailable},
		} {
			sb, err := supervisor.New(ctx, supervisor.Config{WorkerPath: c.path, StartTimeout: time.Second})
			if err == nil {
				info := sb.Info()
				sb.Destroy()
				t.Fatalf("%s: a sandbox (%+v), want an error", c.path, info)
			}
			if !errors.Is(err, supervisor.ErrWorkerUnavailable) || !errors.Is(err, c.also) ||
				!strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.path) {
				t.Errorf("%s: %v", c.path, err)
			}
		}
	})
	t.Run("always without a binary fails", func(t *testing.T) {
		_, err := supervisor.New(ctx, supervisor.Config{UseWorker: supervisor.WorkerAlways, WorkerPath: "/nonexistent/rlm-worker"})
		if !errors.Is(err, supervisor.ErrWorkerUnavailable) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("protocol mismatch", func(t *testing.T) {
		t.Setenv(fakeWorkerEnv, "proto99")
		_, err := supervisor.New(ctx, supervisor.Config{UseWorker: supervisor.WorkerAlways, WorkerPath: os.Args[0]})
		if !errors.Is(err, ipc.ErrProtocolMismatch) || !strings.Contains(err.Error(), "protocol 99") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("exits at once", func(t *testing.T) {
		t.Setenv(fakeWorkerEnv, "exit0")
		_, err := supervisor.New(ctx, supervisor.Config{UseWorker: supervisor.WorkerAlways, WorkerPath: os.Args[0]})
		if !errors.Is(err, supervisor.ErrWorkerUnavailable) || !strings.Contains(err.Error(), "exited during start-up with status 0") {
			t.Fatalf("err = %v", err)
		}
	})
	// A worker that dies in the middle of a frame died: ErrWorkerExited,
	// with its exit status, not a corrupt frame (ErrProtocol).
	t.Run("killed in a frame", func(t *testing.T) {
		t.Setenv(fakeWorkerEnv, "cut")
		sb, err := supervisor.New(ctx, supervisor.Config{UseWorker: supervisor.WorkerAlways, WorkerPath: os.Args[0]})
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Destroy()
		err = sb.Initialize(ctx, "x")
		if !errors.Is(err, supervisor.ErrWorkerExited) || !errors.Is(err, supervisor.ErrDead) || errors.Is(err, supervisor.ErrProtocol) ||
			!strings.Contains(err.Error(), "signal: killed") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("corrupt frames", func(t *testing.T) {
		t.Setenv(fakeWorkerEnv, "garbage")
		sb, err := supervisor.New(ctx, supervisor.Config{UseWorker: supervisor.WorkerAlways, WorkerPath: os.Args[0]})
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Destroy()
		err = sb.Initialize(ctx, "x")
		if !errors.Is(err, supervisor.ErrDead) {
			t.Fatalf("err = %v", err)
		}
	})
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// A worker that says its code returned but sends no reply is not taken at
// its word: the stop after which no interrupt was sent still ends in a
// kill, GracePeriod later.
func TestWorkerSaysReturnedButNeverReplies(t *testing.T) {
	t.Setenv(fakeWorkerEnv, "liar")
	ctx := context.Background()
	sb, err := supervisor.New(ctx, supervisor.Config{UseWorker: supervisor.WorkerAlways, WorkerPath: os.Args[0],
		Timeout: 100 * time.Millisecond, GracePeriod: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy()
	if err := sb.Initialize(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := sb.Execute(ctx, "pass")
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, supervisor.ErrTimeout) || !errors.Is(err, supervisor.ErrDead) || !strings.Contains(err.Error(), "sent no reply") {
			t.Fatalf("Execute: %v, want ErrTimeout and ErrDead, saying the worker sent no reply", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Execute still waits a minute after its Timeout for a worker that said its code returned")
	}
}

func TestWorkerKilledMidExecute(t *testing.T) {
	w := newLineWaiter()
	sb := newSandbox(t, workerMode, supervisor.Config{OnStdout: w.onLine}, "")
	pid := sb.Info().PID
	ch := startBlocking(t, sb, w, context.Background(), "while True: pass")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := wait(t, ch)
	if !errors.Is(r.err, supervisor.ErrWorkerExited) || !errors.Is(r.err, supervisor.ErrDead) {
		t.Fatalf("err = %v, want ErrWorkerExited", r.err)
	}
	if r.ce == nil || r.ce.Stdout != "started\n" {
		t.Fatalf("partial output lost: %+v", r.ce)
	}
	if _, err := sb.Execute(context.Background(), "pass"); !errors.Is(err, supervisor.ErrWorkerExited) {
		t.Fatalf("later call: %v", err)
	}
	if _, _, err := sb.GetVariable(context.Background(), "x"); !errors.Is(err, supervisor.ErrWorkerExited) {
		t.Fatalf("later call: %v", err)
	}
	if err := sb.Destroy(); err != nil {
		t.Fatal(err)
	}
}

func TestDestroyKillsWorker(t *testing.T) {
	sb := newSandbox(t, workerMode, supervisor.Config{}, "")
	pid := sb.Info().PID
	if !alive(pid) {
		t.Fatalf("worker %d not running", pid)
	}
	if err := sb.Destroy(); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Fatalf("worker %d still exists after Destroy", pid)
	}
}

func TestDestroyDuringExecute(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		w := newLineWaiter()
		sb := newSandbox(t, m, supervisor.Config{OnStdout: w.onLine}, "")
		ch := startBlocking(t, sb, w, context.Background(), "while True: pass")
		done := make(chan error, 2)
		for i := 0; i < 2; i++ { // concurrent, idempotent
			go func() { done <- sb.Destroy() }()
		}
		for i := 0; i < 2; i++ {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		r := wait(t, ch)
		if !errors.Is(r.err, supervisor.ErrDestroyed) {
			t.Fatalf("err = %v, want ErrDestroyed", r.err)
		}
	})
}

func TestConcurrentExecutesAreSerialised(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, "")
		exec(t, sb, "log = []")
		errs := make(chan error, 4)
		for i := 0; i < 4; i++ {
			go func() {
				_, err := sb.Execute(context.Background(), "log.append('a')\nimport time\ntime.sleep(0.01)\nlog.append('b')")
				errs <- err
			}()
		}
		for i := 0; i < 4; i++ {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		ce := exec(t, sb, "print(''.join(log))")
		if ce.Stdout != "abababab\n" {
			t.Fatalf("interleaved: %q", ce.Stdout)
		}
	})
}

// TestWorkerMemoryIsReturned checks the point of one process per sandbox:
// the supervisor's memory stays flat however much the sandboxes allocated,
// and no worker outlives its sandbox.
func TestWorkerMemoryIsReturned(t *testing.T) {
	if testing.Short() {
		t.Skip("50 sandboxes")
	}
	ctx := context.Background()
	var pids []int
	cycle := func() {
		sb, err := supervisor.New(ctx, supervisor.Config{UseWorker: supervisor.WorkerAlways})
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, sb.Info().PID)
		if err := sb.Initialize(ctx, ""); err != nil {
			t.Fatal(err)
		}
		ce, err := sb.Execute(ctx, "block = bytearray(200 * 1024 * 1024)\nblock[-1] = 1\nprint(len(block))")
		if err != nil || ce.Stdout != "209715200\n" {
			t.Fatalf("%+v %v", ce, err)
		}
		if err := sb.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		cycle()
	}
	before := rss(t)
	for i := 0; i < 50; i++ {
		cycle()
	}
	after := rss(t)
	t.Logf("supervisor RSS before %d MB, after 50 cycles %d MB", before>>20, after>>20)
	if after > before+8<<20 {
		t.Fatalf("supervisor RSS grew from %d to %d bytes", before, after)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Fatalf("worker %d outlived its sandbox", pid)
		}
	}
}

func rss(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	var pages int64
	for _, c := range f[1] {
		pages = pages*10 + int64(c-'0')
	}
	return pages * int64(os.Getpagesize())
}

// fake workers, dispatched from TestMain ------------------------------------

const fakeWorkerEnv = "RLM_TEST_FAKE_WORKER"

func fakeWorker(kind string) int {
	w := ipc.NewWriter(os.Stdout)
	switch kind {
	case "proto99":
		w.WriteMessage(ipc.KindHello, 0, ipc.Hello{ProtocolVersion: 99, PythonVersion: "3.14.2", PyodideVersion: "x", PID: os.Getpid()})
	case "garbage":
		w.WriteMessage(ipc.KindHello, 0, ipc.Hello{ProtocolVersion: ipc.ProtocolVersion, PythonVersion: "3.14.2", PyodideVersion: "x", PID: os.Getpid()})
		os.Stdout.Write([]byte{0, 0, 0, 5, 0xc1, 0xc1, 0xc1, 0xc1, 0xc1})
	case "exit0":
		return 0
	case "cut":
		// Killed in the middle of a frame, as a worker killed while it
		// writes a large reply is: the first request gets half a frame.
		w.WriteMessage(ipc.KindHello, 0, ipc.Hello{ProtocolVersion: ipc.ProtocolVersion, PythonVersion: "3.14.2", PyodideVersion: "x", PID: os.Getpid()})
		w.Flush()
		if _, err := ipc.NewReader(os.Stdin).ReadMessage(); err != nil {
			return 1
		}
		os.Stdout.Write([]byte{0, 0, 0x10, 0, 0xc1, 0xc1})
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	case "liar":
		// Says in the interrupt page that an Execute's code returned,
		// and never replies to it.
		page, err := ipc.OpenPage(os.NewFile(3, "interrupt-page"))
		if err != nil {
			return 1
		}
		w.WriteMessage(ipc.KindHello, 0, ipc.Hello{ProtocolVersion: ipc.ProtocolVersion, PythonVersion: "3.14.2", PyodideVersion: "x", PID: os.Getpid()})
		w.Flush()
		rd := ipc.NewReader(os.Stdin)
		for {
			m, err := rd.ReadMessage()
			if err != nil {
				return 0
			}
			switch m.Kind {
			case ipc.KindInitialize:
				w.WriteMessage(ipc.KindInitializeReply, m.ID, ipc.InitializeReply{})
				w.Flush()
			case ipc.KindExecute:
				page.MarkReturned(m.ID)
			}
		}
	}
	time.Sleep(time.Minute) // until killed
	return 0
}

// TestNoLeaks checks that create/execute/destroy cycles, including killed
// and crashed workers, leave no goroutine, descriptor or process behind.
func TestNoLeaks(t *testing.T) {
	ctx := context.Background()
	cycle := func(i int) {
		cfg := supervisor.Config{UseWorker: supervisor.WorkerAlways, Timeout: 100 * time.Millisecond, GracePeriod: 100 * time.Millisecond,
			OnLLMQuery: func(_ context.Context, p string) (string, error) { return p, nil }}
		sb, err := supervisor.New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := sb.Initialize(ctx, "x"); err != nil {
			t.Fatal(err)
		}
		switch i % 3 {
		case 0: // a batch leaves goroutines waiting for the next one
			exec(t, sb, "print(llm_query_batched(['a', 'b', 'c']))")
		case 1: // killed after ignoring the interrupt
			sb.Execute(ctx, "while True:\n  try:\n    while True: pass\n  except KeyboardInterrupt: pass")
		case 2: // crashed from outside
			syscall.Kill(sb.Info().PID, syscall.SIGKILL)
			sb.Execute(ctx, "pass")
		}
		if err := sb.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
	cycle(0)
	fds, goroutines := openFDs(t), numGoroutine()
	for i := 0; i < 9; i++ {
		cycle(i)
	}
	// Goroutines of finished sandboxes end right after Destroy returns;
	// wait for that without sleeping blindly.
	deadline := time.Now().Add(10 * time.Second)
	for numGoroutine() > goroutines && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if g := numGoroutine(); g > goroutines {
		t.Errorf("goroutines: %d before, %d after", goroutines, g)
	}
	if f := openFDs(t); f > fds {
		t.Errorf("open descriptors: %d before, %d after", fds, f)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func numGoroutine() int { return goruntime.NumGoroutine() }

// TestWorkerKilledInStubbornCallback: a worker killed while the code waits
// for an llm_query whose callback ignores its context: Execute still
// returns ErrWorkerExited at once, not when the callback returns.
func TestWorkerKilledInStubbornCallback(t *testing.T) {
	fn, started, _ := blockingBridge(t, true)
	sb := newSandbox(t, workerMode, supervisor.Config{OnLLMQuery: fn}, "")
	pid := sb.Info().PID
	ch := make(chan error, 1)
	go func() {
		_, err := sb.Execute(context.Background(), "llm_query('slow')")
		ch <- err
	}()
	<-started
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ch:
		if !errors.Is(err, supervisor.ErrWorkerExited) {
			t.Fatalf("err = %v, want ErrWorkerExited", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Execute waits for a callback that ignores its context after the worker died")
	}
}

// TestIsCompleteOnAStoppedWorker checks that IsComplete, like the requests
// that move values, runs under a run: on a worker that does not answer
// (stopped here), Cancel ends it (and the worker, GracePeriod later),
// instead of it holding the sandbox, and every later call, for ever.
func TestIsCompleteOnAStoppedWorker(t *testing.T) {
	sb := newSandbox(t, workerMode, supervisor.Config{GracePeriod: 200 * time.Millisecond}, "")
	stopProcess(t, sb.Info().PID)
	done := make(chan error, 1)
	go func() {
		_, err := sb.IsComplete(context.Background(), "x = 1")
		done <- err
	}()
	tick := time.NewTicker(10 * time.Millisecond) // Cancel does nothing until the request runs
	defer tick.Stop()
	deadline := time.After(time.Minute)
	for {
		select {
		case err := <-done:
			if !errors.Is(err, supervisor.ErrCanceled) || !errors.Is(err, supervisor.ErrDead) {
				t.Fatalf("IsComplete: %v, want ErrCanceled and ErrDead", err)
			}
			if _, err := sb.Execute(context.Background(), "pass"); !errors.Is(err, supervisor.ErrDead) {
				t.Fatalf("Execute after: %v, want ErrDead", err)
			}
			return
		case <-tick.C:
			sb.Cancel()
		case <-deadline:
			t.Fatal("IsComplete on a stopped worker still waiting after a minute of Cancel calls")
		}
	}
}

// A SetVariable that Destroy lands in reports ErrDestroyed in both modes:
// what it set is gone with the interpreter. The old value's __del__ runs
// as the variable is replaced, and calls the host, which destroys the
// sandbox before it answers.
func TestDestroyDuringSetVariable(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		var sb supervisor.Sandbox
		destroyed := make(chan error, 1)
		sb = newSandbox(t, m, supervisor.Config{
			OnLLMQuery: func(context.Context, string) (string, error) {
				destroyed <- sb.Destroy()
				return "ok", nil
			},
		}, "")
		exec(t, sb, "class D:\n    def __del__(self): llm_query('del')\nx = D()")
		err := sb.SetVariable(context.Background(), "x", 1)
		if e := <-destroyed; e != nil {
			t.Fatalf("Destroy: %v", e)
		}
		if !errors.Is(err, supervisor.ErrDestroyed) {
			t.Fatalf("SetVariable during Destroy: %v, want an error matching ErrDestroyed", err)
		}
	})
}

// A worker offers itself to the kernel's out-of-memory killer before its
// supervisor (which survives a worker's death, not the other way round).
func TestWorkerGoesFirstOnOOM(t *testing.T) {
	sb := newSandbox(t, workerMode, supervisor.Config{}, "")
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", sb.Info().PID))
	if err != nil {
		t.Skip("no oom_score_adj here:", err)
	}
	self, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		t.Fatal(err)
	}
	w, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	s, _ := strconv.Atoi(strings.TrimSpace(string(self)))
	if w <= s {
		t.Fatalf("worker's oom_score_adj %d, the supervisor's %d: want the worker's higher", w, s)
	}
}

// A worker stopped (SIGSTOP) while its code runs takes no interrupt: it is
// killed after the grace period like code that ignores one, and the error
// says that its process was stopped (it said the code was in a call in C).
func TestWorkerStoppedMidExecute(t *testing.T) {
	w := newLineWaiter()
	sb := newSandbox(t, workerMode, supervisor.Config{OnStdout: w.onLine, Timeout: 300 * time.Millisecond, GracePeriod: 200 * time.Millisecond}, "")
	ch := startBlocking(t, sb, w, context.Background(), "while True: pass")
	stopProcess(t, sb.Info().PID)
	r := wait(t, ch)
	if !errors.Is(r.err, supervisor.ErrTimeout) || !errors.Is(r.err, supervisor.ErrDead) || !strings.Contains(r.err.Error(), "its process was stopped") {
		t.Fatalf("err = %v, want a timeout that killed the stopped worker, saying it was stopped", r.err)
	}
}

// memoryCgroup makes a memory cgroup of limit bytes (cgroup v1's memory
// controller or cgroup v2's), or skips the test where this process may
// not.
func memoryCgroup(t *testing.T, limit int64) (procs string) {
	t.Helper()
	name := fmt.Sprintf("rlm-sandbox-test-%d", os.Getpid())
	var dir, limitFile string
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		dir, limitFile = filepath.Join("/sys/fs/cgroup", name), "memory.max"
	} else {
		dir, limitFile = filepath.Join("/sys/fs/cgroup/memory", name), "memory.limit_in_bytes"
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skip("no memory cgroup of our own here:", err)
	}
	t.Cleanup(func() { _ = os.Remove(dir) }) // once the worker is reaped
	if err := os.WriteFile(filepath.Join(dir, limitFile), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		t.Skip("cannot limit a cgroup's memory here:", err)
	}
	return filepath.Join(dir, "cgroup.procs")
}

// A worker the kernel kills for want of memory gives an error that says
// so (ErrOutOfMemory, with ErrWorkerExited), with a hint at
// --memory-limit; a worker killed by someone else does not, even when the
// kernel killed for want of memory elsewhere meanwhile.
func TestWorkerOutOfMemoryKill(t *testing.T) {
	procs := memoryCgroup(t, 200<<20)
	other := newSandbox(t, workerMode, supervisor.Config{}, "")

	// The command, and so its worker, in the cgroup from the start.
	cmd := osexec.Command("/bin/sh", "-c", `echo $$ > "$0" && exec "$@"`, procs, cliBin(t),
		"exec", "-c", "x = b'x' * (400 * 10**6)")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	code := exitStatus(t, cmd.Run())
	if code != 3 || !strings.Contains(stderr.String(), "out-of-memory killer") || !strings.Contains(stderr.String(), "--memory-limit") {
		t.Fatalf("a worker over its cgroup's memory: exit %d, stderr:\n%s", code, stderr.String())
	}

	if err := syscall.Kill(other.Info().PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, err := other.Execute(context.Background(), "print(1)")
	if !errors.Is(err, supervisor.ErrWorkerExited) || errors.Is(err, supervisor.ErrOutOfMemory) {
		t.Fatalf("a worker killed by kill(2): err = %v, want ErrWorkerExited without ErrOutOfMemory", err)
	}
}

// A worker that says it compiles Pyodide (the first run on a machine) is
// given the time a compile takes, not StartTimeout: a compile cut short
// leaves nothing cached, so every later start would fail the same way.
// The command shows the notice as a line of its own.
func TestWorkerCompilingGetsTime(t *testing.T) {
	const notice = "rlm-sandbox: compiling Pyodide 314.0.7 to native code (once per machine, about 10 s)"
	fake := filepath.Join(t.TempDir(), "compiling")
	script := "#!/bin/sh\necho '" + notice + "' >&2\nsleep 2\nexit 7\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	}), nil))
	_, err := supervisor.New(context.Background(), supervisor.Config{WorkerPath: fake, StartTimeout: 500 * time.Millisecond, Logger: logger})
	if !errors.Is(err, supervisor.ErrWorkerUnavailable) || !strings.Contains(err.Error(), "exit status 7") {
		t.Fatalf("err = %v, want the worker's own exit (status 7) after its 2 s, past a StartTimeout of 500ms", err)
	}
	mu.Lock()
	logged := logs.String()
	mu.Unlock()
	if !strings.Contains(logged, "level=WARN") || !strings.Contains(logged, notice) {
		t.Errorf("the notice was not logged as a warning:\n%s", logged)
	}

	_, stderr, code := runCLIEnv(t, []string{"RLM_WORKER=" + fake}, "", "exec", "--require-worker", "-c", "pass")
	if code == 0 || !strings.Contains(stderr, "\n"+notice+"\n") && !strings.HasPrefix(stderr, notice+"\n") {
		t.Errorf("exec with a worker that compiles: exit %d, stderr:\n%s", code, stderr)
	}
}

// writerFunc is an io.Writer made of a function.
type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestWorkerWrapperChild: a worker started through a wrapper script whose
// child keeps the worker's pipes open (`sleep &` before exec, or a script
// that runs its command without exec) does not hold up New or Destroy:
// they waited for the end of its stderr, with no time limit (New ignored
// StartTimeout and ctx for 12 minutes); and the hardened worker's process
// group goes with it, the child included.
func TestWorkerWrapperChild(t *testing.T) {
	dir := t.TempDir()
	childPid := filepath.Join(dir, "child.pid")
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	readPid := func() int {
		b, err := os.ReadFile(childPid)
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		return pid
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, h := range []supervisor.Hardening{supervisor.HardeningOn, supervisor.HardeningOff} {
		t.Run("Destroy/"+h.String(), func(t *testing.T) {
			wrapper := script("bg.sh", "sleep 1000 &\necho $! > "+childPid+"\nexec "+os.Getenv("RLM_WORKER")+" \"$@\"\n")
			sb, err := supervisor.New(ctx, supervisor.Config{UseWorker: supervisor.WorkerAlways, WorkerPath: wrapper, Hardening: h})
			if err != nil {
				t.Fatal(err)
			}
			if err := sb.Initialize(ctx, "x"); err != nil {
				t.Fatal(err)
			}
			if ce := exec(t, sb, "print(context)"); ce.Stdout != "x\n" {
				t.Fatalf("%+v", ce)
			}
			destroyed := make(chan error, 1)
			go func() { destroyed <- sb.Destroy() }()
			select {
			case <-destroyed:
			case <-ctx.Done():
				t.Fatal("Destroy still waits a minute later")
			}
			if h == supervisor.HardeningOn {
				waitGone(t, []int{readPid()}, 10*time.Second) // it was in the worker's process group
			} else {
				syscall.Kill(readPid(), syscall.SIGKILL) // a plain child process's child: left
			}
		})
	}
	t.Run("New", func(t *testing.T) {
		wrapper := script("fg.sh", "sleep 1000 &\necho $! > "+childPid+"\nwait\n")
		start, cancelStart := context.WithTimeout(ctx, 30*time.Second)
		defer cancelStart()
		sb, err := supervisor.New(start, supervisor.Config{UseWorker: supervisor.WorkerAlways, WorkerPath: wrapper, StartTimeout: time.Second})
		if err == nil {
			sb.Destroy()
			t.Fatal("New started a worker that never says hello")
		}
		if start.Err() != nil || !errors.Is(err, supervisor.ErrWorkerUnavailable) {
			t.Fatalf("New returned %v (its context: %v), want ErrWorkerUnavailable within StartTimeout", err, start.Err())
		}
		waitGone(t, []int{readPid()}, 10*time.Second)
	})
	// A binary that exits at once (not an rlm-worker: a usage message):
	// the error quotes what it wrote, which the default Config.Logger
	// discards.
	t.Run("exits at once", func(t *testing.T) {
		wrapper := script("usage.sh", "echo 'line one' >&2\necho 'unknown flag: --cache' >&2\nexit 2\n")
		_, err := supervisor.New(ctx, supervisor.Config{UseWorker: supervisor.WorkerAlways, WorkerPath: wrapper})
		if !errors.Is(err, supervisor.ErrWorkerUnavailable) || !strings.Contains(err.Error(), `"line one\nunknown flag: --cache"`) {
			t.Fatalf("New returned %v, want ErrWorkerUnavailable quoting what the binary wrote", err)
		}
	})
	// Its context ending first: the error says that starting a sandbox
	// was cancelled (it said "execution canceled").
	t.Run("New canceled", func(t *testing.T) {
		wrapper := script("fg2.sh", "sleep 1000 &\necho $! > "+childPid+"\nwait\n")
		start, cancelStart := context.WithTimeout(ctx, time.Second)
		defer cancelStart()
		sb, err := supervisor.New(start, supervisor.Config{UseWorker: supervisor.WorkerAlways, WorkerPath: wrapper, StartTimeout: time.Minute})
		if err == nil {
			sb.Destroy()
			t.Fatal("New started a worker that never says hello")
		}
		if !errors.Is(err, supervisor.ErrCanceled) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "start a sandbox") || strings.Contains(err.Error(), "execution") {
			t.Fatalf("New returned %v, want ErrCanceled saying that starting a sandbox was", err)
		}
		waitGone(t, []int{readPid()}, 10*time.Second)
	})
}

// stopProcess stops pid (SIGSTOP) and waits until it is: the signal is
// delivered after kill returns, and a request sent at once could be
// answered first (an IsComplete on a "stopped" worker came back).
func stopProcess(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'T' {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d not stopped 10 s after SIGSTOP: %s", pid, b)
		}
		time.Sleep(time.Millisecond) // polling /proc: nothing to wait on
	}
}
